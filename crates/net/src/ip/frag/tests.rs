//! The reassembly table and the IPv4 fragmenter, fragment by fragment, with the
//! counters each case must move.

use super::*;
use dev::rng::Rng;
use wire::{Ipv6FragHeader, Ipv6Packet};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
const DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

fn t(s: u64) -> Instant {
    Instant::from_secs(s)
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 + 7) as u8).collect()
}

/// An IPv4 header (with `opts`, a multiple of 4 bytes) for `len` bytes of data at
/// `off`.
fn hdr4(src: Ipv4Addr, id: u16, opts: &[u8], len: usize, off: usize, more: bool) -> Vec<u8> {
    let hlen = 20 + opts.len();
    let mut v = vec![0u8; hlen];
    v[20..].copy_from_slice(opts);
    let mut p = Ipv4Packet::new_unchecked(&mut v[..]);
    p.set_version(4);
    p.set_header_len(hlen as u8);
    p.set_total_len((hlen + len) as u16);
    p.set_ident(id);
    p.set_more_frags(more);
    p.set_frag_offset(off as u16);
    p.set_hop_limit(64);
    p.set_next_header(IpProtocol::Udp);
    p.set_src_addr(src);
    p.set_dst_addr(DST);
    p.fill_checksum();
    v
}

/// The whole datagram, as the sender built it.
fn dgram4(src: Ipv4Addr, id: u16, d: &[u8]) -> Vec<u8> {
    let mut v = hdr4(src, id, &[], d.len(), 0, false);
    v.extend_from_slice(d);
    v
}

/// Data bytes `[off, off + len)` of `d` as a fragment.
fn frag4(src: Ipv4Addr, id: u16, d: &[u8], off: usize, len: usize, more: bool) -> Mbuf {
    let mut v = hdr4(src, id, &[], len, off, more);
    v.extend_from_slice(&d[off..off + len]);
    Mbuf::from_slice(&v).unwrap()
}

/// `d` cut as a 1500-byte MTU cuts it: `(off, len, more)` of each fragment.
fn cuts(total: usize, chunk: usize) -> Vec<(usize, usize, bool)> {
    (0..total)
        .step_by(chunk)
        .map(|o| (o, chunk.min(total - o), o + chunk < total))
        .collect()
}

fn feed4(r: &mut Reass, st: &mut Stats, now: Instant, m: Mbuf) -> Option<Vec<u8>> {
    r.input4(now, m, st).map(|m| m.to_vec())
}

fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

fn table() -> (Reass, Stats) {
    (Reass::new(FragParams::default()), Stats::default())
}

#[test]
fn v4_in_order_fragments_reassemble_byte_exact() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let mut out = None;
    for (off, len, more) in cuts(3000, 1480) {
        assert!(out.is_none(), "complete before the last fragment");
        out = feed4(&mut r, &mut st, t(1), frag4(A, 7, &d, off, len, more));
    }
    let got = out.expect("reassembled");
    assert_eq!(got, dgram4(A, 7, &d));
    assert!(Ipv4Packet::new_checked(&got[..]).unwrap().verify_checksum());
    assert_eq!((st.ip.fragments, st.ip.reassembled), (3, 1));
    assert_eq!(st.total_drops(), 0);
    assert!(r.is_empty());
    assert_eq!((r.bytes(), st.ip.fragq), (0, 0));
}

#[test]
fn v4_reverse_order_reassembles() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let mut c = cuts(3000, 1480);
    c.reverse();
    let outs: Vec<_> = c
        .into_iter()
        .map(|(o, l, m)| feed4(&mut r, &mut st, t(1), frag4(A, 7, &d, o, l, m)))
        .collect();
    assert!(outs[..2].iter().all(Option::is_none));
    assert_eq!(outs[2].as_deref(), Some(&dgram4(A, 7, &d)[..]));
}

#[test]
fn v4_random_order_with_duplicates_reassembles_a_60000_byte_datagram() {
    for seed in 1..20 {
        let mut rng = Rng::new(seed);
        let (mut r, mut st) = table();
        let d = data(60_000);
        let mut c = cuts(60_000, 1480);
        let n = c.len();
        // A few exact duplicates, delivered anywhere.
        for _ in 0..5 {
            let k = rng.below(n as u64) as usize;
            c.push(c[k]);
        }
        shuffle(&mut c, &mut rng);
        let mut done = None;
        let mut after = 0;
        for (o, l, m) in c {
            if done.is_some() {
                // Copies that arrive after completion start a datagram of their own.
                after += 1;
            }
            if let Some(v) = feed4(&mut r, &mut st, t(1), frag4(A, 9, &d, o, l, m)) {
                assert!(done.is_none(), "seed {seed}: completed twice");
                done = Some(v);
            }
        }
        assert_eq!(done.as_deref(), Some(&dgram4(A, 9, &d)[..]), "seed {seed}");
        assert_eq!(st.ip.fragdropped + after, 5, "seed {seed}");
        assert_eq!(st.ip.fragoverlap, 0, "seed {seed}");
    }
}

#[test]
fn v4_exact_duplicates_are_dropped_alone_and_the_datagram_completes() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let c = cuts(3000, 1480);
    for &(o, l, m) in &[c[2], c[2], c[0], c[0]] {
        assert!(feed4(&mut r, &mut st, t(1), frag4(A, 1, &d, o, l, m)).is_none());
    }
    assert_eq!(st.ip.fragdropped, 2);
    let (o, l, m) = c[1];
    assert!(
        feed4(&mut r, &mut st, t(1), frag4(A, 1, &d, o, l, m)).is_some(),
        "the duplicates must not have spoilt the datagram"
    );
    assert_eq!(st.ip.fragoverlap, 0);
}

#[test]
fn v4_duplicate_of_the_last_fragment_is_a_duplicate() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let c = cuts(3000, 1480);
    for &(o, l, m) in &[c[2], c[2], c[0]] {
        assert!(feed4(&mut r, &mut st, t(1), frag4(A, 1, &d, o, l, m)).is_none());
    }
    assert_eq!(st.ip.fragdropped, 1);
    let (o, l, m) = c[1];
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 1, &d, o, l, m)).is_some());
}

#[test]
fn v4_overlap_drops_the_whole_datagram_and_poisons_the_key_until_the_time_out() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let c = cuts(3000, 1480);
    let (o, l, m) = c[0];
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 3, &d, o, l, m)).is_none());
    // 16 bytes from 1472: the last 8 bytes of the first fragment, rewritten.
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 3, &d, 1472, 16, true)).is_none());
    assert_eq!(
        st.ip.fragoverlap, 2,
        "the queued fragment and the overlapping one"
    );
    assert_eq!(r.bytes(), 0);
    assert_eq!(r.len(), 1, "the key stays, poisoned");
    // The honest rest of the datagram is dropped too.
    for &(o, l, m) in &c[1..] {
        assert!(feed4(&mut r, &mut st, t(2), frag4(A, 3, &d, o, l, m)).is_none());
    }
    assert_eq!(st.ip.fragdropped, 2);
    // Even a complete, fresh copy: RFC 5722 "including those not yet received".
    for &(o, l, m) in &c {
        assert!(feed4(&mut r, &mut st, t(30), frag4(A, 3, &d, o, l, m)).is_none());
    }
    assert_eq!(st.ip.fragdropped, 5);
    // Once the time-out frees the key, no ICMP error (nothing was kept) and the
    // identifier works again.
    assert_eq!(r.poll_at(), Some(t(31)));
    r.timer(t(31), &mut st);
    assert!(r.is_empty());
    assert!(r.pop_expired4().is_none());
    assert_eq!(st.ip.fragtimeout, 0);
    let mut out = None;
    for &(o, l, m) in &c {
        out = feed4(&mut r, &mut st, t(32), frag4(A, 3, &d, o, l, m));
    }
    assert_eq!(out.as_deref(), Some(&dgram4(A, 3, &d)[..]));
}

#[test]
fn v4_a_second_end_of_the_datagram_is_an_overlap() {
    let (mut r, mut st) = table();
    let d = data(3000);
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 4, &d, 2960, 40, false)).is_none());
    // Ends at 2008, with MF clear: the datagram would be 2008 bytes, not 3000.
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 4, &d, 2000, 8, false)).is_none());
    assert_eq!(st.ip.fragoverlap, 2);
    // A fragment with MF set that reaches the known end conflicts as well.
    let (mut r, mut st) = table();
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 4, &d, 2960, 40, false)).is_none());
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 4, &d, 2960, 40, true)).is_none());
    assert_eq!((st.ip.fragoverlap, st.ip.fragdropped), (2, 0));
}

#[test]
fn v4_gap_times_out_and_hands_back_the_first_fragment_for_the_icmp_error() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let c = cuts(3000, 1480);
    let first = frag4(A, 5, &d, c[0].0, c[0].1, c[0].2);
    let first_bytes = first.to_vec();
    assert!(r.input4(t(10), first, &mut st).is_none());
    let (o, l, m) = c[2];
    assert!(feed4(&mut r, &mut st, t(11), frag4(A, 5, &d, o, l, m)).is_none());
    assert_eq!(st.ip.fragq, 1);
    // Deadline: 30 s after the first-arriving fragment.
    assert_eq!(r.poll_at(), Some(t(40)));
    r.timer(t(40) - Duration::from_nanos(1), &mut st);
    assert_eq!(r.len(), 1);
    r.timer(t(40), &mut st);
    assert!(r.is_empty());
    assert_eq!(r.poll_at(), None);
    assert_eq!((st.ip.fragtimeout, st.ip.fragq, r.bytes()), (2, 0, 0));
    let m = r
        .pop_expired4()
        .expect("first fragment kept for Time Exceeded");
    assert_eq!(m.to_vec(), first_bytes, "the first fragment as it came");
    assert!(r.pop_expired4().is_none());
    assert!(r.pop_expired6().is_none());
}

#[test]
fn v4_gap_without_the_first_fragment_times_out_silently() {
    let (mut r, mut st) = table();
    let d = data(3000);
    for &(o, l, m) in &cuts(3000, 1480)[1..] {
        assert!(feed4(&mut r, &mut st, t(1), frag4(A, 6, &d, o, l, m)).is_none());
    }
    r.timer(t(31), &mut st);
    assert_eq!(st.ip.fragtimeout, 2);
    assert!(r.is_empty());
    assert!(
        r.pop_expired4().is_none(),
        "no Time Exceeded without fragment zero"
    );
}

#[test]
fn v4_fragment_at_offset_8_is_the_tiny_fragment_attack() {
    let (mut r, mut st) = table();
    let d = data(100);
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 8, &d, 8, 16, true)).is_none());
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 8, &d, 8, 4, false)).is_none());
    assert_eq!((st.ip.fragtiny, st.ip.fragments), (2, 2));
    assert!(r.is_empty(), "never queued");
}

#[test]
fn v4_bad_lengths_are_counted() {
    let (mut r, mut st) = table();
    let d = data(100);
    // MF set and 13 data bytes: not a multiple of 8.
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 9, &d, 0, 13, true)).is_none());
    // No data at all.
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 9, &d, 16, 0, false)).is_none());
    assert_eq!(st.ip.badfrags, 2);
    assert!(r.is_empty());
}

#[test]
fn v4_datagrams_longer_than_65535_bytes_are_refused() {
    let (mut r, mut st) = table();
    let d = data(65_600);
    // The ping of death: a fragment that ends past the largest datagram.
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 10, &d, 65_528, 16, false)).is_none());
    assert_eq!(st.ip.toolong, 1);
    assert!(r.is_empty());
    // Each fragment fits a 20-byte header, but the first has 20 bytes of options.
    let opts = [1u8; 20];
    let mut v = hdr4(A, 11, &opts, 32_768, 0, true);
    v.extend_from_slice(&d[..32_768]);
    assert!(r
        .input4(t(1), Mbuf::from_slice(&v).unwrap(), &mut st)
        .is_none());
    assert!(feed4(
        &mut r,
        &mut st,
        t(1),
        frag4(A, 11, &d, 32_768, 32_744, false)
    )
    .is_none());
    assert_eq!(st.ip.toolong, 3, "both fragments of the too-long datagram");
    assert!(r.is_empty());
    assert_eq!(st.ip.reassembled, 0);
}

#[test]
fn not_a_fragment_passes_through() {
    let (mut r, mut st) = table();
    let v = dgram4(A, 1, &data(10));
    let out = r.input4(t(1), Mbuf::from_slice(&v).unwrap(), &mut st);
    assert_eq!(out.map(|m| m.to_vec()), Some(v));
    assert_eq!(st.ip.fragments, 0);
}

#[test]
fn per_source_bound_evicts_that_sources_oldest_datagram() {
    let mut r = Reass::new(FragParams {
        max_per_source: 2,
        ..FragParams::default()
    });
    let mut st = Stats::default();
    let d = data(3000);
    let c = cuts(3000, 1480);
    let (o, l, m) = c[0];
    for (src, id, at) in [(A, 1, 1), (B, 1, 2), (A, 2, 3), (A, 3, 4)] {
        assert!(feed4(&mut r, &mut st, t(at), frag4(src, id, &d, o, l, m)).is_none());
    }
    assert_eq!(st.ip.fragoverflow, 1);
    assert_eq!((r.len(), st.ip.fragq), (3, 3));
    // B's datagram, older than A's survivors, was not touched.
    let mut out = None;
    for &(o, l, m) in &c[1..] {
        out = feed4(&mut r, &mut st, t(5), frag4(B, 1, &d, o, l, m));
    }
    assert!(out.is_some());
    // A's first datagram is gone: its rest starts a new entry that lacks fragment 0.
    for &(o, l, m) in &c[1..] {
        assert!(feed4(&mut r, &mut st, t(5), frag4(A, 1, &d, o, l, m)).is_none());
    }
}

#[test]
fn global_datagram_bound_evicts_the_oldest() {
    let mut r = Reass::new(FragParams {
        max_datagrams: 3,
        ..FragParams::default()
    });
    let mut st = Stats::default();
    let d = data(3000);
    for i in 0..10u8 {
        let src = Ipv4Addr::new(198, 18, 1, i);
        assert!(feed4(
            &mut r,
            &mut st,
            t(u64::from(i)),
            frag4(src, 1, &d, 0, 1480, true)
        )
        .is_none());
        assert!(r.len() <= 3);
    }
    assert_eq!((st.ip.fragoverflow, st.ip.fragq), (7, 3));
    // The survivors are the three newest; their deadlines follow.
    assert_eq!(r.poll_at(), Some(t(7 + 30)));
}

#[test]
fn byte_bound_counts_buffers_and_evicts_the_oldest() {
    let cluster = mbuf::MCLBYTES;
    let mut r = Reass::new(FragParams {
        max_bytes: 3 * cluster,
        ..FragParams::default()
    });
    let mut st = Stats::default();
    let d = data(3000);
    // Each fragment sits in a cluster of its own, whatever its length.
    for (id, at) in [(1, 1), (2, 2), (3, 3)] {
        assert!(feed4(&mut r, &mut st, t(at), frag4(A, id, &d, 0, 8, true)).is_none());
    }
    assert_eq!(r.bytes(), 3 * cluster);
    assert!(feed4(&mut r, &mut st, t(4), frag4(A, 3, &d, 16, 8, true)).is_none());
    assert_eq!(st.ip.fragoverflow, 1, "datagram 1, the oldest, made room");
    assert_eq!((r.bytes(), r.len()), (3 * cluster, 2));
    // One datagram larger than the whole bound can never complete: dropped whole.
    let mut r = Reass::new(FragParams {
        max_bytes: 2 * cluster,
        ..FragParams::default()
    });
    let mut st = Stats::default();
    for (o, l, m) in cuts(3000, 1480) {
        assert!(feed4(&mut r, &mut st, t(1), frag4(A, 1, &d, o, l, m)).is_none());
    }
    assert_eq!(st.ip.fragoverflow, 3);
    assert!(r.is_empty());
    assert_eq!(r.bytes(), 0);
}

#[test]
fn fragment_count_bound_drops_the_datagram_and_poisons_it() {
    let mut r = Reass::new(FragParams {
        max_frags: 4,
        ..FragParams::default()
    });
    let mut st = Stats::default();
    let d = data(200);
    for k in 0..5 {
        assert!(feed4(&mut r, &mut st, t(1), frag4(A, 1, &d, 16 * k, 8, true)).is_none());
    }
    assert_eq!(st.ip.fragtoomany, 5);
    assert!(feed4(&mut r, &mut st, t(1), frag4(A, 1, &d, 24, 8, true)).is_none());
    assert_eq!(st.ip.fragdropped, 1, "the key is poisoned");
    assert_eq!(r.bytes(), 0);
}

#[test]
fn random_fragments_are_each_accounted_for_once_and_the_table_stays_bounded() {
    let mut rng = Rng::new(42);
    let p = FragParams {
        max_datagrams: 8,
        max_per_source: 3,
        max_frags: 4,
        max_bytes: 20 * mbuf::MCLBYTES,
        ..FragParams::default()
    };
    let mut r = Reass::new(p);
    let mut st = Stats::default();
    let d = data(200);
    let mut sent = 0u64;
    let mut in_datagrams = 0u64;
    for step in 0..5000u64 {
        let src = Ipv4Addr::new(198, 18, 2, rng.below(4) as u8);
        let id = rng.below(3) as u16;
        // 16-byte fragments at any multiple of 8: overlaps, duplicates, gaps, the
        // tiny offset, and a datagram of T data bytes is always T / 16 fragments.
        let off = 8 * rng.below(12) as usize;
        let more = rng.chance(0.8);
        // Now and then a pause long enough for the time-out.
        let now = Instant::from_millis(step * 20) + Duration::from_secs(step / 500 * 31);
        if off == 0 && !more {
            // Not a fragment: nothing for the table.
            continue;
        }
        sent += 1;
        if let Some(m) = r.input4(now, frag4(src, id, &d, off, 16, more), &mut st) {
            in_datagrams += (m.len() as u64 - 20) / 16;
        }
        r.timer(now, &mut st);
        while r.pop_expired4().is_some() {}
        r.assert_consistent();
    }
    let held: u64 = r.slots.iter().flatten().map(|e| e.frags.len() as u64).sum();
    assert_eq!(st.total_drops() + held + in_datagrams, sent, "{st:#?}");
    assert_eq!(st.ip.fragments, sent);
    for c in [
        st.ip.reassembled,
        st.ip.fragdropped,
        st.ip.fragoverlap,
        st.ip.fragoverflow,
        st.ip.fragtoomany,
        st.ip.fragtimeout,
        st.ip.fragtiny,
    ] {
        assert!(c > 0, "every path taken: {st:#?}");
    }
}

// ---- IPv6

/// An IPv6 packet: `ext` (unfragmentable extension headers whose last names the
/// Fragment header), a Fragment header, `d`.
fn pkt6(ext: &[u8], first_nh: u8, next: u8, off: usize, more: bool, id: u32, d: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 40];
    {
        let mut p = Ipv6Packet::new_unchecked(&mut v[..]);
        p.set_version(6);
        p.set_payload_len((ext.len() + 8 + d.len()) as u16);
        p.set_next_header(IpProtocol::from(first_nh));
        p.set_hop_limit(64);
        p.set_src_addr(A6);
        p.set_dst_addr(DST6);
    }
    v.extend_from_slice(ext);
    let mut f = [0u8; 8];
    {
        let mut h = Ipv6FragHeader::new_unchecked(&mut f[..]);
        h.set_next_header(IpProtocol::from(next));
        h.set_frag_offset(off as u16);
        h.set_more_frags(more);
        h.set_ident(id);
    }
    v.extend_from_slice(&f);
    v.extend_from_slice(d);
    v
}

fn frag6(off: usize, len: usize, more: bool, id: u32, d: &[u8]) -> Mbuf {
    Mbuf::from_slice(&pkt6(&[], 44, 17, off, more, id, &d[off..off + len])).unwrap()
}

/// What the receiver must see: the IPv6 header naming UDP, then the data.
fn whole6(d: &[u8]) -> Vec<u8> {
    let mut v = pkt6(&[], 17, 17, 0, false, 0, d);
    v.drain(40..48);
    Ipv6Packet::new_unchecked(&mut v[..]).set_payload_len(d.len() as u16);
    v
}

fn done6(f: Frag6) -> Option<(Vec<u8>, usize, IpProtocol)> {
    match f {
        Frag6::Done { m, off, next } => Some((m.to_vec(), off, next)),
        Frag6::Consumed => None,
        Frag6::ParamProblem { .. } => panic!("unexpected parameter problem"),
    }
}

#[test]
fn v6_fragments_reassemble_with_the_fragment_header_removed() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let mut c = cuts(3000, 1448);
    c.swap(0, 2);
    let mut out = None;
    for (o, l, m) in c {
        out = done6(r.input6(t(1), frag6(o, l, m, 77, &d), Frag6Pos::DIRECT, &mut st));
    }
    let (got, off, next) = out.expect("reassembled");
    assert_eq!(got, whole6(&d));
    assert_eq!((off, next), (40, IpProtocol::Udp));
    assert_eq!((st.ip6.fragments, st.ip6.reassembled), (3, 1));
    assert_eq!(st.total_drops(), 0);
    assert!(r.is_empty());
}

#[test]
fn v6_unfragmentable_headers_stay_and_the_one_before_the_fragment_header_is_patched() {
    let (mut r, mut st) = table();
    let d = data(2000);
    // Hop-by-hop options (PadN), naming the Fragment header.
    let hbh = [44u8, 0, 1, 4, 0, 0, 0, 0];
    let pos = Frag6Pos {
        hdr_off: 48,
        nxt_off: 40,
    };
    let f0 = pkt6(&hbh, 0, 17, 0, true, 5, &d[..1000]);
    let f1 = pkt6(&hbh, 0, 6, 1000, false, 5, &d[1000..]);
    assert!(done6(r.input6(t(1), Mbuf::from_slice(&f1).unwrap(), pos, &mut st)).is_none());
    let (got, off, next) =
        done6(r.input6(t(1), Mbuf::from_slice(&f0).unwrap(), pos, &mut st)).expect("reassembled");
    // The first fragment's Next Header (UDP) wins over the last one's (TCP).
    assert_eq!((off, next), (48, IpProtocol::Udp));
    let mut want = pkt6(&hbh, 0, 17, 0, false, 0, &d);
    want.drain(48..56);
    want[40] = 17;
    Ipv6Packet::new_unchecked(&mut want[..]).set_payload_len((8 + d.len()) as u16);
    assert_eq!(got, want);
}

#[test]
fn v6_atomic_fragments_are_processed_at_once_and_never_mixed_with_queued_ones() {
    let (mut r, mut st) = table();
    let d = data(3000);
    // A real datagram with identification 9 is half in.
    assert!(
        done6(r.input6(t(1), frag6(0, 1448, true, 9, &d), Frag6Pos::DIRECT, &mut st)).is_none()
    );
    // An atomic fragment with the same identification comes out alone, at once.
    let small = data(100);
    let atomic = Mbuf::from_slice(&pkt6(&[], 44, 17, 0, false, 9, &small)).unwrap();
    let (got, off, next) = done6(r.input6(t(1), atomic, Frag6Pos::DIRECT, &mut st)).unwrap();
    assert_eq!(got, whole6(&small));
    assert_eq!((off, next), (40, IpProtocol::Udp));
    assert_eq!((st.ip6.atomicfrags, st.ip6.reassembled), (1, 0));
    assert_eq!(r.len(), 1, "the queued datagram is untouched");
    let mut out = None;
    for (o, l, m) in cuts(3000, 1448).into_iter().skip(1) {
        out = done6(r.input6(t(2), frag6(o, l, m, 9, &d), Frag6Pos::DIRECT, &mut st));
    }
    assert_eq!(out.unwrap().0, whole6(&d));
    assert_eq!(st.total_drops(), 0);
}

#[test]
fn v6_overlap_discards_the_datagram_and_poisons_the_key() {
    let (mut r, mut st) = table();
    let d = data(3000);
    assert!(
        done6(r.input6(t(1), frag6(0, 1448, true, 3, &d), Frag6Pos::DIRECT, &mut st)).is_none()
    );
    assert!(done6(r.input6(
        t(1),
        frag6(1440, 16, true, 3, &d),
        Frag6Pos::DIRECT,
        &mut st
    ))
    .is_none());
    assert_eq!(st.ip6.fragoverlap, 2);
    for (o, l, m) in cuts(3000, 1448) {
        assert!(done6(r.input6(t(2), frag6(o, l, m, 3, &d), Frag6Pos::DIRECT, &mut st)).is_none());
    }
    assert_eq!(st.ip6.fragdropped, 3);
    assert_eq!(
        st.ip.fragoverlap + st.ip.fragdropped,
        0,
        "IPv6 counts as ip6"
    );
}

#[test]
fn v6_times_out_after_60_seconds_with_the_first_fragment_handed_back() {
    let (mut r, mut st) = table();
    let d = data(3000);
    let first = frag6(0, 1448, true, 4, &d);
    let first_bytes = first.to_vec();
    assert!(done6(r.input6(t(1), first, Frag6Pos::DIRECT, &mut st)).is_none());
    assert_eq!(st.ip6.fragq, 1);
    r.timer(t(31), &mut st);
    assert_eq!(r.len(), 1, "IPv4's 30 s do not apply");
    assert_eq!(r.poll_at(), Some(t(61)));
    r.timer(t(61), &mut st);
    assert_eq!((st.ip6.fragtimeout, st.ip6.fragq), (1, 0));
    assert!(r.pop_expired4().is_none());
    assert_eq!(r.pop_expired6().unwrap().to_vec(), first_bytes);
}

#[test]
fn v6_first_fragment_without_the_upper_layer_header_is_a_parameter_problem() {
    let (mut r, mut st) = table();
    // TCP named, 16 bytes present: the TCP header needs 20 (RFC 7112).
    let v = pkt6(&[], 44, 6, 0, true, 1, &data(16));
    match r.input6(
        t(1),
        Mbuf::from_slice(&v).unwrap(),
        Frag6Pos::DIRECT,
        &mut st,
    ) {
        Frag6::ParamProblem { m, code, pointer } => {
            assert_eq!((code, pointer), (3, 0));
            assert_eq!(m.to_vec(), v);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(st.ip6.fragtiny, 1);
    // A destination options header after the Fragment header, then UDP: complete.
    let mut d = vec![17u8, 0, 1, 4, 0, 0, 0, 0];
    d.extend_from_slice(&data(8));
    let mut m = Mbuf::from_slice(&pkt6(&[], 44, 60, 0, true, 2, &d)).unwrap();
    assert!(first_fragment_has_header_chain(&mut m, 40));
    // The same, cut inside the UDP header.
    let mut m = Mbuf::from_slice(&pkt6(&[], 44, 60, 0, true, 2, &d[..12])).unwrap();
    assert!(!first_fragment_has_header_chain(&mut m, 40));
    // An options header whose length runs past the packet.
    d[1] = 4;
    let mut m = Mbuf::from_slice(&pkt6(&[], 44, 60, 0, true, 2, &d)).unwrap();
    assert!(!first_fragment_has_header_chain(&mut m, 40));
    assert!(r.is_empty());
}

#[test]
fn v6_bad_lengths_are_parameter_problems_pointing_at_the_field() {
    let (mut r, mut st) = table();
    let d = data(70_000);
    // RFC 8200 §4.5: M set and not a multiple of 8: pointer to Payload Length.
    match r.input6(t(1), frag6(8, 13, true, 1, &d), Frag6Pos::DIRECT, &mut st) {
        Frag6::ParamProblem {
            code: 0,
            pointer: 4,
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    // Reassembled payload over 65535: pointer to the Fragment Offset field.
    match r.input6(
        t(1),
        frag6(65_528, 16, false, 1, &d),
        Frag6Pos::DIRECT,
        &mut st,
    ) {
        Frag6::ParamProblem {
            code: 0,
            pointer: 42,
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!((st.ip6.badfrags, st.ip6.fragtoolong), (1, 1));
    // A layout the caller got wrong is dropped, not trusted.
    let bad = Frag6Pos {
        hdr_off: 40,
        nxt_off: 7,
    };
    assert!(done6(r.input6(t(1), frag6(0, 8, true, 1, &d), bad, &mut st)).is_none());
    let past = Frag6Pos {
        hdr_off: 60,
        nxt_off: 6,
    };
    assert!(done6(r.input6(t(1), frag6(0, 8, true, 1, &d), past, &mut st)).is_none());
    assert_eq!(st.ip6.badfrags, 3);
    assert!(r.is_empty());
}

#[test]
fn poll_at_is_the_earliest_deadline_of_both_families() {
    let (mut r, mut st) = table();
    let d = data(3000);
    assert_eq!(r.poll_at(), None);
    assert!(
        done6(r.input6(t(1), frag6(0, 1448, true, 1, &d), Frag6Pos::DIRECT, &mut st)).is_none()
    );
    assert_eq!(r.poll_at(), Some(t(61)));
    assert!(feed4(&mut r, &mut st, t(2), frag4(A, 1, &d, 0, 1480, true)).is_none());
    assert_eq!(r.poll_at(), Some(t(32)));
    r.timer(t(32), &mut st);
    assert_eq!(r.poll_at(), Some(t(61)));
    r.timer(t(61), &mut st);
    assert_eq!(r.poll_at(), None);
    assert_eq!((st.ip.fragtimeout, st.ip6.fragtimeout), (1, 1));
}

// ---- IPv4 fragmentation

fn fields(m: &Mbuf) -> (usize, usize, usize, bool) {
    let v = m.to_vec();
    let p = Ipv4Packet::new_checked(&v[..]).unwrap();
    assert!(p.verify_checksum());
    assert_eq!(usize::from(p.total_len()), v.len());
    (
        usize::from(p.header_len()),
        usize::from(p.frag_offset()),
        v.len() - usize::from(p.header_len()),
        p.more_frags(),
    )
}

#[test]
fn fragment4_cuts_on_8_byte_boundaries_and_reassembles_to_the_original() {
    let d = data(3000);
    let orig = dgram4(A, 42, &d);
    let frags: Vec<Mbuf> = fragment4(Mbuf::from_slice(&orig).unwrap(), 1500)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let f: Vec<_> = frags.iter().map(fields).collect();
    assert_eq!(
        f,
        [
            (20, 0, 1480, true),
            (20, 1480, 1480, true),
            (20, 2960, 40, false)
        ]
    );
    assert!(frags.iter().all(|m| m.len() <= 1500));
    let (mut r, mut st) = table();
    let mut out = None;
    for m in frags.into_iter().rev() {
        out = r.input4(t(1), m, &mut st);
    }
    assert_eq!(out.unwrap().to_vec(), orig);
}

#[test]
fn fragment4_copies_only_options_with_the_copy_bit() {
    // Router Alert (0x94, copied), then Record Route (7, not copied) with one slot,
    // then End of Option List: 32 bytes of header.
    let opts = [0x94, 4, 0, 0, 7, 7, 4, 0, 0, 0, 0, 0];
    let d = data(4000);
    let mut orig = hdr4(A, 43, &opts, d.len(), 0, false);
    orig.extend_from_slice(&d);
    let frags: Vec<Mbuf> = fragment4(Mbuf::from_slice(&orig).unwrap(), 1500)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let f: Vec<_> = frags.iter().map(fields).collect();
    // First: 1500 - 32 = 1468, cut to 1464; the others: 1500 - 24 = 1476, cut to 1472.
    assert_eq!(
        f,
        [
            (32, 0, 1464, true),
            (24, 1464, 1472, true),
            (24, 2936, 1064, false)
        ]
    );
    for m in &frags[1..] {
        assert_eq!(&m.to_vec()[20..24], &opts[..4], "Router Alert copied");
    }
    let (mut r, mut st) = table();
    let mut out = None;
    for m in frags {
        out = r.input4(t(1), m, &mut st);
    }
    assert_eq!(
        out.unwrap().to_vec(),
        orig,
        "the first fragment's options come back"
    );
}

#[test]
fn fragment4_refuses_dont_fragment_and_tiny_mtus() {
    let d = data(3000);
    let mut v = dgram4(A, 1, &d);
    Ipv4Packet::new_unchecked(&mut v[..]).set_dont_frag(true);
    let (m, e) = fragment4(Mbuf::from_slice(&v).unwrap(), 1500).unwrap_err();
    assert_eq!(e, FragError::DontFrag);
    assert_eq!(m.to_vec(), v, "handed back untouched");
    let (_, e) = fragment4(Mbuf::from_slice(&dgram4(A, 1, &d)).unwrap(), 27).unwrap_err();
    assert_eq!(e, FragError::MtuTooSmall);
    // 28 bytes: a 20-byte header and 8 data bytes per fragment, RFC 791's minimum.
    let n = fragment4(Mbuf::from_slice(&dgram4(A, 1, &d[..80])).unwrap(), 28)
        .unwrap()
        .count();
    assert_eq!(n, 10);
}

#[test]
fn fragment4_shares_the_payload_buffers() {
    let d = data(3000);
    let m = Mbuf::from_slice(&dgram4(A, 1, &d)).unwrap();
    let before = m.buf_bytes();
    let frags: Vec<Mbuf> = fragment4(m, 1500).unwrap().map(Result::unwrap).collect();
    // Every fragment after the first adds one small buffer for its header; the
    // payload clusters are only referenced again where a fragment boundary cuts one.
    let small = frags[1..].len() * mbuf::MLEN;
    let shared_clusters: usize = frags.iter().map(Mbuf::buf_bytes).sum::<usize>() - small;
    assert!(
        shared_clusters <= before + 2 * mbuf::MCLBYTES,
        "{shared_clusters} vs {before}"
    );
}

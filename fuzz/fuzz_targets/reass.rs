//! Arbitrary fragment sequences of both families into one reassembly table with small
//! bounds and an advancing clock; now and then an arbitrary datagram through the IPv4
//! fragmenter and back. Nothing may panic, the table's bookkeeping must match its
//! contents and stay within every bound after each step, what comes out whole must be
//! a well-formed datagram, and fragmenting then reassembling gives the original back.
#![no_main]

use dev::{Duration, Instant};
use libfuzzer_sys::fuzz_target;
use mbuf::Mbuf;
use mpstack_fuzz::Input;
use net::frag::{fragment4, Frag6, Frag6Pos, FragParams, Reass};
use net::Stats;
use std::net::{Ipv4Addr, Ipv6Addr};
use wire::{IpProtocol, Ipv4Packet, Ipv6FragHeader, Ipv6Packet};

const PARAMS: FragParams = FragParams {
    max_datagrams: 16,
    max_bytes: 48 * mbuf::MCLBYTES,
    max_per_source: 4,
    max_frags: 8,
    timeout4: Duration::from_secs(30),
    timeout6: Duration::from_secs(60),
};

fn v4(inp: &mut Input<'_>) -> Vec<u8> {
    let sel = inp.u8();
    let opts = 4 * usize::from(inp.u8() % 11);
    let off = if sel & 1 == 0 {
        usize::from(inp.u8() % 32) * 8
    } else {
        usize::from(inp.u16() & 0x1fff) * 8
    };
    let len = if sel & 2 == 0 {
        usize::from(inp.u8() % 8) * 8
    } else {
        usize::from(inp.u16()) % 1600
    };
    let mut v = vec![0u8; 20 + opts + len];
    v[20..20 + opts].fill(1); // No Operation
    let mut p = Ipv4Packet::new_unchecked(&mut v[..]);
    p.set_version(4);
    p.set_header_len((20 + opts) as u8);
    p.set_total_len((20 + opts + len).min(65535) as u16);
    p.set_ident(u16::from(inp.u8() % 4));
    p.set_more_frags(sel & 4 != 0);
    p.set_frag_offset(off as u16);
    p.set_next_header(IpProtocol::Udp);
    p.set_src_addr(Ipv4Addr::new(198, 18, 0, inp.u8() % 6));
    p.set_dst_addr(Ipv4Addr::new(198, 18, 0, 200));
    p.fill_checksum();
    v
}

fn v6(inp: &mut Input<'_>) -> (Vec<u8>, Frag6Pos) {
    let sel = inp.u8();
    let hbh = sel & 1 != 0;
    let off = if sel & 2 == 0 {
        usize::from(inp.u8() % 32) * 8
    } else {
        usize::from(inp.u16()) & !7
    };
    let len = if sel & 4 == 0 {
        usize::from(inp.u8() % 8) * 8
    } else {
        usize::from(inp.u16()) % 1600
    };
    let ext = if hbh { 8 } else { 0 };
    let mut v = vec![0u8; 40 + ext + 8 + len];
    let mut p = Ipv6Packet::new_unchecked(&mut v[..]);
    p.set_version(6);
    p.set_payload_len((ext + 8 + len) as u16);
    p.set_next_header(if hbh {
        IpProtocol::HopByHop
    } else {
        IpProtocol::Ipv6Frag
    });
    let host = u16::from(inp.u8() % 6);
    p.set_src_addr(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, host));
    p.set_dst_addr(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0x200));
    if hbh {
        v[40] = 44;
        v[42] = 1; // PadN
        v[43] = 4;
    }
    let mut h = Ipv6FragHeader::new_unchecked(&mut v[40 + ext..48 + ext]);
    h.set_next_header(IpProtocol::from(inp.u8()));
    h.set_frag_offset(off as u16);
    h.set_more_frags(sel & 8 != 0);
    h.set_ident(u32::from(inp.u8() % 4));
    // Sometimes a layout the caller got wrong.
    let pos = if sel & 0x30 == 0x30 {
        Frag6Pos {
            hdr_off: usize::from(inp.u8()),
            nxt_off: usize::from(inp.u8()),
        }
    } else if hbh {
        Frag6Pos {
            hdr_off: 48,
            nxt_off: 40,
        }
    } else {
        Frag6Pos::DIRECT
    };
    (v, pos)
}

/// Fragments an arbitrary datagram and reassembles it in a table of its own: the
/// original must come back, whatever the order of the fragments.
fn round_trip(inp: &mut Input<'_>) {
    let opts = inp.bytes(41);
    let olen = (opts.len() + 3) & !3;
    let len = usize::from(inp.u16()) % (65535 - 20 - olen);
    let mtu = 68 + usize::from(inp.u16()) % 9000;
    let total = 20 + olen + len;
    let mut v = vec![0u8; total];
    v[20..20 + opts.len()].copy_from_slice(&opts);
    for (i, b) in v[20 + olen..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let mut p = Ipv4Packet::new_unchecked(&mut v[..]);
    p.set_version(4);
    p.set_header_len((20 + olen) as u8);
    p.set_total_len(total as u16);
    p.set_ident(7);
    p.set_next_header(IpProtocol::Udp);
    p.set_src_addr(Ipv4Addr::new(198, 18, 0, 1));
    p.set_dst_addr(Ipv4Addr::new(198, 18, 0, 2));
    p.fill_checksum();
    let Ok(m) = Mbuf::from_slice(&v) else { return };
    let Ok(frags) = fragment4(m, mtu) else {
        return;
    };
    let mut frags: Vec<Mbuf> = frags.map_while(Result::ok).collect();
    assert!(frags.iter().all(|f| f.len() <= mtu));
    if frags.len() == 1 {
        assert_eq!(frags[0].to_vec(), v);
        return;
    }
    if inp.u8() & 1 == 1 {
        frags.reverse();
    }
    let mut r = Reass::new(FragParams::default());
    let mut st = Stats::default();
    let mut out = None;
    for f in frags {
        if let Some(m) = r.input4(Instant::ZERO, f, &mut st) {
            out = Some(m.to_vec());
        }
    }
    // Options the fragmenter could not parse stay in the first fragment only, and an
    // 8-byte first fragment is refused as the tiny fragment attack; otherwise the
    // original comes back.
    if st.total_drops() == 0 {
        assert_eq!(out.as_deref(), Some(&v[..]));
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mut r = Reass::new(PARAMS);
    let mut st = Stats::default();
    let mut now = Instant::from_secs(1);
    while !inp.0.is_empty() {
        let op = inp.u8();
        now += Duration::from_millis(u64::from(inp.u8()) * 150);
        match op % 8 {
            0..=3 => {
                let v = v4(&mut inp);
                let Ok(m) = Mbuf::from_slice(&v) else {
                    continue;
                };
                if let Some(m) = r.input4(now, m, &mut st) {
                    let b = m.to_vec();
                    let p = Ipv4Packet::new_checked(&b[..]).expect("a whole IPv4 datagram");
                    assert!(p.verify_checksum());
                    assert_eq!(usize::from(p.total_len()), b.len());
                    assert!(!p.more_frags() && p.frag_offset() == 0);
                }
            }
            4..=6 => {
                let (v, pos) = v6(&mut inp);
                let Ok(m) = Mbuf::from_slice(&v) else {
                    continue;
                };
                match r.input6(now, m, pos, &mut st) {
                    Frag6::Done { m, off, .. } => {
                        let b = m.to_vec();
                        let p = Ipv6Packet::new_checked(&b[..]).expect("a whole packet");
                        assert_eq!(usize::from(p.payload_len()) + 40, b.len());
                        assert!(off <= b.len());
                    }
                    Frag6::ParamProblem { code, .. } => assert!(code == 0 || code == 3),
                    Frag6::Consumed => {}
                }
            }
            _ => round_trip(&mut inp),
        }
        if r.poll_at().is_some_and(|t| t <= now) {
            r.timer(now, &mut st);
        }
        while r.pop_expired4().is_some() {}
        while r.pop_expired6().is_some() {}
        r.assert_consistent();
    }
    // Long enough for every time-out: the table must empty.
    r.timer(now + Duration::from_secs(61), &mut st);
    assert!(r.is_empty() && r.bytes() == 0);
});

use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const PEER: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const SRC4: [u8; 4] = [198, 18, 0, 1];
const DST4: [u8; 4] = [198, 18, 0, 2];
const SRC6: [u8; 16] = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST6: [u8; 16] = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// How a test frame differs from the plain one.
#[derive(Clone, Copy)]
struct Opts {
    v6: bool,
    flags: u8,
    sport: u16,
    tsval: u32,
    /// Ethernet padding after the IP packet.
    pad: usize,
    bad_sum: bool,
    dst_mac: [u8; 6],
    dst4: [u8; 4],
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            v6: false,
            flags: TCP_ACK,
            sport: 40000,
            tsval: 9,
            pad: 0,
            bad_sum: false,
            dst_mac: MAC,
            dst4: DST4,
        }
    }
}

/// An Ethernet frame with a TCP segment (timestamp option) carrying `data` at
/// `seq`, both checksums right unless `o.bad_sum`; one buffer, as a device hands
/// it over.
fn frame(seq: u32, data: &[u8], o: Opts) -> Mbuf {
    let mut t = vec![0u8; 32];
    t[0..2].copy_from_slice(&o.sport.to_be_bytes());
    t[2..4].copy_from_slice(&5001u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&77u32.to_be_bytes());
    t[12] = 8 << 4;
    t[13] = o.flags;
    t[14..16].copy_from_slice(&1000u16.to_be_bytes());
    t[20..24].copy_from_slice(&[1, 1, 8, 10]);
    t[24..28].copy_from_slice(&o.tsval.to_be_bytes());
    t[28..32].copy_from_slice(&5u32.to_be_bytes());
    t.extend_from_slice(data);
    let (src, dst): (IpAddr, IpAddr) = if o.v6 {
        (Ipv6Addr::from(SRC6).into(), Ipv6Addr::from(DST6).into())
    } else {
        (Ipv4Addr::from(SRC4).into(), Ipv4Addr::from(o.dst4).into())
    };
    let sum = wire::checksum::combine(&[
        wire::checksum::pseudo_header(&src, &dst, IpProtocol::Tcp, t.len() as u32),
        wire::checksum::data(&t),
    ]);
    let sum = if o.bad_sum { !sum ^ 1 } else { !sum };
    t[16..18].copy_from_slice(&sum.to_be_bytes());
    let mut f = Vec::new();
    f.extend_from_slice(&o.dst_mac);
    f.extend_from_slice(&PEER);
    if o.v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(t.len() as u16).to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        f.extend_from_slice(&SRC6);
        f.extend_from_slice(&DST6);
    } else {
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + t.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&SRC4);
        ip[16..20].copy_from_slice(&o.dst4);
        let s = !wire::checksum::data(&ip);
        ip[10..12].copy_from_slice(&s.to_be_bytes());
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(&t);
    f.extend(std::iter::repeat_n(0xee, o.pad));
    if f.len() > 4096 {
        // A jumbo frame in one buffer, as a device with large buffers reads it.
        let mut m = Mbuf::with_capacity(f.len()).unwrap();
        m.append(&f).unwrap();
        return m;
    }
    Mbuf::devget(&f).unwrap()
}

fn be16(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([b[at], b[at + 1]]))
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn local(d: &IpAddr) -> bool {
    *d == IpAddr::from(DST4) || *d == IpAddr::from(Ipv6Addr::from(DST6))
}

/// The frames through LRO, as one burst.
fn run(frames: Vec<Mbuf>) -> (Vec<Mbuf>, LroStats) {
    let mut lro = Lro::default();
    let mut out = Vec::new();
    let mut up = |m| out.push(m);
    for m in frames {
        lro.input(MAC, local, m, &mut up);
    }
    lro.flush(&mut up);
    (out, lro.stats)
}

/// What a packet says of itself after checking it as IP input would: its TCP
/// sequence number, flags and data.
fn open(m: &Mbuf) -> (u32, u8, Vec<u8>) {
    let b = m.to_vec();
    let (l4, end) = match be16(&b, 12) {
        0x0800 => {
            assert_eq!(
                wire::checksum::data(&b[ETH..ETH + 20]),
                !0,
                "IP header checksum"
            );
            (ETH + 20, ETH + be16(&b, ETH + 2))
        }
        _ => (ETH + 40, ETH + 40 + be16(&b, ETH + 4)),
    };
    assert_eq!(end, b.len(), "IP length is the packet's");
    let doff = usize::from(b[l4 + 12] >> 4) * 4;
    (be32(&b, l4 + 4), b[l4 + 13], b[l4 + doff..].to_vec())
}

/// `n` frames of `size` bytes of data in sequence from 1000, with `o`.
fn stream(n: usize, size: usize, o: Opts) -> (Vec<Mbuf>, Vec<u8>) {
    let data: Vec<u8> = (0..n * size).map(|i| (i * 7 + i / 251) as u8).collect();
    let frames = data
        .chunks(size)
        .enumerate()
        .map(|(k, d)| frame(1000 + (k * size) as u32, d, o))
        .collect();
    (frames, data)
}

fn data_of(out: &[Mbuf]) -> Vec<u8> {
    out.iter().flat_map(|m| open(m).2).collect()
}

#[test]
fn merges_a_run_of_segments_into_one_packet_per_family() {
    for v6 in [false, true] {
        let o = Opts {
            v6,
            ..Opts::default()
        };
        let (frames, data) = stream(6, 1448, o);
        let (out, st) = run(frames);
        assert_eq!(out.len(), 1, "v6={v6}");
        assert_eq!(
            st,
            LroStats {
                queued: 5,
                flushed: 1
            }
        );
        let m = &out[0];
        assert_eq!(m.hdr.tso_segsz, 1448);
        assert_ne!(m.hdr.csum_flags & mbuf::CSUM_L4_VALID, 0);
        let (seq, flags, got) = open(m);
        assert_eq!((seq, flags), (1000, TCP_ACK));
        assert_eq!(got, data);
        // The data buffers are the frames', not copies.
        assert_eq!(m.nsegs(), 6);
    }
}

#[test]
fn a_packet_holds_at_most_max_bufs_buffers_and_65535_bytes() {
    let (frames, data) = stream(2 * MAX_BUFS + 1, 1448, Opts::default());
    let (out, _) = run(frames);
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|m| m.nsegs() <= MAX_BUFS));
    assert_eq!(data_of(&out), data);
    // Jumbo frames, one buffer each: eight of 8948 bytes would pass the IP length
    // field.
    let (frames, data) = stream(8, 8948, Opts::default());
    let (out, _) = run(frames);
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|m| m.len() - ETH <= 65_535));
    assert_eq!(open(&out[0]).2.len(), 7 * 8948);
    assert_eq!(data_of(&out), data);
}

#[test]
fn keeps_the_order_of_what_does_not_continue_the_run() {
    // Reordered: 0 1 3 2 4 5 goes up as [0 1] [3] [2] [4 5].
    let (mut frames, data) = stream(6, 1000, Opts::default());
    frames.swap(2, 3);
    let (out, st) = run(frames);
    let seqs: Vec<u32> = out.iter().map(|m| open(m).0).collect();
    assert_eq!(seqs, [1000, 4000, 3000, 5000]);
    assert_eq!(
        st,
        LroStats {
            queued: 2,
            flushed: 2
        }
    );
    let mut want = data[..2000].to_vec();
    want.extend_from_slice(&data[3000..4000]);
    want.extend_from_slice(&data[2000..3000]);
    want.extend_from_slice(&data[4000..]);
    assert_eq!(data_of(&out), want);
    // Another connection's frame between two of this one's ends the run.
    let (mut frames, _) = stream(4, 1000, Opts::default());
    let other = Opts {
        sport: 40001,
        ..Opts::default()
    };
    frames.insert(2, frame(1000, &[1; 1000], other));
    let (out, _) = run(frames);
    assert_eq!(out.len(), 3);
    assert_eq!(data_of(&out).len(), 5000);
}

#[test]
fn psh_and_a_short_segment_end_a_packet() {
    let (mut frames, data) = stream(3, 1000, Opts::default());
    let psh = Opts {
        flags: TCP_ACK | TCP_PSH,
        ..Opts::default()
    };
    frames[1] = frame(2000, &data[1000..2000], psh);
    frames.push(frame(4000, &[9; 500], Opts::default()));
    frames.push(frame(4500, &[8; 500], Opts::default()));
    frames.push(frame(5000, &[7; 100], Opts::default()));
    frames.push(frame(5100, &[6; 100], Opts::default()));
    let (out, _) = run(frames);
    let got: Vec<(u32, u8, usize)> = out
        .iter()
        .map(|m| {
            let (s, f, d) = open(m);
            (s, f, d.len())
        })
        .collect();
    assert_eq!(
        got,
        [
            (1000, TCP_ACK | TCP_PSH, 2000),
            // A shorter segment joins, and is the last to.
            (3000, TCP_ACK, 1000 + 500),
            (4500, TCP_ACK, 500 + 100),
            (5100, TCP_ACK, 100)
        ]
    );
}

#[test]
fn leaves_alone_what_must_not_merge() {
    let base = Opts::default();
    let cases = [
        (
            "SYN",
            Opts {
                flags: 0x02 | TCP_ACK,
                ..base
            },
        ),
        (
            "FIN",
            Opts {
                flags: 0x01 | TCP_ACK,
                ..base
            },
        ),
        (
            "RST",
            Opts {
                flags: 0x04 | TCP_ACK,
                ..base
            },
        ),
        (
            "URG",
            Opts {
                flags: 0x20 | TCP_ACK,
                ..base
            },
        ),
        (
            "CWR",
            Opts {
                flags: 0x80 | TCP_ACK,
                ..base
            },
        ),
        ("no ACK", Opts { flags: 0, ..base }),
        (
            "bad checksum",
            Opts {
                bad_sum: true,
                ..base
            },
        ),
        (
            "another MAC",
            Opts {
                dst_mac: PEER,
                ..base
            },
        ),
        (
            "not our address",
            Opts {
                dst4: [198, 18, 0, 9],
                ..base
            },
        ),
    ];
    for (what, o) in cases {
        let (frames, _) = stream(3, 1000, o);
        let (out, st) = run(frames);
        assert_eq!(out.len(), 3, "{what}");
        assert_eq!(st, LroStats::default(), "{what}");
        for m in &out {
            assert_eq!(m.hdr.tso_segsz, 0, "{what}");
            // Only a checksum checked here is marked so.
            let valid = m.hdr.csum_flags & mbuf::CSUM_L4_VALID != 0;
            assert_eq!(
                valid,
                !o.bad_sum && o.flags & !TCP_PSH == TCP_ACK && o.dst_mac == MAC && o.dst4 == DST4,
                "{what}"
            );
        }
    }
    // A bad checksum in the middle of a run: it goes up alone, for TCP to count.
    let (mut frames, data) = stream(5, 1000, base);
    frames[2] = frame(
        3000,
        &data[2000..3000],
        Opts {
            bad_sum: true,
            ..base
        },
    );
    let (out, _) = run(frames);
    assert_eq!(out.len(), 3);
    assert_eq!(out[1].hdr.csum_flags & mbuf::CSUM_L4_VALID, 0);
    // Different timestamps: the options differ.
    let (mut frames, data) = stream(2, 1000, base);
    frames[1] = frame(2000, &data[1000..], Opts { tsval: 10, ..base });
    assert_eq!(run(frames).0.len(), 2);
    // Something not IP at all, and a runt.
    let mut arp = frame(1000, &[0; 10], base).to_vec();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let frames = vec![
        Mbuf::devget(&arp).unwrap(),
        Mbuf::devget(&arp[..20]).unwrap(),
    ];
    assert_eq!(run(frames).0.len(), 2);
}

#[test]
fn ethernet_padding_is_not_data() {
    let o = Opts {
        pad: 6,
        ..Opts::default()
    };
    let (frames, data) = stream(3, 4, o);
    let (out, st) = run(frames);
    assert_eq!(st.queued, 2);
    assert_eq!(data_of(&out), data);
}

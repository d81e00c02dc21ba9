//! Malformed frames, each with the counter that must account for it. Shared by the
//! scenario tests (memory wires) and the interop tests (written onto a TAP with
//! AF_PACKET), so both prove the same thing.

use dev::rng::Rng;
use std::net::Ipv4Addr;
use wire::EthernetAddress;

/// One bad frame and the counter `netstat -s` must show it under.
#[derive(Clone, Debug)]
pub struct BadFrame {
    pub frame: Vec<u8>,
    pub counter: &'static str,
}

fn csum(b: &[u8]) -> u16 {
    !wire::checksum::data(b)
}

fn ether(dst: EthernetAddress, src: EthernetAddress, ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
    let total = 20 + payload.len();
    let mut h = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0x12,
        0x34,
        0,
        0,
        64,
        proto,
        0,
        0,
    ];
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn refill_ip_csum(p: &mut [u8]) {
    let hlen = ((p[0] & 0x0f) as usize * 4).clamp(20, p.len());
    p[10] = 0;
    p[11] = 0;
    let c = csum(&p[..hlen]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

fn udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let len = 8 + data.len();
    let mut u = vec![
        (sport >> 8) as u8,
        sport as u8,
        (dport >> 8) as u8,
        dport as u8,
        (len >> 8) as u8,
        len as u8,
        0,
        0,
    ];
    u.extend_from_slice(data);
    let mut ph = Vec::new();
    ph.extend_from_slice(&src.octets());
    ph.extend_from_slice(&dst.octets());
    ph.extend_from_slice(&[0, 17, (len >> 8) as u8, len as u8]);
    ph.extend_from_slice(&u);
    let c = csum(&ph);
    u[6..8].copy_from_slice(&if c == 0 { 0xffff } else { c }.to_be_bytes());
    u
}

/// The kinds of damage, cycled through in order.
pub const KINDS: usize = 15;

/// `n` malformed frames from `peer` (mac, ip) to `us` (mac, ip), cycling through
/// every kind; random bytes (from `seed`) fill payloads.
pub fn frames(
    n: usize,
    us: (EthernetAddress, Ipv4Addr),
    peer: (EthernetAddress, Ipv4Addr),
    seed: u64,
) -> Vec<BadFrame> {
    let all: Vec<usize> = (0..KINDS).collect();
    frames_of_kinds(n, us, peer, seed, &all)
}

/// Like [`frames`], cycling through the given kinds only (0 is the runt frame, which
/// Linux refuses to send through AF_PACKET: shorter than an Ethernet header).
pub fn frames_of_kinds(
    n: usize,
    us: (EthernetAddress, Ipv4Addr),
    peer: (EthernetAddress, Ipv4Addr),
    seed: u64,
    kinds: &[usize],
) -> Vec<BadFrame> {
    let mut rng = Rng::new(seed);
    let (dmac, dip) = us;
    let (smac, sip) = peer;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut data = vec![0u8; 8 + rng.below(32) as usize];
        data.iter_mut().for_each(|b| *b = rng.next_u32() as u8);
        let kind = if kinds.is_empty() {
            0
        } else {
            kinds[i % kinds.len()]
        };
        let (frame, counter) = match kind {
            0 => (
                ether(dmac, smac, 0x0800, &[])[..10].to_vec(),
                "ether.tooshort",
            ),
            1 => {
                let mut p = ipv4(sip, dip, 17, &data);
                p[0] = 0x65;
                (ether(dmac, smac, 0x0800, &p), "ip.badvers")
            }
            2 => {
                let mut p = ipv4(sip, dip, 17, &data);
                p[0] = 0x43;
                refill_ip_csum(&mut p);
                (ether(dmac, smac, 0x0800, &p), "ip.badhlen")
            }
            3 => {
                let mut p = ipv4(sip, dip, 17, &data);
                p[10] ^= 0x5a;
                (ether(dmac, smac, 0x0800, &p), "ip.badsum")
            }
            4 => {
                let mut p = ipv4(sip, dip, 17, &data);
                p[2] = 0x05; // total length 1280+ beyond the frame
                refill_ip_csum(&mut p);
                (ether(dmac, smac, 0x0800, &p), "ip.tooshort")
            }
            5 => {
                let other = Ipv4Addr::new(198, 19, 255, 254);
                (
                    ether(dmac, smac, 0x0800, &ipv4(sip, other, 17, &data)),
                    "ip.cantforward",
                )
            }
            6 => {
                let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1];
                icmp.extend_from_slice(&data);
                let c = csum(&icmp) ^ 0x0101;
                icmp[2..4].copy_from_slice(&c.to_be_bytes());
                (
                    ether(dmac, smac, 0x0800, &ipv4(sip, dip, 1, &icmp)),
                    "icmp.checksum",
                )
            }
            7 => {
                let mut u = udp(sip, dip, 4000, 7, &data);
                u[6] ^= 0x11;
                if u[6] == 0 && u[7] == 0 {
                    u[7] = 1;
                }
                (
                    ether(dmac, smac, 0x0800, &ipv4(sip, dip, 17, &u)),
                    "udp.badsum",
                )
            }
            8 => {
                let mut u = udp(sip, dip, 4000, 7, &data);
                u[4] = 0x40; // length field far beyond the datagram
                (
                    ether(dmac, smac, 0x0800, &ipv4(sip, dip, 17, &u)),
                    "udp.badlen",
                )
            }
            9 => {
                let mut a = vec![0, 6, 8, 0, 6, 4, 0, 1];
                a.extend_from_slice(&smac.0);
                a.extend_from_slice(&sip.octets());
                a.extend_from_slice(&[0; 6]);
                a.extend_from_slice(&dip.octets());
                (
                    ether(EthernetAddress::BROADCAST, smac, 0x0806, &a),
                    "arp.badproto",
                )
            }
            10 => (ether(dmac, smac, 0x88b5, &data), "ether.noproto"),
            11 => (
                ether(EthernetAddress::BROADCAST, smac, 0x0806, &[0, 1, 8, 0, 6]),
                "arp.badlen",
            ),
            12 => {
                // More fragments, and an odd length: not a multiple of 8 (RFC 791).
                let n = data.len() - (1 - data.len() % 2);
                let mut p = ipv4(sip, dip, 17, &data[..n]);
                p[6] = 0x20;
                refill_ip_csum(&mut p);
                (ether(dmac, smac, 0x0800, &p), "ip.badfrags")
            }
            13 => {
                // Fragment offset 1 (8 bytes): the tiny fragment attack (RFC 1858).
                let mut p = ipv4(sip, dip, 17, &data);
                p[7] = 0x01;
                refill_ip_csum(&mut p);
                (ether(dmac, smac, 0x0800, &p), "ip.fragtiny")
            }
            _ => {
                // Total length 0: what a large segment carries (BIG TCP), but this
                // one comes from no segmentation offload and is short.
                let mut p = ipv4(sip, dip, 6, &data);
                p[2] = 0;
                p[3] = 0;
                refill_ip_csum(&mut p);
                (ether(dmac, smac, 0x0800, &p), "ip.badlen")
            }
        };
        out.push(BadFrame { frame, counter });
    }
    out
}

/// How many of `frames` each counter must account for.
pub fn expected_counts(frames: &[BadFrame]) -> Vec<(&'static str, u64)> {
    let mut v: Vec<(&'static str, u64)> = Vec::new();
    for f in frames {
        match v.iter_mut().find(|(c, _)| *c == f.counter) {
            Some((_, n)) => *n += 1,
            None => v.push((f.counter, 1)),
        }
    }
    v
}

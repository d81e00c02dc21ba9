//! Helpers the scenario files share.
#![allow(dead_code)]

use dev::Duration;
use sim::{HostId, Sim};
use std::net::Ipv4Addr;

/// Sends `n` echo requests of `size` bytes from `from` to `to`, checks each reply's
/// data, and returns how many came back.
pub fn ping_n(s: &mut Sim, from: HostId, to: Ipv4Addr, n: u16, size: usize) -> u32 {
    let p = s.host(from).ping_socket(0).unwrap();
    p.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
    let mut buf = vec![0u8; 70000];
    let mut got = 0;
    for seq in 0..n {
        p.send_echo(to, seq, &data).unwrap();
        s.run_for(Duration::from_millis(2));
        while let Ok(r) = p.recv_reply(&mut buf) {
            assert_eq!(r.from, to);
            assert_eq!(&buf[..r.len], &data[..], "echo data must come back intact");
            got += 1;
        }
    }
    s.run_for(Duration::from_secs(1));
    while p.recv_reply(&mut buf).is_ok() {
        got += 1;
    }
    got
}

/// An ICMP error from a router at 198.18.0.254 to 198.18.0.1, whose MAC is `to`:
/// `ty`/`code`, `word` its second 32-bit word (a "fragmentation needed"'s
/// next-hop MTU in its low half), then `quoted` (an IP header and the 8 bytes
/// after it), in an Ethernet frame.
pub fn icmp4_error_frame(
    to: wire::EthernetAddress,
    ty: u8,
    code: u8,
    word: [u8; 4],
    quoted: &[u8],
) -> mbuf::Mbuf {
    let mut icmp = vec![ty, code, 0, 0];
    icmp.extend_from_slice(&word);
    icmp.extend_from_slice(quoted);
    let sum = !wire::checksum::data(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut ip = vec![
        0x45u8, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0, 198, 18, 0, 254, 198, 18, 0, 1,
    ];
    ip[2..4].copy_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
    let sum = !wire::checksum::data(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut f = to.0.to_vec();
    f.extend_from_slice(&[0x02, 0xee, 0, 0, 0, 0xfe, 0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    mbuf::Mbuf::from_slice(&f).unwrap()
}

/// An IPv4 UDP datagram (port 12345 to 9, "hey!") from `src` to `dst` with `opts`
/// (a multiple of 4 bytes) after the fixed header, TTL 64, its header checksum
/// right: for tests of option handling.
pub fn ip4_udp_with_options(src: Ipv4Addr, dst: Ipv4Addr, opts: &[u8]) -> Vec<u8> {
    assert_eq!(opts.len() % 4, 0);
    let hlen = 20 + opts.len();
    let udp = [0x30, 0x39, 0, 9, 0, 12, 0, 0, b'h', b'e', b'y', b'!'];
    let mut p = vec![0x40 | (hlen / 4) as u8, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0];
    p[2..4].copy_from_slice(&((hlen + udp.len()) as u16).to_be_bytes());
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(opts);
    let sum = !wire::checksum::data(&p);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(&udp);
    p
}

/// An Ethernet frame from MAC `from` to MAC `to` holding an IPv4 packet (TTL 64,
/// no options) from `src` to `dst` of protocol `proto` with `payload`, its header
/// checksum right and, for ICMP (1), TCP (6) and UDP (17), the payload's too (the
/// payload's own checksum field zero on the way in): a hand-made packet from a
/// raw port, as an attacker writes one.
pub fn ip4_frame(
    to: wire::EthernetAddress,
    from: wire::EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    payload: &[u8],
) -> mbuf::Mbuf {
    let mut l4 = payload.to_vec();
    let at = match proto {
        1 => Some(2),
        6 => Some(16),
        17 => Some(6),
        _ => None,
    };
    if let Some(at) = at {
        let mut sum_over = Vec::new();
        if proto != 1 {
            // The pseudo-header (RFC 9293 §3.1, RFC 768).
            sum_over.extend_from_slice(&src.octets());
            sum_over.extend_from_slice(&dst.octets());
            sum_over.extend_from_slice(&[0, proto]);
            sum_over.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        }
        sum_over.extend_from_slice(&l4);
        let sum = !wire::checksum::data(&sum_over);
        l4[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
    let mut ip = vec![0x45u8, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let sum = !wire::checksum::data(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut f = to.0.to_vec();
    f.extend_from_slice(&from.0);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&l4);
    mbuf::Mbuf::from_slice(&f).unwrap()
}

/// The first 28 bytes of an IPv4 packet from `src` to `dst` of protocol `proto`
/// whose first 8 payload bytes are `head`: what an ICMP error quotes.
pub fn ip4_quote(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, head: [u8; 8]) -> Vec<u8> {
    let mut ip = vec![0x45u8, 0, 0, 60, 0, 0, 0, 0, 63, proto, 0, 0];
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let sum = !wire::checksum::data(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip.extend_from_slice(&head);
    ip
}

pub mod hub;

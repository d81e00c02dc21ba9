//! Packet builders shared by the tests, the benchmarks and the fuzz seeds (STYLE.md §11:
//! benchmarks share their packet generators with the tests), so that a number in a bench
//! is always about a packet some test has proven well formed.

use crate::*;

/// Source MAC of the samples.
pub const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
/// Destination MAC of the samples.
pub const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
/// IPv4 source of the samples.
pub const IP4_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// IPv4 destination of the samples.
pub const IP4_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// IPv6 source of the samples (fd00::1).
pub const IP6_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// IPv6 destination of the samples (fd00::2).
pub const IP6_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// Deterministic payload bytes.
pub fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

/// The TCP header of [`ethernet_ipv6_tcp`]: an ACK with timestamps and two SACK blocks, as a
/// Linux receiver sends while repairing loss.
pub fn tcp_repr(payload: &[u8]) -> TcpRepr<'_> {
    TcpRepr {
        src_port: 45030,
        dst_port: 8080,
        seq_number: TcpSeqNumber(0x5694_ad93),
        ack_number: TcpSeqNumber(0xeb1d_4413),
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window_len: 501,
        urgent_at: 0,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [
            Some((0xeb1d_5000, 0xeb1d_6000)),
            Some((0xeb1d_7000, 0xeb1d_8000)),
            None,
            None,
        ],
        timestamp: Some(TcpTimestampRepr {
            tsval: 0x3018_1c8a,
            tsecr: 0xbecb_8223,
        }),
        fast_open: None,
        payload,
    }
}

/// Ethernet + IPv4 + UDP with `payload_len` bytes of payload, all checksums filled.
pub fn ethernet_ipv4_udp(payload_len: usize) -> Vec<u8> {
    let data = payload(payload_len);
    let udp = UdpRepr {
        src_port: 40000,
        dst_port: 53,
    };
    let ip = Ipv4Repr {
        src_addr: IP4_A,
        dst_addr: IP4_B,
        next_header: IpProtocol::Udp,
        payload_len: udp.buffer_len(payload_len),
        hop_limit: 64,
        dscp: 0,
        ident: 0x2256,
        dont_frag: true,
    };
    let eth = EthernetRepr {
        src_addr: MAC_A,
        dst_addr: MAC_B,
        ethertype: EtherType::Ipv4,
    };
    let mut out = vec![0u8; eth.buffer_len() + ip.buffer_len() + ip.payload_len];
    let mut frame = EthernetFrame::new_unchecked(&mut out[..]);
    eth.emit(&mut frame);
    let mut packet = Ipv4Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut packet);
    udp.emit(
        &mut UdpPacket::new_unchecked(packet.payload_mut()),
        &IP4_A.into(),
        &IP4_B.into(),
        payload_len,
        |b| b.copy_from_slice(&data),
        true,
    );
    out
}

/// Ethernet + IPv6 + TCP ([`tcp_repr`]: timestamps and SACK) with `payload_len` bytes.
pub fn ethernet_ipv6_tcp(payload_len: usize) -> Vec<u8> {
    let data = payload(payload_len);
    let tcp = tcp_repr(&data);
    let ip = Ipv6Repr {
        src_addr: IP6_A,
        dst_addr: IP6_B,
        next_header: IpProtocol::Tcp,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
    };
    let eth = EthernetRepr {
        src_addr: MAC_A,
        dst_addr: MAC_B,
        ethertype: EtherType::Ipv6,
    };
    let mut out = vec![0u8; eth.buffer_len() + ip.buffer_len() + ip.payload_len];
    let mut frame = EthernetFrame::new_unchecked(&mut out[..]);
    eth.emit(&mut frame);
    let mut packet = Ipv6Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut packet);
    tcp.emit(
        &mut TcpPacket::new_unchecked(packet.payload_mut()),
        &IP6_A.into(),
        &IP6_B.into(),
        true,
    );
    out
}

/// Bytes from hex text: `#` lines are comments, everything but hex digits is ignored
/// (the format of the shared test vectors). `None` for an odd number of digits.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.bytes().filter(u8::is_ascii_hexdigit))
        .map(|c| (c as char).to_digit(16).unwrap_or(0) as u8)
        .collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    Some(digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect())
}

/// The m_pulldown paper's packet (`tests/data/ipv6-rthdr0-icmp6-echo.hex`): IPv6 (40),
/// a type 0 routing header with 4 addresses and segments left 4 (72), an ICMPv6 echo
/// request (16), 128 bytes.
pub fn rthdr0_icmp6_echo() -> Vec<u8> {
    from_hex(include_str!("../tests/data/ipv6-rthdr0-icmp6-echo.hex")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_parse_and_verify() {
        let bytes = ethernet_ipv4_udp(100);
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        let ip = Ipv4Packet::new_checked(frame.payload()).unwrap();
        let ip_repr = Ipv4Repr::parse(&ip, true).unwrap();
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        let (s, d) = (ip_repr.src_addr.into(), ip_repr.dst_addr.into());
        assert!(UdpRepr::parse(&udp, &s, &d, true).is_ok());
        assert_eq!(udp.payload(), payload(100));

        let bytes = ethernet_ipv6_tcp(100);
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        let ip = Ipv6Packet::new_checked(frame.payload()).unwrap();
        let ip_repr = Ipv6Repr::parse(&ip).unwrap();
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        let (s, d) = (ip_repr.src_addr.into(), ip_repr.dst_addr.into());
        let data = payload(100);
        assert_eq!(TcpRepr::parse(&tcp, &s, &d, true), Ok(tcp_repr(&data)));
        assert_eq!(tcp.header_len(), 20 + 12 + 20);
    }
}

//! Arbitrary bytes as IPv4 and as ICMPv4, UDP and TCP (alone, and as the payload of the
//! IPv4 packet when that parses): no getter of a checked view, no option iterator, no
//! `parse` and no `emit` of a parsed `Repr` may panic, and what is emitted parses back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr};
use wire::*;

fn icmpv4(data: &[u8]) {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.msg_type(), packet.msg_code(), packet.checksum());
    let _ = (packet.echo_ident(), packet.echo_seq_no(), packet.next_hop_mtu());
    let _ = (packet.pointer(), packet.gateway(), packet.data(), packet.verify_checksum());
    if let Ok(repr) = Icmpv4Repr::parse(&packet, false) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
        let again = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).unwrap(), true);
        assert_eq!(again, Ok(repr));
    }
}

fn udp(data: &[u8], src: IpAddr, dst: IpAddr) {
    let Ok(packet) = UdpPacket::new_checked(data) else {
        return;
    };
    let _ = (packet.src_port(), packet.dst_port(), packet.len(), packet.checksum());
    let _ = packet.verify_checksum(&src, &dst);
    let payload = packet.payload();
    if let Ok(repr) = UdpRepr::parse(&packet, &src, &dst, false) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len(payload.len())];
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut out[..]),
            &src,
            &dst,
            payload.len(),
            |b| b.copy_from_slice(payload),
            true,
        );
        let again = UdpPacket::new_checked(&out[..]).unwrap();
        assert_eq!(UdpRepr::parse(&again, &src, &dst, true), Ok(repr));
        assert_eq!(again.payload(), payload);
    }
}

fn tcp(data: &[u8], src: IpAddr, dst: IpAddr) {
    for option in TcpOptionsIter::new(data).flatten() {
        let mut out = vec![0u8; option.buffer_len()];
        option.emit(&mut out);
    }
    let Ok(packet) = TcpPacket::new_checked(data) else {
        return;
    };
    let _ = (packet.src_port(), packet.dst_port(), packet.seq_number(), packet.ack_number());
    let _ = (packet.flags(), packet.window_len(), packet.urgent_at(), packet.segment_len());
    let _ = (packet.options(), packet.payload(), packet.verify_checksum(&src, &dst));
    for option in packet.options_iter() {
        let _ = option;
    }
    if let Ok(repr) = TcpRepr::parse(&packet, &src, &dst, false) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &src, &dst, true);
        let again = TcpRepr::parse(&TcpPacket::new_checked(&out[..]).unwrap(), &src, &dst, true)
            .expect("emitted TCP segment must parse");
        // SACK blocks that do not fit beside the other options are dropped; all else stays.
        let mut expected = repr;
        expected.sack_ranges = again.sack_ranges;
        assert_eq!(again, expected);
    }
}

fuzz_target!(|data: &[u8]| {
    let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    icmpv4(data);
    udp(data, a, b);
    tcp(data, a, b);

    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.version(), packet.header_len(), packet.dscp(), packet.ecn());
    let _ = (packet.total_len(), packet.ident(), packet.dont_frag(), packet.more_frags());
    let _ = (packet.frag_offset(), packet.hop_limit(), packet.next_header());
    let _ = (packet.src_addr(), packet.dst_addr(), packet.options(), packet.is_fragment());
    let verified = packet.verify_checksum();
    let Ok(repr) = Ipv4Repr::parse(&packet, false) else {
        return;
    };
    assert_eq!(Ipv4Repr::parse(&packet, true).is_ok(), verified);
    let _ = repr.to_string();
    let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
    let mut emitted = Ipv4Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut emitted);
    emitted.payload_mut().copy_from_slice(packet.payload());
    let again = Ipv4Packet::new_checked(&out[..]).unwrap();
    assert_eq!(Ipv4Repr::parse(&again, true), Ok(repr));

    // Forwarding: the incremental TTL update keeps a valid header valid.
    let mut copy = data.to_vec();
    let mut fwd = Ipv4Packet::new_unchecked(&mut copy[..]);
    fwd.decrement_hop_limit();
    assert_eq!(fwd.verify_checksum(), verified);

    let (src, dst) = (IpAddr::V4(repr.src_addr), IpAddr::V4(repr.dst_addr));
    match repr.next_header {
        IpProtocol::Icmp => icmpv4(packet.payload()),
        IpProtocol::Udp => udp(packet.payload(), src, dst),
        IpProtocol::Tcp => tcp(packet.payload(), src, dst),
        _ => {}
    }
});

//! Arbitrary bytes as IPv6, as every extension header, as ICMPv6 (with NDP options and
//! MLDv2 records): no getter of a checked view, no iterator, no `parse` and no `emit` of a
//! parsed `Repr` may panic, and what is emitted parses back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv6Addr};
use wire::*;

fn ext_headers(data: &[u8]) {
    for proto in [
        IpProtocol::HopByHop,
        IpProtocol::Ipv6Route,
        IpProtocol::Ipv6Frag,
        IpProtocol::Ipv6Opts,
        IpProtocol::Ah,
        IpProtocol::Esp,
        IpProtocol::Tcp,
    ] {
        let _ = ext_header_len(proto, data);
        if let Ok((_, offset)) = upper_layer(proto, data) {
            assert!(offset <= data.len());
        }
    }
    for option in Ipv6OptionsIter::new(data).flatten() {
        let _ = (option.failure_type(), option.may_change());
        let mut out = vec![0u8; option.buffer_len()];
        option.emit(&mut out);
        assert_eq!(Ipv6Option::parse(&out).map(|(_, o)| o), Ok(option));
    }
    if let Ok(header) = Ipv6ExtHeader::new_checked(data) {
        let _ = (header.next_header(), header.payload());
        if let Ok(repr) = Ipv6ExtHeaderRepr::parse(&header) {
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
            assert_eq!(out, data[..header.header_len()]);
        }
    }
    if let Ok(header) = Ipv6RoutingHeader::new_checked(data) {
        let _ = (header.routing_type(), header.segments_left(), header.address_count());
        let _ = (header.addresses().count(), header.address(0), header.home_address());
        let _ = (header.data(), header.payload());
        if let Ok(repr) = Ipv6RoutingRepr::parse(&header) {
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Ipv6RoutingHeader::new_unchecked(&mut out[..]));
            let again = Ipv6RoutingHeader::new_checked(&out[..]).unwrap();
            assert_eq!(Ipv6RoutingRepr::parse(&again), Ok(repr));
        }
    }
    if let Ok(header) = Ipv6FragHeader::new_checked(data) {
        let repr = Ipv6FragRepr::parse(&header).unwrap();
        let mut out = [0u8; 8];
        repr.emit(&mut Ipv6FragHeader::new_unchecked(&mut out[..]));
        assert_eq!(Ipv6FragRepr::parse(&Ipv6FragHeader::new_unchecked(&out[..])), Ok(repr));
        let _ = header.payload();
    }
    if let Ok(header) = AhHeader::new_checked(data) {
        let _ = (header.next_header(), header.spi(), header.seq_number());
        let _ = (header.icv(), header.payload());
    }
    if let Ok(header) = EspHeader::new_checked(data) {
        let _ = (header.spi(), header.seq_number(), header.payload());
    }
}

fn icmpv6(data: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr) {
    for option in NdiscOptionsIter::new(data).flatten() {
        let mut out = vec![0u8; option.buffer_len()];
        option.emit(&mut out);
        assert_eq!(NdiscOptionRepr::parse(&out).map(|(_, o)| o), Ok(option));
    }
    if let Ok(option) = NdiscOption::new_checked(data) {
        let _ = (option.option_type(), option.link_layer_addr(), option.mtu(), option.data());
        let _ = (option.prefix_len(), option.prefix_flags(), option.prefix());
        let _ = (option.valid_lifetime(), option.preferred_lifetime());
    }
    for record in MldRecordsIter::new(data, u16::MAX).flatten() {
        let mut out = vec![0u8; record.buffer_len()];
        record.emit(&mut out);
        assert_eq!(MldAddressRecordRepr::parse(&out).map(|(_, r)| r), Ok(record));
    }
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.msg_type(), packet.msg_code(), packet.checksum(), packet.header_len());
    let _ = (packet.echo_ident(), packet.echo_seq_no(), packet.pkt_too_big_mtu());
    let _ = (packet.param_problem_ptr(), packet.current_hop_limit(), packet.router_flags());
    let _ = (packet.router_lifetime(), packet.reachable_time(), packet.retrans_time());
    let _ = (packet.neighbor_flags(), packet.target_addr(), packet.dest_addr());
    let _ = (packet.max_resp_code(), packet.mcast_addr(), packet.s_flag(), packet.qrv());
    let _ = (packet.qqic(), packet.num_srcs(), packet.nr_mcast_addr_rcrds());
    let _ = (packet.payload(), packet.options(), packet.verify_checksum(src, dst));
    let Ok(repr) = Icmpv6Repr::parse(&packet, src, dst, false) else {
        return;
    };
    let _ = repr.to_string();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), src, dst);
    let again = Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..]).unwrap(), src, dst, true)
        .expect("emitted ICMPv6 must parse");
    // NDP reprs keep only the options the stack acts on; every other repr is lossless.
    if !matches!(repr, Icmpv6Repr::Ndisc(_)) {
        assert_eq!(again, repr);
    }
    if let Icmpv6Repr::Mld(MldRepr::Report {
        nr_mcast_addr_rcrds,
        data,
    }) = repr
    {
        for record in MldRecordsIter::new(data, nr_mcast_addr_rcrds) {
            let _ = record;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let a = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    let b = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    ext_headers(data);
    icmpv6(data, &a, &b);

    let Ok(packet) = Ipv6Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.version(), packet.traffic_class(), packet.flow_label());
    let _ = (packet.payload_len(), packet.next_header(), packet.hop_limit());
    let Ok(repr) = Ipv6Repr::parse(&packet) else {
        return;
    };
    let _ = repr.to_string();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
    out.extend_from_slice(packet.payload());
    assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&out[..]).unwrap()), Ok(repr));

    let payload = packet.payload();
    ext_headers(payload);
    if let Ok((proto, offset)) = upper_layer(repr.next_header, payload) {
        let upper = &payload[offset..];
        match proto {
            IpProtocol::Icmpv6 => icmpv6(upper, &repr.src_addr, &repr.dst_addr),
            IpProtocol::Udp | IpProtocol::Tcp => {
                let (s, d) = (IpAddr::V6(repr.src_addr), IpAddr::V6(repr.dst_addr));
                if let Ok(p) = UdpPacket::new_checked(upper) {
                    let _ = UdpRepr::parse(&p, &s, &d, false);
                }
                if let Ok(p) = TcpPacket::new_checked(upper) {
                    let _ = TcpRepr::parse(&p, &s, &d, false);
                }
            }
            _ => {}
        }
    }
});

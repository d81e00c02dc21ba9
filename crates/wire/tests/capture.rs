//! Every frame of a real Linux capture (tests/data/linux-veth.txt) goes through the whole
//! parser stack, every checksum verifies, and emitting the parsed `Repr`s gives back the
//! captured bytes (a SYN's options in FreeBSD's order rather than Linux's).

use std::collections::BTreeMap;
use std::net::IpAddr;
use wire::*;

fn frames() -> Vec<(String, Vec<u8>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/linux-veth.txt");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (dir, hex) = l.split_once(' ').unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (dir.to_owned(), bytes)
        })
        .collect()
}

/// Parse and re-emit an L4 payload; return a label for the tally.
fn transport(proto: IpProtocol, bytes: &[u8], src: IpAddr, dst: IpAddr) -> String {
    match (proto, src, dst) {
        (IpProtocol::Icmp, _, _) => {
            let packet = Icmpv4Packet::new_checked(bytes).unwrap();
            let repr = Icmpv4Repr::parse(&packet, true).unwrap();
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
            assert_eq!(out, bytes, "{repr}");
            format!("icmp {:?}", packet.msg_type())
        }
        (IpProtocol::Icmpv6, IpAddr::V6(s), IpAddr::V6(d)) => {
            let packet = Icmpv6Packet::new_checked(bytes).unwrap();
            let repr = Icmpv6Repr::parse(&packet, &s, &d, true).unwrap();
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &s, &d);
            if out != bytes {
                // The one lossy case: options the Repr does not carry (the DAD nonce).
                let unknown = NdiscOptionsIter::new(packet.options())
                    .any(|o| matches!(o, Ok(NdiscOptionRepr::Unknown { .. })));
                assert!(unknown, "{repr}");
            }
            format!("icmp6 {:?}", packet.msg_type())
        }
        (IpProtocol::Udp, s, d) => {
            let packet = UdpPacket::new_checked(bytes).unwrap();
            let repr = UdpRepr::parse(&packet, &s, &d, true).unwrap();
            let payload = packet.payload();
            let mut out = vec![0u8; repr.buffer_len(payload.len())];
            repr.emit(
                &mut UdpPacket::new_unchecked(&mut out[..]),
                &s,
                &d,
                payload.len(),
                |b| b.copy_from_slice(payload),
                true,
            );
            assert_eq!(out, bytes);
            "udp".to_owned()
        }
        (IpProtocol::Tcp, s, d) => {
            let packet = TcpPacket::new_checked(bytes).unwrap();
            let repr = TcpRepr::parse(&packet, &s, &d, true).unwrap();
            let mut out = vec![0u8; repr.buffer_len()];
            repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &s, &d, true);
            if out != bytes {
                // The one difference: a SYN's options, which we lay out as FreeBSD
                // does and Linux in another order; the same options, the same length.
                assert!(repr.flags.contains(TcpFlags::SYN), "{repr}");
                assert_eq!(out.len(), bytes.len(), "{repr}");
                let back = TcpPacket::new_checked(&out[..]).unwrap();
                assert_eq!(TcpRepr::parse(&back, &s, &d, true).unwrap(), repr);
            }
            format!("tcp [{}]", repr.flags)
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn linux_capture_parses_verifies_and_reemits() {
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let frames = frames();
    assert_eq!(frames.len(), 47);
    for (dir, bytes) in &frames {
        assert!(dir == "in" || dir == "out");
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        let eth = EthernetRepr::parse(&frame).unwrap();
        let mut header = [0u8; 14];
        eth.emit(&mut EthernetFrame::new_unchecked(&mut header[..]));
        assert_eq!(header, bytes[..14]);

        let label = match eth.ethertype {
            EtherType::Arp => {
                let packet = ArpPacket::new_checked(frame.payload()).unwrap();
                let repr = ArpRepr::parse(&packet).unwrap();
                let mut out = [0u8; 28];
                repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
                assert_eq!(out, frame.payload());
                format!("arp {:?}", packet.operation())
            }
            EtherType::Ipv4 => {
                let packet = Ipv4Packet::new_checked(frame.payload()).unwrap();
                let repr = Ipv4Repr::parse(&packet, true).unwrap();
                let mut out = [0u8; 20];
                repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
                assert_eq!(out, frame.payload()[..20]);
                transport(
                    repr.next_header,
                    packet.payload(),
                    repr.src_addr.into(),
                    repr.dst_addr.into(),
                )
            }
            EtherType::Ipv6 => {
                let packet = Ipv6Packet::new_checked(frame.payload()).unwrap();
                let repr = Ipv6Repr::parse(&packet).unwrap();
                let mut out = [0u8; 40];
                let mut view = Ipv6Packet::new_unchecked(&mut out[..]);
                repr.emit(&mut view);
                view.set_traffic_class(packet.traffic_class());
                view.set_flow_label(packet.flow_label());
                assert_eq!(out, frame.payload()[..40]);

                let (proto, offset) = upper_layer(repr.next_header, packet.payload()).unwrap();
                if repr.next_header == IpProtocol::HopByHop {
                    let hbh = Ipv6ExtHeader::new_checked(packet.payload()).unwrap();
                    let hbh_repr = Ipv6ExtHeaderRepr::parse(&hbh).unwrap();
                    assert!(hbh
                        .options_iter()
                        .any(|o| o == Ok(Ipv6Option::RouterAlert(0))));
                    let mut out = vec![0u8; hbh_repr.buffer_len()];
                    hbh_repr.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
                    assert_eq!(out, packet.payload()[..offset]);
                }
                transport(
                    proto,
                    &packet.payload()[offset..],
                    repr.src_addr.into(),
                    repr.dst_addr.into(),
                )
            }
            other => panic!("unexpected ethertype {other}"),
        };
        *tally.entry(label).or_default() += 1;
    }
    let expected = [
        ("arp Reply", 1),
        ("arp Request", 1),
        ("icmp DstUnreachable", 1),
        ("icmp EchoReply", 1),
        ("icmp EchoRequest", 1),
        ("icmp6 DstUnreachable", 1),
        ("icmp6 EchoReply", 1),
        ("icmp6 EchoRequest", 1),
        ("icmp6 MldV2Report", 8),
        ("icmp6 NeighborAdvert", 1),
        ("icmp6 NeighborSolicit", 3),
        ("icmp6 RouterSolicit", 4),
        ("tcp [.]", 8),
        ("tcp [F.]", 2),
        ("tcp [P.]", 4),
        ("tcp [R.]", 2),
        ("tcp [S.]", 2),
        ("tcp [S]", 2),
        ("udp", 3),
    ];
    let got: Vec<(&str, usize)> = tally.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(got, expected);
}

//! One-line, tcpdump-style descriptions of frames, for traces and the demo.

use std::net::IpAddr;
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetFrame, Icmpv4Message, Icmpv4Packet,
    IpProtocol, Ipv4Packet, UdpPacket,
};

/// Describes an Ethernet frame in one line; never panics on malformed input.
pub fn describe(frame: &[u8]) -> String {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return format!("truncated frame, {} bytes", frame.len());
    };
    match eth.ethertype() {
        EtherType::Arp => {
            match ArpPacket::new_checked(eth.payload()).and_then(|p| ArpRepr::parse(&p)) {
                Ok(ArpRepr::EthernetIpv4 {
                    operation,
                    source_hardware_addr,
                    source_protocol_addr,
                    target_protocol_addr,
                    ..
                }) => match operation {
                    ArpOperation::Request => format!(
                        "ARP, Request who-has {target_protocol_addr} tell {source_protocol_addr}"
                    ),
                    ArpOperation::Reply => {
                        format!("ARP, Reply {source_protocol_addr} is-at {source_hardware_addr}")
                    }
                    ArpOperation::Unknown(op) => format!("ARP, op {op}"),
                },
                Err(e) => format!("ARP, malformed ({e})"),
            }
        }
        EtherType::Ipv4 => describe_ipv4(eth.payload()),
        other => format!("ethertype {:#06x}, {} bytes", u16::from(other), frame.len()),
    }
}

fn describe_ipv4(b: &[u8]) -> String {
    let Ok(ip) = Ipv4Packet::new_checked(b) else {
        return "IP, malformed".into();
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let payload = ip.payload();
    match ip.next_header() {
        IpProtocol::Icmp => match Icmpv4Packet::new_checked(payload) {
            Ok(p) => {
                let what = match p.msg_type() {
                    Icmpv4Message::EchoRequest => {
                        format!(
                            "echo request, id {}, seq {}",
                            p.echo_ident(),
                            p.echo_seq_no()
                        )
                    }
                    Icmpv4Message::EchoReply => {
                        format!("echo reply, id {}, seq {}", p.echo_ident(), p.echo_seq_no())
                    }
                    Icmpv4Message::DstUnreachable => match p.msg_code() {
                        3 => "port unreachable".to_string(),
                        2 => "protocol unreachable".to_string(),
                        c => format!("unreachable code {c}"),
                    },
                    other => format!("type {}", u8::from(other)),
                };
                format!("IP {src} > {dst}: ICMP {what}, length {}", payload.len())
            }
            Err(_) => format!("IP {src} > {dst}: ICMP, malformed"),
        },
        IpProtocol::Udp => match UdpPacket::new_checked(payload) {
            Ok(p) => {
                let ok = p.verify_checksum(&IpAddr::V4(src), &IpAddr::V4(dst));
                format!(
                    "IP {src}.{} > {dst}.{}: UDP, length {}{}",
                    p.src_port(),
                    p.dst_port(),
                    p.payload().len(),
                    if ok { "" } else { " [bad udp cksum]" }
                )
            }
            Err(_) => format!("IP {src} > {dst}: UDP, malformed"),
        },
        other => format!(
            "IP {src} > {dst}: proto {}, length {}",
            u8::from(other),
            payload.len()
        ),
    }
}

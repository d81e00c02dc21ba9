//! One-line, tcpdump-style descriptions of frames, for traces and the demo.

use std::net::IpAddr;
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetFrame, Icmpv4Message, Icmpv4Packet,
    Icmpv6Message, Icmpv6Packet, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket,
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
        EtherType::Ipv6 => describe_ipv6(eth.payload()),
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
                    Icmpv4Message::TimeExceeded => match p.msg_code() {
                        0 => "time exceeded in-transit".to_string(),
                        c => format!("time exceeded code {c}"),
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
        IpProtocol::Tcp => describe_tcp("IP", src.into(), dst.into(), payload),
        other => format!(
            "IP {src} > {dst}: proto {}, length {}",
            u8::from(other),
            payload.len()
        ),
    }
}

/// tcpdump's TCP line: `IP a.p > b.q: Flags [S.], seq 1, ack 2, win 3, length 4`.
fn describe_tcp(fam: &str, src: IpAddr, dst: IpAddr, b: &[u8]) -> String {
    let Ok(t) = TcpPacket::new_checked(b) else {
        return format!("{fam} {src} > {dst}: TCP, malformed");
    };
    let mut flags = String::new();
    for (on, c) in [
        (t.syn(), 'S'),
        (t.fin(), 'F'),
        (t.rst(), 'R'),
        (t.psh(), 'P'),
        (t.ack(), '.'),
    ] {
        if on {
            flags.push(c);
        }
    }
    if flags.is_empty() {
        flags.push_str("none");
    }
    let mut s = format!(
        "{fam} {src}.{} > {dst}.{}: Flags [{flags}], seq {}",
        t.src_port(),
        t.dst_port(),
        t.seq_number().0
    );
    if t.ack() {
        s += &format!(", ack {}", t.ack_number().0);
    }
    s += &format!(", win {}, length {}", t.window_len(), t.payload().len());
    s
}

fn describe_ipv6(b: &[u8]) -> String {
    let Ok(ip) = Ipv6Packet::new_checked(b) else {
        return "IP6, malformed".into();
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let Ok((proto, off)) = wire::upper_layer(ip.next_header(), ip.payload()) else {
        return format!("IP6 {src} > {dst}: malformed extension header");
    };
    let payload = ip.payload().get(off..).unwrap_or_default();
    match proto {
        IpProtocol::Icmpv6 => match Icmpv6Packet::new_checked(payload) {
            Ok(p) => {
                let what = match p.msg_type() {
                    Icmpv6Message::NeighborSolicit => {
                        format!("neighbor solicitation, who has {}", p.target_addr())
                    }
                    Icmpv6Message::NeighborAdvert => {
                        format!("neighbor advertisement, tgt is {}", p.target_addr())
                    }
                    Icmpv6Message::RouterSolicit => "router solicitation".to_string(),
                    Icmpv6Message::RouterAdvert => "router advertisement".to_string(),
                    Icmpv6Message::EchoRequest => format!(
                        "echo request, id {}, seq {}",
                        p.echo_ident(),
                        p.echo_seq_no()
                    ),
                    Icmpv6Message::EchoReply => {
                        format!("echo reply, id {}, seq {}", p.echo_ident(), p.echo_seq_no())
                    }
                    Icmpv6Message::DstUnreachable => match p.msg_code() {
                        4 => "unreachable port".to_string(),
                        c => format!("unreachable code {c}"),
                    },
                    Icmpv6Message::TimeExceeded => "time exceeded in-transit".to_string(),
                    Icmpv6Message::PktTooBig => {
                        format!("packet too big, mtu {}", p.pkt_too_big_mtu())
                    }
                    Icmpv6Message::MldReport
                    | Icmpv6Message::MldV2Report
                    | Icmpv6Message::MldQuery
                    | Icmpv6Message::MldDone => "multicast listener message".to_string(),
                    other => format!("type {}", u8::from(other)),
                };
                format!("IP6 {src} > {dst}: ICMP6, {what}, length {}", payload.len())
            }
            Err(_) => format!("IP6 {src} > {dst}: ICMP6, malformed"),
        },
        IpProtocol::Udp => match UdpPacket::new_checked(payload) {
            Ok(p) => format!(
                "IP6 {src}.{} > {dst}.{}: UDP, length {}",
                p.src_port(),
                p.dst_port(),
                p.payload().len()
            ),
            Err(_) => format!("IP6 {src} > {dst}: UDP, malformed"),
        },
        IpProtocol::Tcp => describe_tcp("IP6", src.into(), dst.into(), payload),
        other => format!(
            "IP6 {src} > {dst}: next header {}, length {}",
            u8::from(other),
            payload.len()
        ),
    }
}

//! The protocol switches (FreeBSD's `inetsw` and `inet6sw`): a datagram IP
//! delivered to this host, offered to the netchannels, then to its transport by
//! its protocol number.

use super::Cx;
use crate::inet::ip::IpInfo;
use crate::inet::{icmp, udp};
use crate::inet6::input6;
use crate::inet6::ip6::Ip6Info;
use crate::link::iface::Ifnet;
use crate::stack::netchannel;
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::sync::Arc;

/// A transport's input for datagrams delivered to this host (`pr_input`).
type Input4 = fn(&mut Cx<'_>, &Arc<Ifnet>, Mbuf, IpInfo);
type Input6 = fn(&mut Cx<'_>, &Arc<Ifnet>, Mbuf, Ip6Info);

/// One entry of a protocol switch (FreeBSD's `struct protosw`).
struct ProtoSw<F> {
    proto: wire::IpProtocol,
    input: F,
}

/// The IPv4 protocol switch (FreeBSD's `inetsw`): IP input returns, and the worker
/// hands each local datagram to its transport through this table, so that no
/// stage below calls up by name.
static INETSW: [ProtoSw<Input4>; 3] = [
    ProtoSw {
        proto: wire::IpProtocol::Icmp,
        input: |cx, ifp, m, info| icmp::icmp_input(&mut cx.inet(), ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Udp,
        input: |cx, ifp, m, info| udp::udp_input(&mut cx.inet(), ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Tcp,
        input: |cx, ifp, m, info| {
            let (mut t, tw) = cx.tcp();
            crate::tcp::layer::tcp4_input(&mut t, tw, ifp, m, info)
        },
    },
];

/// The IPv6 protocol switch (FreeBSD's `inet6sw`).
static INET6SW: [ProtoSw<Input6>; 3] = [
    ProtoSw {
        proto: wire::IpProtocol::Icmpv6,
        input: |cx, ifp, m, info| crate::inet6::icmp6::icmp6_input(&mut cx.inet6(), ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Udp,
        input: |cx, ifp, m, info| crate::inet6::udp6::udp6_input(&mut cx.inet6(), ifp, m, info),
    },
    ProtoSw {
        proto: wire::IpProtocol::Tcp,
        input: |cx, ifp, m, info| {
            let (mut t, tw) = cx.tcp();
            crate::tcp::layer::tcp6_input(&mut t, tw, ifp, m, info)
        },
    },
];

/// `ip_protox`: a local IPv4 datagram to its transport, or a protocol unreachable
/// (RFC 1122 §3.2.2.1) when there is none.
pub(super) fn ip_protox(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, m: Mbuf, info: IpInfo) {
    let (src, dst) = (info.src.into(), info.dst.into());
    let Some(m) = netchannel::take(cx, m, info.proto.into(), src, dst, info.hlen) else {
        return;
    };
    match INETSW.iter().find(|p| p.proto == info.proto) {
        Some(p) => (p.input)(cx, ifp, m, info),
        None if !info.bcast => {
            let tunnels = cx.tunnels;
            let Some(m) = crate::tunnel::tunnel_input4(&mut cx.ip46(), tunnels, m, &info) else {
                return;
            };
            cx.link.stats.ip.noproto += 1;
            icmp::icmp_error(&mut cx.inet(), m, wire::Icmpv4Message::DstUnreachable, 2, 0);
        }
        None => cx.link.drop_pkt(m, DropReason::IpNoProto),
    }
}

/// `ip6_protox`: a local IPv6 packet to its transport (`proto`, whose Next Header
/// field is at `nh_at`), or a Parameter Problem when there is none.
pub(super) fn ip6_protox(
    cx: &mut Cx<'_>,
    ifp: &Arc<Ifnet>,
    m: Mbuf,
    info: Ip6Info,
    proto: wire::IpProtocol,
    nh_at: usize,
) {
    let (src, dst) = (info.src.into(), info.dst.into());
    let Some(m) = netchannel::take(cx, m, proto.into(), src, dst, info.off) else {
        return;
    };
    match INET6SW.iter().find(|p| p.proto == proto) {
        Some(p) => (p.input)(cx, ifp, m, info),
        None => {
            let tunnels = cx.tunnels;
            let Some(m) = crate::tunnel::tunnel_input6(&mut cx.ip46(), tunnels, m, &info, proto)
            else {
                return;
            };
            cx.link.stats.ip6.unknownhdr += 1;
            input6::param_problem(
                &mut cx.inet6(),
                m,
                wire::Icmpv6ParamProblem::UnrecognizedNxtHdr,
                nh_at,
            );
        }
    }
}

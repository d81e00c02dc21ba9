//! The worker's input phases: one burst from each owned queue through the input
//! stages ([`receive`]), the packets the host sent itself and those taken off a
//! tunnel ([`loopback`]), and a packet a hook kept, resumed ([`reinject`]); and
//! the stages they run a vector through, a stage at a time.

use super::protosw::{ip6_protox, ip_protox};
use super::upcalls::flush_tcp;
use super::{Cx, Poll, Vectors};
use crate::inet::input::{ip_input, ip_reass};
use crate::inet::{forward, ip};
use crate::inet6::input6::{ip6_deliver, ip6_input};
use crate::inet6::ip6;
use crate::link::ether;
use crate::link::iface::{IfIndex, Ifnet};
use crate::pfil::{Deferred, Dir, PfilPoint};
use crate::runtime::{ticks, Runtime, Stage};
use crate::stats::DropReason;
use mbuf::Mbuf;
use std::sync::Arc;

/// Receives one burst from each owned queue and runs it through the input
/// stages, a stage at a time.
#[inline]
pub(super) fn receive(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    let (now, burst, cfg) = (w.now, w.burst, w.cfg);
    let rx = &mut *w.rx;
    for oq in w.queues.iter_mut() {
        let t = ticks();
        let n = oq.q.rx_burst(now, rx, burst);
        let t = w.rt.count(Stage::Rx, n, t);
        *w.worked |= n > 0;
        if n >= burst {
            w.more = true;
        }
        if n == 0 {
            continue;
        }
        let Some(ifp) = cfg.ifaces.get(oq.ifindex.get()) else {
            // A queue whose interface is gone from the configuration.
            DropReason::EtherNoIf.count_n(cx.link.stats, rx.len() as u64);
            rx.clear();
            continue;
        };
        if !ifp.is_up() {
            // `ifconfig IF down`: the interface takes nothing in.
            DropReason::EtherIfDown.count_n(cx.link.stats, rx.len() as u64);
            rx.clear();
            continue;
        }
        // Software LRO for a device that does not merge segments itself, when
        // the burst holds TCP at all.
        let t = if cx.tcp.cfg.lro
            && ifp.offload.tso == 0
            && cx.link.bridges.member_of(ifp.index).is_none()
            && rx.iter().any(crate::link::lro::candidate)
        {
            lro(cx, ifp, rx, &mut w.v.lro);
            w.rt.count(Stage::Lro, rx.len(), t)
        } else {
            t
        };
        input_frames(cx, w.rt, w.v, ifp, rx, t);
    }
}

/// Packets to ourselves, and those taken off a tunnel, input again after the
/// batch (at most four rounds a poll; what is left makes the worker run again).
#[inline]
pub(super) fn loopback(cx: &mut Cx<'_>, w: &mut Poll<'_>) {
    let (cfg, rt, v) = (w.cfg, &mut *w.rt, &mut *w.v);
    let mut rounds = 0;
    while !cx.ip.loopq.is_empty() && rounds < 4 {
        rounds += 1;
        let n = cx.ip.loopq.len();
        for k in 0..n {
            let (ifi, m) = cx.ip.loopq.swap_remove(n - 1 - k);
            if let Some(ifp) = cfg.ifaces.get(ifi.get()) {
                if ifp.no_link_header() && !ifp.is_up() {
                    // Taken off a tunnel whose interface is down.
                    cx.link.drop_pkt(m, DropReason::EtherIfDown);
                    continue;
                }
                // IPv4 looped back, or either family taken off a tunnel.
                let v6 = m.first().first().is_some_and(|b| b >> 4 == 6);
                v.one.push(m);
                let mut one = std::mem::take(&mut v.one);
                if v6 {
                    family_input::<V6>(cx, rt, v, ifp, &mut one, ticks());
                } else {
                    family_input::<V4>(cx, rt, v, ifp, &mut one, ticks());
                }
                v.one = one;
            } else {
                // Looped back or off a tunnel whose interface has gone since.
                cx.link.drop_pkt(m, DropReason::EtherNoIf);
            }
        }
        flush_tcp(cx);
    }
    if !cx.ip.loopq.is_empty() {
        w.more = true;
    }
}

/// Software LRO over a burst (`crate::link::lro`): merged packets replace their frames in
/// `rx`, in order.
fn lro(cx: &mut Cx<'_>, ifp: &Ifnet, rx: &mut Vec<Mbuf>, out: &mut Vec<Mbuf>) {
    let mut lro = crate::link::lro::Lro::default();
    let local = |d: &std::net::IpAddr| match d {
        std::net::IpAddr::V4(a) => ifp.has_addr(*a),
        std::net::IpAddr::V6(a) => ifp.addr6(*a).is_some(),
    };
    {
        let mut up = |m| out.push(m);
        for m in rx.drain(..) {
            lro.input(ifp.mac.0, local, m, &mut up);
        }
        lro.flush(&mut up);
    }
    std::mem::swap(rx, out);
    cx.link.stats.tcp.lroqueued += lro.stats.queued;
    // Frames received, as a driver counts them: those merged into another never
    // reach `ether_input`'s count.
    cx.link.stats.ether.ipackets += lro.stats.queued;
    cx.link.stats.tcp.lroflushed += lro.stats.flushed;
}

/// A vector of frames received on `ifp` through the stages: `ether_input`, then
/// ARP, IPv4 and IPv6 each over its share. `t` is when the vector's processing
/// started ([`ticks`]).
pub(super) fn input_frames(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    ifp: &Arc<Ifnet>,
    pkts: &mut Vec<Mbuf>,
    t: u64,
) {
    let mut t = t;
    let mut ifp = ifp;
    let bridges = cx.link.bridges;
    let trunk = bridges.trunk(ifp.index);
    if !trunk.is_empty() {
        vlan_split(cx, rt, v, trunk, pkts);
        if pkts.is_empty() {
            return;
        }
    }
    let mut n = pkts.len();
    let bridged = bridges.member_of(ifp.index);
    if let Some((bc, mi)) = bridged {
        crate::link::bridge::input::bridge_input(&mut cx.link, ifp, bc, mi, pkts, &mut v.br);
        t = rt.count(Stage::BridgeInput, n, t);
        if v.br.local.is_empty() {
            return;
        }
        // The frames for the bridge itself, on through its interface.
        std::mem::swap(pkts, &mut v.br.local);
        n = pkts.len();
        let ifaces = cx.link.ifaces;
        match ifaces.get(bc.br.ifindex.get()) {
            Some(b) => ifp = b,
            None => {
                DropReason::EtherNoIf.count_n(cx.link.stats, n as u64);
                pkts.clear();
                return;
            }
        }
    }
    ether::ether_input(&mut cx.link, ifp, pkts, &mut v.ether, bridged.is_some());
    t = rt.count(Stage::EtherInput, n, t);
    if !v.ether.arp.is_empty() {
        let n = v.ether.arp.len();
        let mut arp = std::mem::take(&mut v.ether.arp);
        for m in arp.drain(..) {
            ether::arp_input(&mut cx.link, ifp, m);
        }
        v.ether.arp = arp;
        t = rt.count(Stage::ArpInput, n, t);
    }
    if !v.ether.ip4.is_empty() {
        let mut ip4 = std::mem::take(&mut v.ether.ip4);
        t = family_input::<V4>(cx, rt, v, ifp, &mut ip4, t);
        v.ether.ip4 = ip4;
    }
    if !v.ether.ip6.is_empty() {
        let mut ip6 = std::mem::take(&mut v.ether.ip6);
        family_input::<V6>(cx, rt, v, ifp, &mut ip6, t);
        v.ether.ip6 = ip6;
    }
}

/// The frames of a burst tagged for one of the parent's VLANs (`trunk`), each
/// VLAN's share untagged and through its interface's input; the parent's own stay
/// in `pkts`.
fn vlan_split(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    trunk: &[(u16, IfIndex)],
    pkts: &mut Vec<Mbuf>,
) {
    let mut tagged = std::mem::take(&mut v.vlan_tagged);
    let mut rest = std::mem::take(&mut v.vlan_rest);
    crate::link::bridge::vlan::vlan_input(&mut cx.link, trunk, pkts, &mut tagged, &mut rest);
    v.vlan_rest = rest;
    let mut one = std::mem::take(&mut v.vlan_one);
    let ifaces = cx.link.ifaces;
    for &(_, ifv) in trunk {
        if tagged.is_empty() {
            break;
        }
        let mut other = std::mem::take(&mut v.vlan_other);
        for (i, m) in tagged.drain(..) {
            if i == ifv {
                one.push(m);
            } else {
                other.push((i, m));
            }
        }
        std::mem::swap(&mut tagged, &mut other);
        v.vlan_other = other;
        if one.is_empty() {
            continue;
        }
        match ifaces.get(ifv.get()) {
            Some(c) => input_frames(cx, rt, v, c, &mut one, ticks()),
            None => {
                DropReason::EtherNoIf.count_n(cx.link.stats, one.len() as u64);
                one.clear();
            }
        }
    }
    v.vlan_one = one;
    v.vlan_tagged = tagged;
}

/// What the input phase does per family: its three stages (input, forwarding,
/// local delivery), their runtime counters, and where each leaves its packets in
/// the worker's vectors. [`family_input`] is the one body both run, monomorphised
/// per family.
trait InputFamily {
    const INPUT: Stage;
    const FORWARD: Stage;
    const DELIVER: Stage;
    /// The family's input stage over `pkts`: into the forward and local vectors.
    fn input(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, pkts: &mut Vec<Mbuf>, v: &mut Vectors);
    /// Packets `input` left to forward.
    fn forwarding(v: &Vectors) -> usize;
    /// Forwards them: into the link output vector.
    fn forward(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, v: &mut Vectors);
    /// Packets `input` left for this host.
    fn local(v: &Vectors) -> usize;
    /// Reassembles and delivers them through the protocol switch.
    fn deliver(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, v: &mut Vectors);
}

struct V4;
struct V6;

impl InputFamily for V4 {
    const INPUT: Stage = Stage::IpInput;
    const FORWARD: Stage = Stage::IpForward;
    const DELIVER: Stage = Stage::IpDeliver;
    #[inline(always)]
    fn input(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, pkts: &mut Vec<Mbuf>, v: &mut Vectors) {
        ip_input(&mut cx.inet(), ifp, pkts, &mut v.ip);
    }
    #[inline(always)]
    fn forwarding(v: &Vectors) -> usize {
        v.ip.fwd.len()
    }
    #[inline(always)]
    fn forward(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, v: &mut Vectors) {
        forward::ip_forward(&mut cx.inet(), ifp, &mut v.ip.fwd, &mut v.fwd, &mut v.l2);
    }
    #[inline(always)]
    fn local(v: &Vectors) -> usize {
        v.ip.local.len()
    }
    fn deliver(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, v: &mut Vectors) {
        let mut local = std::mem::take(&mut v.ip.local);
        for (m, info) in local.drain(..) {
            if let Some((m, info)) = ip_reass(&mut cx.inet(), m, info) {
                ip_protox(cx, ifp, m, info);
            }
        }
        v.ip.local = local;
    }
}

impl InputFamily for V6 {
    const INPUT: Stage = Stage::Ip6Input;
    const FORWARD: Stage = Stage::Ip6Forward;
    const DELIVER: Stage = Stage::Ip6Deliver;
    #[inline(always)]
    fn input(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, pkts: &mut Vec<Mbuf>, v: &mut Vectors) {
        ip6_input(&mut cx.inet6(), ifp, pkts, &mut v.ip6);
    }
    #[inline(always)]
    fn forwarding(v: &Vectors) -> usize {
        v.ip6.fwd.len()
    }
    #[inline(always)]
    fn forward(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, v: &mut Vectors) {
        let (fwd, out) = (&mut v.ip6.fwd, &mut v.fwd6);
        crate::inet6::forward6::ip6_forward(&mut cx.inet6(), ifp, fwd, out, &mut v.l2);
    }
    #[inline(always)]
    fn local(v: &Vectors) -> usize {
        v.ip6.local.len()
    }
    fn deliver(cx: &mut Cx<'_>, ifp: &Arc<Ifnet>, v: &mut Vectors) {
        let mut local = std::mem::take(&mut v.ip6.local);
        for (m, h, tentative) in local.drain(..) {
            if let Some((m, info, proto, nh_at)) = ip6_deliver(&mut cx.inet6(), m, h, tentative) {
                ip6_protox(cx, ifp, m, info, proto, nh_at);
            }
        }
        v.ip6.local = local;
    }
}

/// IP packets of family `F` (no link header) arrived on `ifp` through the
/// stages: input, forwarding and `ether_output` for those to forward, then local
/// delivery through the protocol switch. Returns the time it ended.
#[inline(always)]
fn family_input<F: InputFamily>(
    cx: &mut Cx<'_>,
    rt: &mut Runtime,
    v: &mut Vectors,
    ifp: &Arc<Ifnet>,
    pkts: &mut Vec<Mbuf>,
    t: u64,
) -> u64 {
    let n = pkts.len();
    F::input(cx, ifp, pkts, v);
    let mut t = rt.count(F::INPUT, n, t);
    let n = F::forwarding(v);
    if n != 0 {
        F::forward(cx, ifp, v);
        t = rt.count(F::FORWARD, n, t);
    }
    t = link_output(cx, rt, v, t);
    let n = F::local(v);
    if n != 0 {
        F::deliver(cx, ifp, v);
        t = rt.count(F::DELIVER, n, t);
    }
    t
}

/// `ether_output` over the forwarded packets the stages left for it.
fn link_output(cx: &mut Cx<'_>, rt: &mut Runtime, v: &mut Vectors, t: u64) -> u64 {
    if v.l2.is_empty() {
        return t;
    }
    let n = v.l2.len();
    ether::ether_output_vec(&mut cx.link, &mut v.l2, &mut v.eout);
    rt.count(Stage::EtherOutput, n, t)
}

/// Resumes a packet a hook kept (dummynet) where it was taken, past the hooks
/// (ipfw's `one_pass`): an inbound one into the input stages, an outbound one to
/// its route's link output.
pub(super) fn reinject(cx: &mut Cx<'_>, rt: &mut Runtime, v: &mut Vectors, d: Deferred) {
    let ifaces = cx.link.ifaces;
    let Some(ifp) = ifaces.get(d.ifindex.get()) else {
        // Released by a pipe after its interface went away.
        return cx.link.drop_pkt(d.m, DropReason::EtherNoIf);
    };
    let skip = std::mem::replace(&mut cx.link.pfil_skip, true);
    let mut m = d.m;
    let mut one = std::mem::take(&mut v.one);
    match (d.point, d.dir) {
        (PfilPoint::Inet, Dir::In) => {
            one.push(m);
            family_input::<V4>(cx, rt, v, ifp, &mut one, ticks());
        }
        (PfilPoint::Inet6, Dir::In) => {
            one.push(m);
            family_input::<V6>(cx, rt, v, ifp, &mut one, ticks());
        }
        (PfilPoint::Ether, Dir::In) => {
            one.push(m);
            input_frames(cx, rt, v, ifp, &mut one, ticks());
        }
        (PfilPoint::Inet, Dir::Out) => {
            // Out again by its route (the next hop was not kept with the packet).
            if let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, 0, 20) {
                let dst = std::net::Ipv4Addr::new(h[16], h[17], h[18], h[19]);
                match ip::ip_route(&cx.inet(), dst) {
                    Some((out, next, bcast)) => {
                        ip::ip_send(&mut cx.inet(), out, m, dst, next, bcast)
                    }
                    None => cx.link.drop_pkt(m, DropReason::IpNoRoute),
                }
            }
        }
        (PfilPoint::Inet6, Dir::Out) => {
            if let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, 0, 40) {
                let mut d6 = [0u8; 16];
                d6.copy_from_slice(&h[24..40]);
                let dst = std::net::Ipv6Addr::from(d6);
                match ip6::ip6_route(&cx.inet6(), dst, Some(ifp.index)) {
                    Some((out, next)) => ip6::ip6_send(&mut cx.inet6(), out, m, dst, next),
                    None => cx.link.drop_pkt(m, DropReason::Ip6NoRoute),
                }
            }
        }
        (PfilPoint::Ether, Dir::Out) => {
            cx.link.stats.ether.opackets += 1;
            cx.link.tx[ifp.index.get()].push(m);
        }
    }
    v.one = one;
    cx.link.pfil_skip = skip;
}

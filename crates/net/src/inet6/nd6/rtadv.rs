//! Router advertisements sent by a router (RFC 4861 §6.2): unsolicited ones at
//! jittered intervals, the first few sooner, and answers to router solicitations,
//! never two multicast ones closer than `MIN_DELAY_BETWEEN_RAS`.
//!
//! What it may call: the interface's addresses and prefixes, the published
//! configuration (`ctl6`), `ip6_send`.

use super::*;

/// RFC 4861 §6.2.1 defaults: MaxRtrAdvInterval 600 s, MinRtrAdvInterval a third of
/// it, AdvDefaultLifetime three times it; §10: the first three unsolicited
/// advertisements at most 16 s apart, and at least 3 s between two multicast ones.
const MAX_RTR_ADV_INTERVAL: u64 = 600_000_000_000;
const MIN_RTR_ADV_INTERVAL: u64 = 200_000_000_000;
const ADV_DEFAULT_LIFETIME: u16 = 1800;
const MAX_INITIAL_RTR_ADVERTISEMENTS: u32 = 3;
const MAX_INITIAL_RTR_ADVERT_INTERVAL: u64 = 16_000_000_000;
const MIN_DELAY_BETWEEN_RAS: u64 = 3_000_000_000;
/// §6.2.6: an answer to a solicitation waits a random 0 to 500 ms.
const MAX_RA_DELAY_TIME: u64 = 500_000_000;

/// A pseudo-random fraction in [0, 1) from the interface's MAC and a count, so that
/// routers' timers do not beat together yet runs are reproducible.
fn jitter(ifp: &Ifnet, n: u32) -> f64 {
    let m = ifp.mac.0;
    let x = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]) ^ u64::from(n);
    let x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Router advertisements (RFC 4861 §6.2) on an interface that sends them: three
/// quick ones when it comes up, then one every 200 to 600 s, and one soon after a
/// solicitation. Each names this router (lifetime 1800 s while it forwards IPv6),
/// the link MTU, its link-layer address, and the interface's prefixes (on-link;
/// autonomous for /64s, so hosts form addresses). Worker 0's timers.
pub(crate) fn nd6_rtadv_timer(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !ifp.forwarding.rtadv() {
        return None;
    }
    let ll = ifp
        .addrs6
        .iter()
        .find(|a| crate::link::iface::is_link_local(a.addr.addr))?;
    if !ll.usable() {
        return None;
    }
    let now = cx.link.now.as_nanos();
    let (sent, due) = match cx.v6.inet6.nd6.rtadv.iter().find(|r| r.0 == ifp.index) {
        Some(r) => (r.1, r.2),
        None => (0, now),
    };
    if due > now {
        return Some(Instant::from_nanos(due));
    }
    let wait = if sent + 1 < MAX_INITIAL_RTR_ADVERTISEMENTS {
        MAX_INITIAL_RTR_ADVERT_INTERVAL
    } else {
        let span = (MAX_RTR_ADV_INTERVAL - MIN_RTR_ADV_INTERVAL) as f64;
        MIN_RTR_ADV_INTERVAL + (span * jitter(ifp, sent)) as u64
    };
    let next = now + wait;
    cx.v6.ctl6.update_nd6(&mut |c| {
        c.rtadv.retain(|r| r.0 != ifp.index);
        c.rtadv.push((ifp.index, sent + 1, next, now));
    });
    nd6_ra_output(cx, ifp, ll.addr.addr);
    Some(Instant::from_nanos(next))
}

/// A router solicitation arrived on `ifp`: answer with the next advertisement soon
/// (after a random delay, and never sooner than 3 s after the last).
pub(crate) fn nd6_rs_input(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>) {
    if !ifp.forwarding.rtadv() {
        return;
    }
    let now = cx.link.now.as_nanos();
    let n = cx.link.stats.icmp6.inroutersolicit as u32;
    let soon = now + (MAX_RA_DELAY_TIME as f64 * jitter(ifp, n)) as u64;
    let Some(&(_, sent, due, last)) = cx.v6.inet6.nd6.rtadv.iter().find(|r| r.0 == ifp.index)
    else {
        // None sent yet: the first goes out at once anyway.
        return;
    };
    let at = soon.max(last + MIN_DELAY_BETWEEN_RAS);
    if at < due {
        cx.v6.ctl6.update_nd6(&mut |c| {
            if let Some(r) = c.rtadv.iter_mut().find(|r| r.0 == ifp.index) {
                *r = (ifp.index, sent, at, last);
            }
        });
        cx.v6.ctl6.notify_worker(0);
    }
}

/// One advertisement to all-nodes from the link-local address `src`.
fn nd6_ra_output(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>, src: Ipv6Addr) {
    let mut opts = Vec::with_capacity(64);
    // Source link-layer address (§4.6.1).
    opts.extend_from_slice(&[1, 1]);
    opts.extend_from_slice(&ifp.mac.0);
    // MTU (§4.6.4).
    opts.extend_from_slice(&[5, 1, 0, 0]);
    opts.extend_from_slice(&(ifp.mtu as u32).to_be_bytes());
    // Prefix information (§4.6.2) for each prefix of the interface's addresses.
    let mut seen = Vec::new();
    for a in ifp
        .addrs6
        .iter()
        .filter(|a| !crate::link::iface::is_link_local(a.addr.addr))
    {
        let len = a.addr.prefix_len;
        let net = route::IpPrefix::new(a.addr.addr.into(), len);
        if seen.contains(&net) || len > 127 {
            continue;
        }
        seen.push(net);
        let flags = if len == 64 { 0xc0 } else { 0x80 };
        opts.extend_from_slice(&[3, 4, len, flags]);
        opts.extend_from_slice(&2_592_000u32.to_be_bytes());
        opts.extend_from_slice(&604_800u32.to_be_bytes());
        opts.extend_from_slice(&[0; 4]);
        if let std::net::IpAddr::V6(p) = net.addr() {
            opts.extend_from_slice(&p.octets());
        }
    }
    let lifetime = if ifp.forwarding.inet6() {
        ADV_DEFAULT_LIFETIME
    } else {
        0
    };
    cx.link.stats.icmp6.outrouteradvert += 1;
    icmp6_send(
        cx,
        &Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
            hop_limit: crate::inet6::ip6::DEFAULT_HLIM,
            flags: wire::NdiscRouterFlags::from_bits_truncate(0),
            router_lifetime: lifetime,
            reachable_time: 0,
            retrans_time: 0,
            options: &opts,
        }),
        Ip6Out {
            src,
            dst: ALL_NODES,
            proto: IpProtocol::Icmpv6,
            hlim: ND_HLIM,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
}

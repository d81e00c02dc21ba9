//! Router discovery and stateless autoconfiguration on a host (RFC 4861 §6.3, RFC
//! 4862 §5.5), and redirects (RFC 4861 §8.3): router advertisements read into the
//! default routers, on-link prefixes and autoconfigured addresses of [`NdState`],
//! each kept for its lifetime and pruned when it ends; router solicitations sent at
//! start-up; redirects kept for ten minutes.
//!
//! What it may call: the interface's addresses, the published configuration
//! (`ctl6`), the parent's ND senders.

use super::*;

/// An autoconfigured address is deprecated from the end of its preferred lifetime
/// until an advertisement extends it (RFC 4862 §5.5.4; a tentative or duplicated
/// one keeps its state).
fn slaac_state(a: &In6Ifaddr, now: Instant) {
    let deprecated = a.preferred_until().is_some_and(|t| t <= now);
    match (a.state(), deprecated) {
        (AddrState::Preferred, true) => a.set_state(AddrState::Deprecated),
        (AddrState::Deprecated, false) => a.set_state(AddrState::Preferred),
        _ => {}
    }
}

/// The lifetimes of the interface's autoconfigured addresses (RFC 4862 §5.5.4): one
/// whose preferred lifetime ended is deprecated, one whose valid lifetime ended is
/// removed with its network's connected route (`nd6.autoconfexpired`), as FreeBSD's
/// `nd6_timer` does with `ia6_lifetime`. Returns the next end.
pub(super) fn slaac_timer(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    let now = cx.link.now;
    let mut next: Option<Instant> = None;
    for a in ifp.addrs6.iter().filter(|a| a.is_autoconf()) {
        if a.valid_until().is_some_and(|t| t <= now) {
            // Worker 0 alone runs this, so the address is removed once; this
            // batch's snapshot still lists it.
            cx.v6.ctl6.delete_address6(ifp.index, a.addr.addr);
            cx.link.stats.nd6.autoconfexpired += 1;
            continue;
        }
        slaac_state(a, now);
        let ends = [a.preferred_until().filter(|&t| t > now), a.valid_until()];
        for t in ends.into_iter().flatten() {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
    }
    next
}

/// Routers, prefixes and redirects learnt on the interface whose lifetimes ended
/// leave the published lists (RFC 4861 §6.3.4, §6.3.5: "timed out"); lookups
/// already ignored them. Returns the next end.
pub(super) fn nd6_prune(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    let (now, idx) = (cx.link.now, ifp.index);
    let nd = &cx.v6.inet6.nd6;
    let ends = nd
        .routers
        .iter()
        .filter(|r| r.ifindex == idx)
        .map(|r| r.expires)
        .chain(
            nd.prefixes
                .iter()
                .filter(|p| p.ifindex == idx)
                .map(|p| p.expires),
        )
        .chain(
            nd.redirects
                .iter()
                .filter(|r| r.ifindex == idx)
                .map(|r| r.expires),
        );
    let (mut due, mut next) = (false, None::<Instant>);
    for t in ends {
        if t <= now {
            due = true;
        } else {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
    }
    if due {
        let live = |i: IfIndex, t: Instant| i != idx || t > now;
        cx.v6.ctl6.update_nd6(&mut |c| {
            c.routers.retain(|r| live(r.ifindex, r.expires));
            c.prefixes.retain(|p| live(p.ifindex, p.expires));
            c.redirects.retain(|r| live(r.ifindex, r.expires));
        });
    }
    next
}

/// Bounds of the lists in [`NdState`].
pub const MAX_ROUTERS: usize = 8;
pub const MAX_PREFIXES: usize = 16;
pub const MAX_REDIRECTS: usize = 64;
/// RFC 4861 §10: MAX_RTR_SOLICITATIONS and RTR_SOLICITATION_INTERVAL.
const MAX_RTR_SOLICITATIONS: u8 = 3;
const RTR_SOLICITATION_INTERVAL: Duration = Duration::from_secs(4);
/// How long a redirect is kept (FreeBSD expires redirect routes after 10 minutes).
const REDIRECT_LIFETIME: Duration = Duration::from_secs(600);

/// Inserts or refreshes `v` (matched by `same`), replacing an expired entry, else the
/// one expiring first, when the list is at its bound.
fn upsert<T: Copy>(
    list: &mut Vec<T>,
    v: T,
    same: impl Fn(&T) -> bool,
    expires: impl Fn(&T) -> Instant,
    max: usize,
) {
    if let Some(e) = list.iter_mut().find(|e| same(e)) {
        *e = v;
    } else if list.len() < max {
        list.push(v);
    } else if let Some(e) = list.iter_mut().min_by_key(|e| expires(e)) {
        *e = v;
    }
}

impl NdState {
    /// The next hop towards `dst`, from a redirect, an advertised on-link prefix or a
    /// learnt default router, at `now`.
    pub fn next_hop(
        &self,
        dst: Ipv6Addr,
        now: Instant,
        onlink_only: bool,
    ) -> Option<(Ipv6Addr, IfIndex)> {
        if let Some(r) = self
            .redirects
            .iter()
            .find(|r| r.dst == dst && r.expires > now)
        {
            return Some((r.target, r.ifindex));
        }
        if let Some(p) = self
            .prefixes
            .iter()
            .find(|p| p.expires > now && p.prefix.contains(dst))
        {
            return Some((dst, p.ifindex));
        }
        if onlink_only {
            return None;
        }
        self.routers
            .iter()
            .find(|r| r.expires > now)
            .map(|r| (r.addr, r.ifindex))
    }
}

/// The SLAAC address of `prefix` on an interface with `mac` (RFC 4862 §5.5.3, the
/// modified EUI-64 interface identifier of RFC 4291 appendix A).
fn slaac_addr(prefix: Ipv6Addr, mac: EthernetAddress) -> Ipv6Addr {
    let ll = crate::link::iface::Inet6Addr::link_local(mac).addr.octets();
    let mut o = prefix.octets();
    o[8..].copy_from_slice(&ll[8..]);
    Ipv6Addr::from(o)
}

/// `nd6_ra_input`: RFC 4861 §6.1.2 validity checks (hop limit 255 and code 0 were
/// checked by the caller), §6.3.4 processing.
pub(crate) fn nd6_ra_input(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    router_lifetime: u16,
    options: &[u8],
) {
    // "IP Source Address is a link-local address."
    if !crate::link::iface::is_link_local(info.src) {
        return DropReason::Icmp6BadRa.count(cx.link.stats);
    }
    let mut lladdr = None;
    let mut prefixes = Vec::new();
    for o in wire::NdiscOptionsIter::new(options) {
        match o {
            Ok(wire::NdiscOptionRepr::SourceLinkLayerAddr(m)) => lladdr = Some(m),
            Ok(wire::NdiscOptionRepr::PrefixInformation(p)) => prefixes.push(p),
            Ok(_) => {}
            // "All included options have a length that is greater than zero."
            Err(_) => return DropReason::Icmp6BadRa.count(cx.link.stats),
        }
    }
    if let Some(mac) = lladdr {
        let mut out = Vec::new();
        ifp.nd6
            .nd_learn(cx.link.now, info.src, mac, cx.link.stats, &mut out);
        nd6_flush(cx, ifp, &mut out);
    }
    if !cx.v6.accept_rtadv {
        return;
    }
    let slaac_on = cx.v6.slaac;
    let now = cx.link.now;
    let mut slaac = Vec::new();
    cx.v6.ctl6.update_nd6(&mut |c| {
        let st = &mut *c;
        st.rtsol.retain(|r| r.0 != ifp.index);
        let r = Router6 {
            addr: info.src,
            ifindex: ifp.index,
            expires: now + Duration::from_secs(u64::from(router_lifetime)),
        };
        if router_lifetime == 0 {
            // "If the address is already present in the host's Default Router List
            // and the received Router Lifetime value is zero, immediately time-out
            // the entry."
            st.routers
                .retain(|x| !(x.addr == r.addr && x.ifindex == r.ifindex));
        } else {
            upsert(
                &mut st.routers,
                r,
                |x| x.addr == r.addr && x.ifindex == r.ifindex,
                |x| x.expires,
                MAX_ROUTERS,
            );
        }
        for p in &prefixes {
            // §6.3.4: the link-local prefix is ignored.
            if crate::link::iface::is_link_local(p.prefix) || p.prefix_len > 128 {
                continue;
            }
            let prefix = crate::link::iface::Inet6Addr::new(p.prefix, p.prefix_len);
            if p.flags.contains(wire::NdiscPrefixFlags::ON_LINK) {
                let e = Prefix6 {
                    prefix,
                    ifindex: ifp.index,
                    expires: now + Duration::from_secs(u64::from(p.valid_lifetime)),
                };
                if p.valid_lifetime == 0 {
                    st.prefixes.retain(|x| x.prefix != prefix);
                } else {
                    upsert(
                        &mut st.prefixes,
                        e,
                        |x| x.prefix == prefix,
                        |x| x.expires,
                        MAX_PREFIXES,
                    );
                }
            }
            // RFC 4862 §5.5.3 (a)-(c): autonomous flag, preferred <= valid ("If
            // the preferred lifetime is greater than the valid lifetime, silently
            // ignore the Prefix Information option"), a /64 for an Ethernet
            // interface identifier.
            if slaac_on
                && p.flags.contains(wire::NdiscPrefixFlags::ADDRCONF)
                && p.preferred_lifetime <= p.valid_lifetime
                && p.prefix_len == 64
            {
                let a = crate::link::iface::Inet6Addr::new(slaac_addr(p.prefix, ifp.mac), 64);
                slaac.push((a, p.preferred_lifetime, p.valid_lifetime));
            }
        }
    });
    for (a, preferred, valid) in slaac {
        slaac_prefix_input(cx, ifp, a, preferred, valid);
    }
}

/// RFC 4862 §5.5.3 (e): "2 hours".
const TWO_HOURS: Duration = Duration::from_secs(7200);

/// The end of a lifetime of `secs` seconds from `now`; `None` for infinity (all
/// one bits, RFC 4861 §4.6.2).
fn lifetime_end(now: Instant, secs: u32) -> Option<Instant> {
    (secs != u32::MAX).then(|| now + Duration::from_secs(u64::from(secs)))
}

/// An autonomous prefix advertised on `ifp` (RFC 4862 §5.5.3 (d), (e)): its address
/// `a` formed, or, if it was formed before, its lifetimes updated by the two-hour
/// rule. Lifetimes in seconds, as advertised.
fn slaac_prefix_input(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    a: crate::link::iface::Inet6Addr,
    preferred: u32,
    valid: u32,
) {
    let now = cx.link.now;
    let pref_end = lifetime_end(now, preferred);
    if let Some(have) = ifp.addr6(a.addr) {
        // An operator's own address keeps the lifetimes the operator gave it.
        if !have.is_autoconf() {
            return;
        }
        // (e): "1. If the received Valid Lifetime is greater than 2 hours or
        // greater than RemainingLifetime, set the valid lifetime of the
        // corresponding address to the advertised Valid Lifetime. 2. If
        // RemainingLifetime is less than or equal to 2 hours, ignore the Prefix
        // Information option with regards to the valid lifetime, unless the Router
        // Advertisement from which this option was obtained has been
        // authenticated ... 3. Otherwise, reset the valid lifetime of the
        // corresponding address to 2 hours." We authenticate none (no SEND), so a
        // forged advertisement can shorten an address's life to two hours at the
        // least; a valid lifetime of 0 is obeyed within that rule.
        let remaining = have.valid_until().map(|t| t.saturating_duration_since(now));
        let received = Duration::from_secs(u64::from(valid));
        let valid_end =
            if valid == u32::MAX || received > TWO_HOURS || remaining.is_some_and(|r| received > r)
            {
                lifetime_end(now, valid)
            } else if remaining.is_some_and(|r| r <= TWO_HOURS) {
                have.valid_until()
            } else {
                Some(now + TWO_HOURS)
            };
        // "The preferred lifetime of the address [is reset] to the Preferred
        // Lifetime in the received advertisement", within the valid one.
        let pref_end = match (pref_end, valid_end) {
            (Some(p), Some(v)) => Some(p.min(v)),
            (None, v) => v,
            (p, None) => p,
        };
        have.set_lifetimes(pref_end, valid_end);
        slaac_state(have, now);
        // Worker 0's timers end lifetimes: it learns the new ends.
        cx.v6.ctl6.notify_worker(0);
        return;
    }
    // (d): "If the prefix advertised is not equal to the prefix of an address
    // configured by stateless autoconfiguration already in the list of addresses
    // associated with the interface (where "equal" means the two prefix lengths
    // are the same and the first prefix-length bits of the prefixes are
    // identical), and if the Valid Lifetime is not 0, form an address".
    if valid == 0 || cx.link.ifaces.iter().any(|i| i.addr6(a.addr).is_some()) {
        return;
    }
    let valid_end = lifetime_end(now, valid);
    if cx
        .v6
        .ctl6
        .add_autoconf6(ifp.index, a, pref_end, valid_end)
        .is_ok()
    {
        cx.link.stats.nd6.autoconf += 1;
        return;
    }
    // The interface holds all it may: the address deprecated longest ago gives way
    // (it serves old connections only), else the new prefix is refused, so a
    // flood of advertised prefixes cannot take a renumbered network's address.
    let oldest = ifp
        .addrs6
        .iter()
        .filter(|x| x.is_autoconf() && x.preferred_until().is_some_and(|t| t <= now))
        .filter(|x| x.state() != AddrState::Tentative)
        .min_by_key(|x| x.preferred_until());
    if let Some(old) = oldest {
        cx.v6.ctl6.delete_address6(ifp.index, old.addr.addr);
        cx.link.stats.nd6.autoconfreclaimed += 1;
        if cx
            .v6
            .ctl6
            .add_autoconf6(ifp.index, a, pref_end, valid_end)
            .is_ok()
        {
            cx.link.stats.nd6.autoconf += 1;
            return;
        }
    }
    DropReason::Nd6AutoconfFull.count(cx.link.stats);
}

/// `icmp6_redirect_input`: RFC 4861 §8.1 validity checks, §8.3 processing.
pub(crate) fn nd6_redirect_input(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    target: Ipv6Addr,
    dst: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
) {
    // "IP Source Address is a link-local address"; "the Destination Address field
    // ... is not a multicast address"; "the Target Address is either a link-local
    // address (when redirected to a router) or the same as the ICMP Destination
    // Address (when redirected to the on-link destination)"; "the IP source address
    // of the Redirect is the same as the current first-hop router for the specified
    // ICMP Destination Address."
    let current = crate::inet6::ip6::ip6_route(cx, dst, None).map(|(_, nh)| nh);
    if !crate::link::iface::is_link_local(info.src)
        || dst.is_multicast()
        || !(crate::link::iface::is_link_local(target) || target == dst)
        || current != Some(info.src)
    {
        return DropReason::Icmp6BadRedirect.count(cx.link.stats);
    }
    if let Some(mac) = lladdr {
        let mut out = Vec::new();
        ifp.nd6
            .nd_learn(cx.link.now, target, mac, cx.link.stats, &mut out);
        nd6_flush(cx, ifp, &mut out);
    }
    let e = Redirect6 {
        dst,
        target,
        ifindex: ifp.index,
        expires: cx.link.now + REDIRECT_LIFETIME,
    };
    cx.v6.ctl6.update_nd6(&mut |c| {
        upsert(
            &mut c.redirects,
            e,
            |x| x.dst == dst,
            |x| x.expires,
            MAX_REDIRECTS,
        )
    });
}

/// Router solicitation (RFC 4861 §6.3.7), with SLAAC on: up to three, four seconds
/// apart, from the link-local address once it is usable, until an advertisement
/// comes. Worker 0's timers; returns the next deadline.
pub(crate) fn nd6_rtsol_timer(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !cx.v6.slaac {
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
    let st = cx
        .v6
        .inet6
        .nd6
        .rtsol
        .iter()
        .find(|r| r.0 == ifp.index)
        .copied();
    let (sent, due) = match st {
        // Not yet started: a delay in [0, 1 s) from the MAC, so that hosts brought up
        // together do not all ask at once (§6.3.7's random delay, reproducible).
        None if !cx
            .v6
            .inet6
            .nd6
            .routers
            .iter()
            .any(|r| r.ifindex == ifp.index) =>
        {
            let delay = u64::from(ifp.mac.0[5]) * 1_000_000_000 / 256;
            let at = now + delay;
            cx.v6
                .ctl6
                .update_nd6(&mut |c| c.rtsol.push((ifp.index, 0, at)));
            return Some(Instant::from_nanos(at));
        }
        None => return None,
        Some(r) => (r.1, r.2),
    };
    if sent >= MAX_RTR_SOLICITATIONS {
        return None;
    }
    if due > now {
        return Some(Instant::from_nanos(due));
    }
    let next = now + RTR_SOLICITATION_INTERVAL.as_nanos() as u64;
    cx.v6.ctl6.update_nd6(&mut |c| {
        if let Some(r) = c.rtsol.iter_mut().find(|r| r.0 == ifp.index) {
            r.1 += 1;
            r.2 = next;
        }
    });
    cx.link.stats.icmp6.outroutersolicit += 1;
    icmp6_send(
        cx,
        &Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit {
            lladdr: Some(ifp.mac),
        }),
        Ip6Out {
            src: ll.addr.addr,
            dst: crate::link::iface::ALL_ROUTERS,
            proto: IpProtocol::Icmpv6,
            hlim: ND_HLIM,
            keep_unspec: false,
            ifindex: Some(ifp.index),
        },
    );
    (sent + 1 < MAX_RTR_SOLICITATIONS).then_some(Instant::from_nanos(next))
}

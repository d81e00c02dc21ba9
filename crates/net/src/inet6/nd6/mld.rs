//! MLDv2 on a host (RFC 3810): reports of the solicited-node groups an interface
//! listens to, sent `MLD_ROBUSTNESS` times when they change, and the answers to a
//! router's queries.
//!
//! What it may call: the interface's addresses, the published configuration
//! (`ctl6`), `ip6_send`.

use super::*;

/// RFC 3810 §9.1 Robustness Variable: each state change is reported this often.
const MLD_ROBUSTNESS: u8 = 2;
/// RFC 3810 §9.11 Unsolicited Report Interval: 1 s.
const MLD_UNSOLICITED_INTERVAL: Duration = Duration::from_secs(1);
/// All MLDv2-capable routers (RFC 3810 §5.2.14).
const ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);

/// The groups an interface listens to and reports: the solicited-node group of each
/// of its addresses (RFC 4861 §7.2.1). All-nodes is never reported (RFC 3810 §6).
fn mld_groups(ifp: &Ifnet) -> Vec<Ipv6Addr> {
    let mut g: Vec<Ipv6Addr> = ifp
        .addrs6
        .iter()
        .filter(|a| a.state() != AddrState::Duplicated)
        .map(|a| solicited_node(a.addr.addr))
        .collect();
    // A router is in all-routers too (all-nodes is never reported, RFC 3810 §6).
    if ifp.forwarding.inet6() {
        g.push(crate::link::iface::ALL_ROUTERS);
    }
    g.sort_unstable();
    g.dedup();
    g
}

/// Sends an MLDv2 report of `groups` with record type `ty` (RFC 3810 §5.2): to
/// all-MLDv2-routers, hop limit 1, with a router alert in a hop-by-hop header; from
/// the link-local address, or the unspecified one while it is tentative (RFC 3590 §4).
pub(crate) fn mld_report(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    groups: &[Ipv6Addr],
    ty: wire::MldRecordType,
) {
    if groups.is_empty() {
        return;
    }
    let src = ifp
        .addrs6
        .iter()
        .find(|a| crate::link::iface::is_link_local(a.addr.addr) && a.usable())
        .map_or(Ipv6Addr::UNSPECIFIED, |a| a.addr.addr);
    let mut records = vec![0u8; 20 * groups.len()];
    let mut rest = &mut records[..];
    for g in groups {
        rest = wire::MldAddressRecordRepr {
            record_type: ty,
            mcast_addr: *g,
            sources: &[],
            aux_data: &[],
        }
        .emit(rest);
    }
    let repr = Icmpv6Repr::Mld(wire::MldRepr::Report {
        nr_mcast_addr_rcrds: groups.len() as u16,
        data: &records,
    });
    let mut msg = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv6Packet::new_unchecked(&mut msg[..]),
        &src,
        &ALL_MLDV2_ROUTERS,
    );
    // Hop-by-hop: next header ICMPv6, router alert (RFC 2711, value 0: MLD), PadN.
    let mut pkt = vec![u8::from(IpProtocol::Icmpv6), 0, 5, 2, 0, 0, 1, 0];
    pkt.extend_from_slice(&msg);
    let Ok(m) = Mbuf::from_slice(&pkt) else {
        return DropReason::Ip6OutDropped.count(cx.link.stats);
    };
    cx.link.stats.icmp6.outmldreport += 1;
    crate::inet6::ip6::ip6_output(
        cx,
        m,
        Ip6Out {
            src,
            dst: ALL_MLDV2_ROUTERS,
            proto: IpProtocol::HopByHop,
            hlim: 1,
            keep_unspec: true,
            ifindex: Some(ifp.index),
        },
    );
}

/// Worker 0's MLD timer for one interface: a newly joined group is reported
/// `MLD_ROBUSTNESS` times, a second apart (RFC 3810 §6.1). Returns the next deadline.
pub(crate) fn mld_timer(cx: &mut Inet6Cx<'_, '_>, ifp: &Arc<Ifnet>) -> Option<Instant> {
    if !ifp.inet6() {
        return None;
    }
    let now = cx.link.now.as_nanos();
    // Worker 0 runs this every poll: the common case (every group reported
    // `MLD_ROBUSTNESS` times) is answered without building a list.
    let settled = ifp
        .addrs6
        .iter()
        .filter(|a| a.state() != AddrState::Duplicated)
        .all(|a| {
            let g = solicited_node(a.addr.addr);
            cx.v6
                .inet6
                .nd6
                .mld
                .iter()
                .any(|m| m.0 == ifp.index && m.1 == g && m.2 >= MLD_ROBUSTNESS)
        });
    if settled {
        return None;
    }
    let groups = mld_groups(ifp);
    let known: Vec<(Ipv6Addr, u8, u64)> = cx
        .v6
        .inet6
        .nd6
        .mld
        .iter()
        .filter(|m| m.0 == ifp.index)
        .map(|m| (m.1, m.2, m.3))
        .collect();
    let due: Vec<Ipv6Addr> = groups
        .iter()
        .copied()
        .filter(|g| match known.iter().find(|k| k.0 == *g) {
            None => true,
            Some(k) => k.1 < MLD_ROBUSTNESS && k.2 <= now,
        })
        .collect();
    let next_at = now + MLD_UNSOLICITED_INTERVAL.as_nanos() as u64;
    if !due.is_empty() {
        mld_report(cx, ifp, &due, wire::MldRecordType::ChangeToExclude);
        let idx = ifp.index;
        cx.v6.ctl6.update_nd6(&mut |c| {
            let mld = &mut c.mld;
            // Groups the interface left are forgotten (their addresses went).
            mld.retain(|m| m.0 != idx || groups.contains(&m.1));
            for g in &due {
                match mld.iter_mut().find(|m| m.0 == idx && m.1 == *g) {
                    Some(m) => {
                        m.2 += 1;
                        m.3 = next_at;
                    }
                    None => mld.push((idx, *g, 1, next_at)),
                }
            }
        });
    }
    let pending = groups.iter().any(|g| {
        let sent = due.contains(g) as u8 + known.iter().find(|k| k.0 == *g).map_or(0, |k| k.1);
        sent < MLD_ROBUSTNESS
    });
    pending.then_some(Instant::from_nanos(if due.is_empty() {
        known
            .iter()
            .filter(|k| k.1 < MLD_ROBUSTNESS)
            .map(|k| k.2)
            .min()
            .unwrap_or(next_at)
    } else {
        next_at
    }))
}

/// A multicast listener query (RFC 3810 §6.2): answered with the current state of
/// every group queried (all of ours for a general query). The answer goes at once,
/// the low end of the random delay the RFC allows.
pub(crate) fn mld_query_input(
    cx: &mut Inet6Cx<'_, '_>,
    ifp: &Arc<Ifnet>,
    info: Ip6Info,
    group: Ipv6Addr,
) {
    // §5.1.14: a query from a non-link-local source, or with a hop limit other than
    // 1, is ignored.
    if !crate::link::iface::is_link_local(info.src) || info.hlim != 1 {
        return DropReason::Icmp6Other.count(cx.link.stats);
    }
    let mut groups = mld_groups(ifp);
    if !group.is_unspecified() {
        groups.retain(|g| *g == group);
    }
    mld_report(cx, ifp, &groups, wire::MldRecordType::ModeIsExclude);
}

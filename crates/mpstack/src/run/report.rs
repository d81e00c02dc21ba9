//! What `mpstack run` prints of its node: the interfaces when it is up, and its
//! counters, routes, bridges, firewall and neighbours when it stops.

use net::Stack;
use std::sync::atomic::Ordering;

/// Each interface as the line saying the node is up shows it: its name, its role
/// (bridge, member, VLAN, tunnel), MAC and addresses.
pub(super) fn interfaces(stack: &Stack, names: &[String]) -> Vec<String> {
    stack
        .interfaces()
        .iter()
        .map(|i| {
            let v4: Vec<String> = i.addrs.iter().map(|x| x.to_string()).collect();
            let v6: Vec<String> = i.addrs6.iter().map(|x| x.addr.to_string()).collect();
            let role = match stack.config().bridges.role(i.index) {
                net::link::bridge::L2Role::Bridge(_) => {
                    let bc = stack.bridge(i.index).expect("a bridge");
                    let m: Vec<&str> = bc
                        .members
                        .iter()
                        .map(|m| names[m.ifindex.get()].as_str())
                        .collect();
                    let stp = if bc.br.stp_enabled() { ", stp" } else { "" };
                    format!("bridge of {}{stp}, ", m.join(" "))
                }
                net::link::bridge::L2Role::Member { .. } => "member, ".to_string(),
                net::link::bridge::L2Role::None => match stack.config().bridges.vlan(i.index) {
                    Some(v) => format!("vlan {} on {}, ", v.vid, names[v.parent.get()]),
                    None => match stack.config().tunnels.iter().find(|t| t.ifindex == i.index) {
                        Some(t) => {
                            format!("{} tunnel {} -> {}, mtu {}, ", t.kind, t.src, t.dst, i.mtu)
                        }
                        None => String::new(),
                    },
                },
            };
            format!(
                "{} ({role}{}{}{})",
                i.name,
                i.mac,
                if v4.is_empty() && v6.is_empty() {
                    ""
                } else {
                    ", "
                },
                [v4, v6].concat().join(", ")
            )
        })
        .collect()
}

/// The services' counters, when they have stopped.
pub(super) fn services(
    a: &crate::RunArgs,
    tcp_counters: &crate::services::Counters,
    limits: &crate::services::Limits,
    udp_counters: &crate::services::UdpCounters,
    udp_limits: &crate::services::UdpLimits,
    started: std::time::Instant,
) {
    println!(
        "mpstack: TCP services: {} connection(s), {} refused (over {}), {} idle timeout(s) ({}s), {} header timeout(s) ({}s), {} byte(s) in, {} out, {} refused for their source (over {} from one)",
        tcp_counters.connections.load(Ordering::Relaxed),
        tcp_counters.refused.load(Ordering::Relaxed),
        limits.max_conns,
        tcp_counters.idle_timeouts.load(Ordering::Relaxed),
        a.serve_idle_timeout,
        tcp_counters.header_timeouts.load(Ordering::Relaxed),
        a.serve_header_timeout,
        tcp_counters.bytes_in.load(Ordering::Relaxed),
        tcp_counters.bytes_out.load(Ordering::Relaxed),
        tcp_counters.refused_source.load(Ordering::Relaxed),
        limits.max_conns_per_source,
    );

    println!(
        "mpstack: stopping after {:.1}s; UDP services answered {} datagram(s) (echo {}), discarded {}, refused {} from a port below 1024 or no unicast source, {} over the rate ({}/s from one source)",
        started.elapsed().as_secs_f64(),
        udp_counters.answered.load(Ordering::Relaxed),
        udp_counters.echoed.load(Ordering::Relaxed),
        udp_counters.discarded.load(Ordering::Relaxed),
        udp_counters.loop_refused.load(Ordering::Relaxed),
        udp_counters.rate_limited.load(Ordering::Relaxed),
        udp_limits.per_source_rate,
    );
}

/// The stopped stack's state: queue and protocol counters, the workers' runtime,
/// routes, bridges, the firewall's rules, states and pipes, the ARP cache.
pub(super) fn state(
    stack: &Stack,
    names: &[String],
    clock: &dyn dev::time::Clock,
    firewall: &crate::control::cmds::Firewall,
) {
    for (w, i, q) in stack.queue_stats() {
        println!(
            "queue w{w}/if{}: ipackets {} ibytes {} idrops {} opackets {} obytes {} odrops {}",
            i.0, q.ipackets, q.ibytes, q.idrops, q.opackets, q.obytes, q.odrops
        );
    }
    let mut s = String::new();
    let _ = stack.stats().write_netstat(&mut s, false);
    print!("{s}");
    // VPP's `show runtime`: where the workers' time went, per stage.
    let mut rt = String::new();
    let _ = stack.runtime().write_table(&mut rt);
    for l in rt.lines() {
        println!("runtime: {l}");
    }
    print_routes(stack, names);
    let now = dev::time::Clock::now(clock);
    for b in stack.bridges() {
        print_bridge(stack, b, names, now);
    }
    if let Some(f) = firewall.get() {
        for l in f.show().lines() {
            println!("ipfw: {l}");
        }
        // `ipfw -d list`'s second part: the states that have not expired.
        let now = dev::time::Clock::now(clock);
        f.expire_states(now);
        println!(
            "ipfw: {} dynamic state(s), {} expired",
            f.states(),
            f.expired_states()
        );
        if f.tags_lost() > 0 {
            println!(
                "ipfw: {} packet(s) had more than two tags; the others were lost between passes",
                f.tags_lost()
            );
        }
        for l in f.list_states(now, 1000) {
            println!("ipfw: {l}");
        }
        for (n, cfg, st) in f.pipes() {
            println!(
                "ipfw: pipe {n} {cfg}: in {} pkts {} bytes, out {} pkts {} bytes, dropped {} (loss) {} (queue full)",
                st.in_pkts, st.in_bytes, st.out_pkts, st.out_bytes, st.drop_loss_pkts, st.drop_full_pkts
            );
        }
    }
    for e in stack.interfaces().iter().flat_map(|i| i.arp.entries()) {
        let mac = e
            .mac
            .map(|m| m.to_string())
            .unwrap_or_else(|| "(incomplete)".into());
        println!("arp: {} at {mac} [{}]", e.ip, e.state);
    }
}

/// A bridge as `ifconfig bridge0` and `ifconfig bridge0 addr` show it: members and
/// their states, the spanning tree, the learned addresses.
fn print_bridge(stack: &Stack, b: net::IfIndex, names: &[String], now: dev::Instant) {
    let Ok(bc) = stack.bridge(b) else { return };
    let name = &names[b.get()];
    for m in &bc.members {
        let flags = m.flags.names(bc.br.stp_enabled());
        println!(
            "{name}: member: {} flags=<{}> port {} state {}",
            names[m.ifindex.get()],
            flags.join(","),
            m.slot + 1,
            bc.br.port_state(m.slot as usize)
        );
    }
    if let Some(st) = bc.br.stp_status() {
        let port = st
            .root_port
            .and_then(|p| bc.members.iter().find(|m| usize::from(m.slot) == p))
            .map_or("none".to_string(), |m| names[m.ifindex.get()].clone());
        println!(
            "{name}: stp id {} root {} cost {} root-port {port}{}",
            st.bridge_id,
            st.root,
            st.root_path_cost,
            if st.topology_change {
                " topology-change"
            } else {
                ""
            }
        );
    }
    let secs = (now.as_nanos() / 1_000_000_000) as u32;
    let rs = bc.br.rt.stats();
    println!(
        "{name}: {} address(es) (max {}), learned {}, moved {}, evicted {}, expired {}, refused {}",
        rs.entries,
        bc.br.rt.max(),
        rs.learned,
        rs.moved,
        rs.evicted,
        rs.expired,
        rs.refused
    );
    for (vlan, mac, e, exp) in bc.br.rt.entries(secs).into_iter().take(1000) {
        let on = names.get(usize::from(e.member)).map_or("?", |s| s.as_str());
        let vlan = if vlan == 0 {
            String::new()
        } else {
            format!(" vlan {vlan}")
        };
        if e.flags.is_static {
            println!("{name}: {mac}{vlan} {on} static");
        } else {
            println!(
                "{name}: {mac}{vlan} {on} expires {}s",
                exp.saturating_sub(secs)
            );
        }
    }
}

/// The routing table as `netstat -rn` shows it.
fn print_routes(stack: &Stack, taps: &[String]) {
    for r in stack.routes() {
        for p in &r.paths {
            let gw = match (p.gateway, p.kind) {
                (Some(g), _) => g.to_string(),
                (None, route::NhKind::Forward) => "link".to_string(),
                (None, _) => "-".to_string(),
            };
            let ifname = match p.kind {
                route::NhKind::Forward => taps.get(p.ifindex as usize).map_or("?", |s| s),
                _ => "-",
            };
            println!(
                "route: {:<24} {:<24} {:<6} {ifname}",
                r.dst.to_string(),
                gw,
                r.flags.to_string()
            );
        }
    }
}

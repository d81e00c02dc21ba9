//! `ifconfig`, `arp` and `ndp`: interfaces and the neighbour tables.

use super::*;

pub(super) fn ifconfig(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let ifs = node.stack.interfaces();
    let show: Vec<&Arc<net::link::iface::Ifnet>> = match args {
        [] | ["-a"] | ["-l"] => ifs.iter().collect(),
        [name] => vec![ifs
            .iter()
            .find(|i| i.name == *name)
            .ok_or_else(|| fail(format!("ifconfig: interface {name} does not exist")))?],
        [name, rest @ ..] if bridge::WORDS.contains(&rest[0]) => {
            return bridge::command(node, name, rest, json, conn)
        }
        [name, rest @ ..] => return ifconfig_set(node, name, rest, conn),
    };
    if args == ["-l"] {
        let names: Vec<&str> = show.iter().map(|i| i.name.as_str()).collect();
        return put(conn, &format!("{}\n", names.join(" ")));
    }
    if json {
        let v: Vec<Value> = show
            .iter()
            .map(|i| {
                json!({
                    "name": i.name, "flags": if_flags(i.flags), "mtu": i.mtu,
                    "ether": i.mac.to_string(),
                    "bridge": node.stack.bridge(i.index).ok().map(|bc| bridge::describe_json(node, &bc)),
                    "hooks": node.stack.if_hooks(i.index).into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                    "inet": i.addrs.iter().map(|a| json!({"address": a.addr.to_string(), "prefixlen": a.prefix_len, "broadcast": a.broadcast().map(|b| b.to_string())})).collect::<Vec<_>>(),
                    "inet6": i.addrs6.iter().map(|a| json!({"address": a.addr.addr.to_string(), "prefixlen": a.addr.prefix_len, "state": format!("{:?}", a.state()).to_lowercase()})).collect::<Vec<_>>(),
                })
            })
            .collect();
        return put_json(conn, &json!({ "interfaces": v }));
    }
    let mut s = String::new();
    for i in show {
        s += &format!(
            "{}: flags={:x}<{}> metric 0 mtu {}\n\tether {}\n",
            i.name,
            i.flags,
            if_flags(i.flags).join(","),
            i.mtu,
            i.mac
        );
        for a in &i.addrs {
            s += &format!(
                "\tinet {} netmask 0x{:08x}{}\n",
                a.addr,
                u32::from_be_bytes(
                    mask_of(false, a.prefix_len)
                        .parse::<std::net::Ipv4Addr>()
                        .map_or([0; 4], |m| m.octets())
                ),
                a.broadcast()
                    .map_or(String::new(), |b| format!(" broadcast {b}"))
            );
        }
        for a in &i.addrs6 {
            let ll = net::link::iface::is_link_local(a.addr.addr);
            let state = match a.state() {
                net::AddrState::Tentative => " tentative",
                net::AddrState::Duplicated => " duplicated",
                net::AddrState::Deprecated => " deprecated",
                net::AddrState::Preferred => "",
            };
            s += &format!(
                "\tinet6 {}{} prefixlen {}{state}{}\n",
                a.addr.addr,
                if ll {
                    format!("%{}", i.name)
                } else {
                    String::new()
                },
                a.addr.prefix_len,
                if ll {
                    format!(" scopeid 0x{:x}", i.index.get() + 1)
                } else {
                    String::new()
                }
            );
        }
        s += &hooks_line(node, i.index);
        if let Ok(bc) = node.stack.bridge(i.index) {
            s += &bridge::describe(node, &bc);
        }
    }
    put(conn, &s)
}

pub(super) fn if_flags(f: u32) -> Vec<&'static str> {
    use net::link::iface::flags as F;
    [
        (F::IFF_UP, "UP"),
        (F::IFF_BROADCAST, "BROADCAST"),
        (F::IFF_POINTOPOINT, "POINTOPOINT"),
        (F::IFF_PROMISC, "PROMISC"),
        (F::IFF_MULTICAST, "MULTICAST"),
    ]
    .iter()
    .filter(|(b, _)| f & b != 0)
    .map(|(_, n)| *n)
    .collect()
}

/// `ifconfig IF inet|inet6 ADDR[/LEN] [alias|-alias|delete]`, `ifconfig IF mtu N`,
/// `ifconfig IF up|down`, `ifconfig IF [-]hook NAME [ARC...]`.
pub(super) fn ifconfig_set(node: &Node<'_>, name: &str, args: &[&str], conn: &mut Conn) -> Res {
    let i = iface(node, name).map_err(|e| fail(format!("ifconfig: {}", e.msg)))?;
    let ifx: IfIndex = i.index;
    match args {
        [ud @ ("up" | "down")] => {
            node.stack
                .set_up(ifx, *ud == "up")
                .map_err(|e| fail(format!("ifconfig: {e}")))?;
            put(conn, "")
        }
        ["mtu", n] => {
            let mtu: usize = n
                .parse()
                .map_err(|_| usage(format!("ifconfig: mtu {n}: a number of bytes")))?;
            node.stack
                .set_mtu(ifx, mtu)
                .map_err(|e| fail(format!("ifconfig: {e}")))?;
            put(conn, "")
        }
        [fam @ ("inet" | "inet6"), addr, rest @ ..] => {
            let delete = match rest {
                [] | ["alias"] | ["add"] => false,
                ["-alias"] | ["delete"] | ["remove"] => true,
                _ => {
                    return Err(usage(format!(
                        "ifconfig: {}: expected alias, -alias or delete",
                        rest.join(" ")
                    )))
                }
            };
            let v6 = *fam == "inet6";
            if delete {
                let a = addr.split('/').next().unwrap_or(addr);
                let ip: IpAddr = a
                    .parse()
                    .ok()
                    .filter(|x: &IpAddr| x.is_ipv6() == v6)
                    .ok_or_else(|| usage(format!("ifconfig: {a}: bad {fam} address")))?;
                node.stack
                    .delete_address(ifx, ip)
                    .map_err(|e| fail(format!("ifconfig: {e}")))?;
                return put(conn, "");
            }
            if !addr.contains('/') {
                return Err(usage(format!(
                    "ifconfig: {addr}: give the prefix length ({addr}/24, {addr}/64)"
                )));
            }
            let r = if v6 {
                let a: net::Inet6Addr = addr
                    .parse()
                    .map_err(|e| usage(format!("ifconfig: {addr}: {e}")))?;
                node.stack.add_address6(ifx, a)
            } else {
                let a: net::InetAddr = addr
                    .parse()
                    .map_err(|e| usage(format!("ifconfig: {addr}: {e}")))?;
                node.stack.add_address(ifx, a)
            };
            r.map_err(|e| fail(format!("ifconfig: {e}")))?;
            put(conn, "")
        }
        [w @ ("hook" | "-hook"), hook, arcs @ ..] => if_hook(node, ifx, *w == "hook", hook, arcs, conn),
        _ => Err(usage(format!(
            "ifconfig: {name} {}: expected inet|inet6 ADDR/LEN [alias|-alias|delete], mtu N, up, down or [-]hook NAME [ARC...]",
            args.join(" ")
        ))),
    }
}

/// `ifconfig IF -hook NAME [ARC...]`: the hook `NAME` off interface `IF`'s arcs (all
/// six, or those named: `ether-in` … `inet6-out`): its own hook of that name, or one
/// every interface runs (`ipfw`) for this interface only; `hook` puts the latter
/// back. An error if no named arc had (or, `hook`, had turned off) such a hook.
fn if_hook(
    node: &Node<'_>,
    ifx: IfIndex,
    on: bool,
    hook: &str,
    arcs: &[&str],
    conn: &mut Conn,
) -> Res {
    use net::pfil::arcs::{arc_by_name, arc_name, point_of, ARCS};
    let which: Vec<usize> = if arcs.is_empty() {
        (0..ARCS).collect()
    } else {
        arcs.iter()
            .map(|a| {
                arc_by_name(a).ok_or_else(|| {
                    let all: Vec<&str> = (0..ARCS).map(arc_name).collect();
                    usage(format!("ifconfig: {a}: not an arc ({})", all.join(", ")))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let mut changed = false;
    for a in which {
        let (point, dir) = point_of(a);
        changed |= node
            .stack
            .set_if_hook(ifx, point, dir, hook, on)
            .map_err(|e| fail(format!("ifconfig: {e}")))?;
    }
    if !changed {
        return Err(fail(format!(
            "ifconfig: no hook {hook} {} there",
            if on { "turned off" } else { "runs" }
        )));
    }
    put(conn, "")
}

/// The hooks interface `i` runs, a line for `ifconfig`: `\thooks: inet-in ipfw, …`.
fn hooks_line(node: &Node<'_>, i: IfIndex) -> String {
    let arcs = node.stack.if_hooks(i);
    if arcs.is_empty() {
        return String::new();
    }
    let v: Vec<String> = arcs
        .iter()
        .map(|(a, hooks)| format!("{a} {}", hooks.join(" ")))
        .collect();
    format!("\thooks: {}\n", v.join(", "))
}

// ---------------------------------------------------------------------------
// arp(8), ndp(8)

pub(super) fn neighbours(
    node: &Node<'_>,
    v6: bool,
    args: &[&str],
    json: bool,
    conn: &mut Conn,
) -> Res {
    let cmd = if v6 { "ndp" } else { "arp" };
    let parse_ip = |h: &str| -> Result<IpAddr, Fail> {
        h.parse::<IpAddr>()
            .ok()
            .filter(|a| a.is_ipv6() == v6)
            .ok_or_else(|| {
                usage(format!(
                    "{cmd}: {h}: bad {} address",
                    if v6 { "IPv6" } else { "IPv4" }
                ))
            })
    };
    match args {
        [] | ["-a"] | ["-an"] | ["-n", "-a"] | ["-a", "-n"] => neighbour_list(node, v6, json, conn),
        ["-d", "-a"] | ["-da"] | ["-c"] => {
            let mut n = 0;
            let mut st = net::Stats::default();
            for i in node.stack.interfaces() {
                if v6 {
                    for e in i.nd6.entries() {
                        n += usize::from(i.nd6.remove(e.ip, &mut st));
                    }
                } else {
                    for e in i.arp.entries() {
                        n += usize::from(i.arp.remove(e.ip, &mut st));
                    }
                }
            }
            put(conn, &format!("{n} entries deleted\n"))
        }
        ["-d", h] => {
            let ip = parse_ip(h)?;
            let mut st = net::Stats::default();
            let mut done = false;
            for i in node.stack.interfaces() {
                done |= match ip {
                    IpAddr::V4(a) => i.arp.remove(a, &mut st),
                    IpAddr::V6(a) => i.nd6.remove(a, &mut st),
                };
            }
            if done {
                put(conn, &format!("{h} ({h}) deleted\n"))
            } else {
                Err(fail(format!("{cmd}: cannot locate {h}")))
            }
        }
        ["-s", h, mac, ..] => {
            let ip = parse_ip(h)?;
            let mac: wire::EthernetAddress = mac
                .parse()
                .map_err(|_| usage(format!("{cmd}: {mac}: bad link-layer address")))?;
            let cfg = node.stack.config();
            let Some(i) = cfg.connected(ip) else {
                return Err(fail(format!(
                    "{cmd}: cannot intuit interface index and type for {h} (not on a connected network)"
                )));
            };
            if let IpAddr::V4(a) = ip {
                // Not the subnet's own network or broadcast address (a /31 has
                // neither, RFC 3021).
                if let Some(x) = i.addrs.iter().find(|x| x.is_net_or_bcast(a)) {
                    return Err(fail(format!(
                        "{cmd}: {h} is the network or broadcast address of {}/{}",
                        x.network(),
                        x.prefix_len
                    )));
                }
            }
            match ip {
                IpAddr::V4(a) => i.arp.insert_static(a, mac),
                IpAddr::V6(a) => i.nd6.insert_static(a, mac),
            }
            put(conn, "")
        }
        _ => Err(usage(help(cmd))),
    }
}

pub(super) fn neighbour_list(node: &Node<'_>, v6: bool, json: bool, conn: &mut Conn) -> Res {
    let mut rows = Vec::new();
    for i in node.stack.interfaces() {
        if v6 {
            for e in i.nd6.entries() {
                rows.push((i.name.clone(), IpAddr::V6(e.ip), e.mac, e.state.to_string()));
            }
        } else {
            for e in i.arp.entries() {
                rows.push((i.name.clone(), IpAddr::V4(e.ip), e.mac, e.state.to_string()));
            }
        }
    }
    if json {
        let v: Vec<Value> = rows
            .iter()
            .map(|(ifn, ip, mac, st)| {
                json!({"ip-address": ip.to_string(), "mac-address": mac.map(|m| m.to_string()), "interface": ifn, "state": st})
            })
            .collect();
        let key = if v6 { "ndp" } else { "arp" };
        return put_json(conn, &json!({ key: v }));
    }
    let mut s = String::new();
    if v6 {
        s += &format!(
            "{:<40} {:<18} {:<8} {}\n",
            "Neighbor", "Linklayer Address", "Netif", "State"
        );
    }
    for (ifn, ip, mac, st) in rows {
        let m = mac.map_or("(incomplete)".to_string(), |m| m.to_string());
        if v6 {
            s += &format!("{ip:<40} {m:<18} {ifn:<8} {st}\n");
        } else {
            s += &format!("? ({ip}) at {m} on {ifn} [ethernet] {st}\n");
        }
    }
    put(conn, &s)
}

// ---------------------------------------------------------------------------
// ipfw(8)

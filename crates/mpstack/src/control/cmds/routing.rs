//! `route`: the routing table's commands (add, change, delete, get, flush, monitor).

use super::*;

pub(super) fn route(
    node: &Node<'_>,
    args: &[&str],
    json: bool,
    conn: &mut Conn,
    stop: &AtomicBool,
) -> Res {
    let mut i = 0;
    while i < args.len() && matches!(args[i], "-n" | "-q" | "-v") {
        i += 1;
    }
    let Some(&sub) = args.get(i) else {
        return Err(usage(help("route")));
    };
    let rest = &args[i + 1..];
    match sub {
        "add" | "delete" | "del" | "change" => route_change(node, sub, rest, conn),
        "get" => route_get(node, rest, json, conn),
        "show" if rest.is_empty() => routes(node, None, json, conn),
        "show" => route_get(node, rest, json, conn),
        "flush" => route_flush(node, rest, json, conn),
        "monitor" => route_monitor(node, json, conn, stop),
        s => Err(usage(format!(
            "route: unknown command '{s}' (add, delete, change, get, show, flush, monitor)"
        ))),
    }
}

/// The options and words of `route add|delete|change`.
#[derive(Default)]
struct RouteOpts<'a> {
    v6: bool,
    host: bool,
    net: bool,
    kind: Option<route::NhKind>,
    via_if: Option<&'a str>,
    mask: Option<u8>,
    /// DEST [GATEWAY].
    words: Vec<&'a str>,
}

fn route_opts<'a>(args: &[&'a str]) -> Result<RouteOpts<'a>, Fail> {
    let mut o = RouteOpts::default();
    let mut k = 0;
    while k < args.len() {
        match args[k] {
            "-inet" => o.v6 = false,
            "-inet6" => o.v6 = true,
            "-net" => o.net = true,
            "-host" => o.host = true,
            "-blackhole" => o.kind = Some(route::NhKind::Blackhole),
            "-reject" => o.kind = Some(route::NhKind::Reject),
            "-static" => {}
            "-interface" | "-iface" => {
                k += 1;
                o.via_if = Some(
                    args.get(k)
                        .copied()
                        .ok_or_else(|| usage("route: -interface needs an interface"))?,
                );
            }
            "-netmask" => {
                k += 1;
                let m = args
                    .get(k)
                    .ok_or_else(|| usage("route: -netmask needs a mask"))?;
                o.mask =
                    Some(len_of_mask(m).ok_or_else(|| usage(format!("route: {m}: bad netmask")))?);
            }
            "-prefixlen" => {
                k += 1;
                let m = args
                    .get(k)
                    .ok_or_else(|| usage("route: -prefixlen needs a length"))?;
                o.mask = Some(
                    m.parse()
                        .map_err(|_| usage(format!("route: {m}: bad prefix length")))?,
                );
            }
            w if w.starts_with('-') => {
                return Err(usage(format!("route: unknown option '{w}'")));
            }
            w => o.words.push(w),
        }
        k += 1;
    }
    Ok(o)
}

/// `route add|delete|change`.
pub(super) fn route_change(node: &Node<'_>, sub: &str, args: &[&str], conn: &mut Conn) -> Res {
    let sub = if sub == "del" { "delete" } else { sub };
    let RouteOpts {
        mut v6,
        host,
        net,
        kind,
        via_if,
        mask,
        words,
    } = route_opts(args)?;
    let Some(&d) = words.first() else {
        return Err(usage(format!("route: {sub}: no destination")));
    };
    if words.len() > 2 {
        return Err(usage(format!(
            "route: {sub}: too many arguments ({}); DEST [GATEWAY]",
            words[2..].join(" ")
        )));
    }
    if d.contains(':') {
        v6 = true;
    }
    if host && net {
        return Err(usage("route: -host and -net together"));
    }
    let mut dst = parse_dest(d, v6, host)?;
    if let Some(len) = mask {
        let max = if dst.is_ipv6() { 128 } else { 32 };
        if len > max {
            return Err(usage(format!("route: prefix length {len} over {max}")));
        }
        dst = route::IpPrefix::new(dst.addr(), len);
    }
    let gw: Option<IpAddr> = match words.get(1) {
        Some(g) => Some(
            g.parse()
                .map_err(|_| usage(format!("route: {g}: bad gateway address")))?,
        ),
        None => None,
    };
    if let Some(g) = gw {
        if g.is_ipv6() != dst.is_ipv6() {
            return Err(usage(format!(
                "route: gateway {g} is not of {dst}'s family"
            )));
        }
    }
    let what = if dst.is_host() { "host" } else { "net" };
    let shown = if dst.is_host() {
        dst.addr().to_string()
    } else if dst.len() == 0 {
        "default".to_string()
    } else {
        dst.to_string()
    };
    let said = |how: &str| match gw {
        Some(g) => format!("{sub} {what} {shown}: gateway {g}{how}"),
        None => match via_if {
            Some(i) => format!("{sub} {what} {shown}: interface {i}{how}"),
            None => format!("{sub} {what} {shown}{how}"),
        },
    };
    let res = match sub {
        "delete" => node.stack.delete_route(dst, gw),
        _ => {
            let spec = match (kind, via_if, gw) {
                (Some(kd), _, _) => route::RouteSpec::discard(dst, kd),
                (None, Some(i), None) => {
                    let ifx = iface(node, i)?;
                    let mut s = route::RouteSpec::connected(dst, u32::from(ifx.index.0));
                    s.flags = route::RtFlags::STATIC;
                    s
                }
                (None, Some(_), Some(_)) => {
                    return Err(usage("route: a gateway or -interface, not both"))
                }
                (None, None, Some(g)) => {
                    let ifi = match node.stack.config().connected(g) {
                        Some(i) => u32::from(i.index.0),
                        None => {
                            return Err(fail(format!(
                                "route: {}: Network is unreachable",
                                said(" fib 0")
                            )))
                        }
                    };
                    route::RouteSpec::via(dst, g, ifi)
                }
                (None, None, None) => {
                    return Err(usage(format!(
                        "route: {sub} {shown}: no gateway (give one, -interface IF, -blackhole or -reject)"
                    )))
                }
            };
            if sub == "add" {
                node.stack.add_route(spec)
            } else {
                node.stack.change_route(spec)
            }
        }
    };
    match res {
        Ok(()) => put(conn, &format!("{}\n", said(""))),
        Err(e) => {
            let why = match &e {
                net::StackError::Route(route::RtError::Exists(_)) => {
                    "route already in table".to_string()
                }
                net::StackError::Route(route::RtError::NotFound(_)) => "not in table".to_string(),
                net::StackError::Route(route::RtError::Full) => {
                    "No buffer space available (the table is full)".to_string()
                }
                e => e.to_string(),
            };
            Err(fail(format!("route: {}: {why}", said(" fib 0"))))
        }
    }
}

pub(super) fn route_json(node: &Node<'_>, r: &route::RouteInfo) -> Value {
    json!({
        "destination": r.dst.to_string(),
        "flags": r.flags.to_string(),
        "flags_names": flag_names(r.flags),
        "paths": r.paths.iter().map(|p| json!({
            "gateway": p.gateway.map(|g| g.to_string()),
            "interface": ifname(node, p.ifindex),
            "kind": format!("{:?}", p.kind).to_lowercase(),
            "mtu": p.mtu,
        })).collect::<Vec<_>>(),
    })
}

/// `route get DEST`.
pub(super) fn route_get(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let words: Vec<&str> = args
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "-inet" | "-inet6" | "-host" | "-net"))
        .collect();
    let [d] = words[..] else {
        return Err(usage("route: get: one destination"));
    };
    let v6 = args.contains(&"-inet6") || d.contains(':');
    let dst = parse_dest(d, v6, true)?;
    let Some(r) = node.stack.route_get(dst.addr()) else {
        return Err(fail("route: route has not been found"));
    };
    if json {
        let mut v = route_json(node, &r);
        v["route_to"] = json!(dst.addr().to_string());
        return put_json(conn, &v);
    }
    let mut s = String::new();
    s += &format!("   route to: {}\n", dst.addr());
    s += &format!("destination: {}\n", r.dst.addr());
    s += &format!("       mask: {}\n", mask_of(r.dst.is_ipv6(), r.dst.len()));
    for p in &r.paths {
        if let Some(g) = p.gateway {
            s += &format!("    gateway: {g}\n");
        }
    }
    s += "        fib: 0\n";
    if let Some(p) = r.paths.first() {
        if p.kind == route::NhKind::Forward {
            s += &format!("  interface: {}\n", ifname(node, p.ifindex));
        }
    }
    s += &format!("      flags: {}\n", flag_names(r.flags));
    if let Some(p) = r.paths.first().filter(|p| p.mtu > 0) {
        s += &format!("        mtu: {}\n", p.mtu);
    }
    put(conn, &s)
}

/// `route flush`: every static and gateway route (not the interfaces' own), but
/// not the routing daemon's (flag 2): FPM has no way to tell zebra a route went.
/// dplane_fpm_nl reads only `RTM_NEWROUTE` from the data plane, as a notice of
/// whether a route it sent is offloaded (`DPLANE_OP_ROUTE_NOTIFY`), and zebra sends
/// a route again only when it changes; a flushed route of zebra's would be gone
/// from the FIB while zebra believed it installed, until the next change or
/// reconnection. They are kept and counted in the answer; zebra withdraws them
/// (`clear ip bgp`, `no network`), or `route delete` removes one knowingly.
pub(super) fn route_flush(node: &Node<'_>, args: &[&str], json: bool, conn: &mut Conn) -> Res {
    let fam = match args {
        [] => None,
        ["-inet"] => Some(false),
        ["-inet6"] => Some(true),
        _ => return Err(usage("route: flush [-inet|-inet6]")),
    };
    let (gone, kept): (Vec<route::RouteInfo>, usize) = node.stack.route_batch(|rib| {
        let (daemon, doomed): (Vec<route::RouteInfo>, Vec<route::RouteInfo>) = rib
            .routes()
            .into_iter()
            .filter(|r| {
                fam.is_none_or(|v6| r.dst.is_ipv6() == v6)
                    && !r.flags.contains(route::RtFlags::CONNECTED)
                    && (r.flags.contains(route::RtFlags::STATIC)
                        || r.flags.contains(route::RtFlags::GATEWAY))
            })
            .partition(|r| r.flags.contains(route::RtFlags::PROTO2));
        for r in &doomed {
            let _ = rib.delete(r.dst, None);
        }
        (doomed, daemon.len())
    });
    if json {
        return put_json(
            conn,
            &json!({
                "flushed": gone.iter().map(|r| route_json(node, r)).collect::<Vec<_>>(),
                "kept_daemon": kept,
            }),
        );
    }
    let mut s = String::new();
    for r in &gone {
        let gw = r
            .paths
            .first()
            .and_then(|p| p.gateway)
            .map_or("-".to_string(), |g| g.to_string());
        s += &format!("{:<20} {:<20} done\n", r.dst.to_string(), gw);
    }
    if kept > 0 {
        s += &format!(
            "route: {kept} route(s) of the routing daemon (flag 2) kept: FPM cannot tell zebra of a removal; withdraw them in zebra, or route delete one\n"
        );
    }
    put(conn, &s)
}

/// route(8)'s names of the message types.
pub(super) fn rtm_desc(k: route::RtmType) -> &'static str {
    match k {
        route::RtmType::Add => "Add Route",
        route::RtmType::Delete => "Delete Route",
        route::RtmType::Change => "Change Metrics or flags",
        route::RtmType::Get => "Report Metrics",
        route::RtmType::Miss => "Lookup failed on this address",
        route::RtmType::NewAddr => "address being added to iface",
        route::RtmType::DelAddr => "address being removed from iface",
        route::RtmType::Redirect => "Told to use different route",
        route::RtmType::IfInfo => "iface status change",
    }
}

/// `route monitor`: every routing message from now on, until the client goes.
pub(super) fn route_monitor(
    node: &Node<'_>,
    json: bool,
    conn: &mut Conn,
    stop: &AtomicBool,
) -> Res {
    conn.streaming();
    let sub = node.stack.subscribe_routes(4096);
    let mut idle = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let mut s = String::new();
        while let Some(m) = sub.try_recv() {
            if m.kind == route::RtmType::IfInfo {
                // An interface's status, as route(8) prints RTM_IFINFO.
                let link = if m.flags.contains(route::RtFlags::UP) {
                    "up"
                } else {
                    "down"
                };
                let flags = node
                    .stack
                    .interfaces()
                    .into_iter()
                    .find(|i| u32::from(i.index.0) == m.ifindex)
                    .map_or(0, |i| i.flags);
                if json {
                    s += &json!({
                        "type": m.kind.name(),
                        "seq": m.seq,
                        "interface": ifname(node, m.ifindex),
                        "link": link,
                        "flags": if_flags(flags),
                    })
                    .to_string();
                    s.push('\n');
                } else {
                    s += &format!(
                        "{}: {}: len 0, if# {}, link: {link}, flags:<{}>\n\n",
                        m.kind.name(),
                        rtm_desc(m.kind),
                        m.ifindex,
                        if_flags(flags).join(",")
                    );
                }
                continue;
            }
            if json {
                s += &json!({
                    "type": m.kind.name(),
                    "seq": m.seq,
                    "destination": m.dst.to_string(),
                    "gateway": m.gateway.map(|g| g.to_string()),
                    "lladdr": m.lladdr.map(|a| wire::EthernetAddress(a).to_string()),
                    "interface": ifname(node, m.ifindex),
                    "flags": flag_names(m.flags),
                })
                .to_string();
                s.push('\n');
                continue;
            }
            let mut names = vec!["DST"];
            let mut vals = vec![m.dst.addr().to_string()];
            if let Some(g) = m.gateway {
                names.push("GATEWAY");
                vals.push(g.to_string());
            } else if let Some(a) = m.lladdr {
                names.push("GATEWAY");
                vals.push(wire::EthernetAddress(a).to_string());
            }
            if !m.dst.is_host() {
                names.push("NETMASK");
                vals.push(mask_of(m.dst.is_ipv6(), m.dst.len()));
            }
            names.push("IFP");
            vals.push(ifname(node, m.ifindex));
            s += &format!(
                "{}: {}: len 0, pid: 0, seq {}, errno 0, flags:{}\nlocks:  inits:\nsockaddrs: <{}>\n {}\n\n",
                m.kind.name(),
                rtm_desc(m.kind),
                m.seq,
                flag_names(m.flags),
                names.join(","),
                vals.join(" ")
            );
        }
        if !s.is_empty() {
            if conn.print(&s).is_err() {
                return Ok(());
            }
            idle = 0;
        } else {
            idle += 1;
            // Every half second with nothing to say: is anyone still listening?
            if idle.is_multiple_of(10) && conn.closed() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// netstat(1)

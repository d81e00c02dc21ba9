//! `netstat`: connections, routes, counters, interfaces and their rates.

use super::*;

pub(super) fn netstat(
    node: &Node<'_>,
    args: &[&str],
    json: bool,
    conn: &mut Conn,
    stop: &AtomicBool,
) -> Res {
    let (mut r, mut s, mut i) = (0, 0, false);
    let mut all = false;
    let mut wait: Option<u64> = None;
    let mut count: Option<u64> = None;
    let mut fam: Option<bool> = None;
    let mut k = 0;
    while k < args.len() {
        let a = args[k];
        let Some(letters) = a.strip_prefix('-').filter(|l| !l.is_empty()) else {
            return Err(usage(format!("netstat: unexpected '{a}'")));
        };
        for c in letters.chars() {
            match c {
                'r' => r += 1,
                's' => s += 1,
                'i' => i = true,
                'n' | 'W' | 'l' => {}
                'a' => all = true,
                'w' | 'q' | 'f' => {
                    k += 1;
                    let v = args
                        .get(k)
                        .ok_or_else(|| usage(format!("netstat: -{c} needs a value")))?;
                    match c {
                        'w' => {
                            wait = Some(
                                v.parse()
                                    .ok()
                                    .filter(|n| (1..=3600).contains(n))
                                    .ok_or_else(|| {
                                        usage(format!("netstat: -w {v}: seconds, 1 to 3600"))
                                    })?,
                            )
                        }
                        'q' => {
                            count = Some(
                                v.parse()
                                    .map_err(|_| usage(format!("netstat: -q {v}: a count")))?,
                            )
                        }
                        _ => {
                            fam = match *v {
                                "inet" => Some(false),
                                "inet6" => Some(true),
                                _ => return Err(usage(format!("netstat: -f {v}: inet or inet6"))),
                            }
                        }
                    }
                }
                c => return Err(usage(format!("netstat: unknown option -{c}"))),
            }
        }
        k += 1;
    }
    if let Some(w) = wait {
        return netstat_rates(node, w, count, json, conn, stop);
    }
    if r > 0 {
        return routes(node, fam, json, conn);
    }
    if s > 0 {
        return counters(node, s > 1 || all, json, conn);
    }
    if i {
        return interfaces_table(node, json, conn);
    }
    connections(node, all, fam, json, conn)
}

/// FreeBSD's way of writing an endpoint: `198.18.0.2.80`, `*.80`, `*.*`.
pub(super) fn endpoint(a: std::net::SocketAddr) -> String {
    let host = if a.ip().is_unspecified() {
        "*".to_string()
    } else {
        a.ip().to_string()
    };
    if a.port() == 0 {
        format!("{host}.*")
    } else {
        format!("{host}.{}", a.port())
    }
}

/// `netstat -an`: the node's TCP connections (and with -a, its listeners).
pub(super) fn connections(
    node: &Node<'_>,
    all: bool,
    fam: Option<bool>,
    json: bool,
    conn: &mut Conn,
) -> Res {
    let list = node
        .stack
        .tcp_connections(Duration::from_secs(2))
        .ok_or_else(|| fail("netstat: a worker did not answer in time; try again"))?;
    let rows: Vec<&net::tcp::ConnInfo> = list
        .iter()
        .filter(|c| all || c.state != "LISTEN")
        .filter(|c| fam.is_none_or(|v6| c.local.is_ipv6() == v6))
        .collect();
    if json {
        let v: Vec<Value> = rows
            .iter()
            .map(|c| {
                json!({
                    "protocol": if c.local.is_ipv6() { "tcp6" } else { "tcp4" },
                    "receive-bytes-waiting": c.recv_q, "send-bytes-waiting": c.send_q,
                    "local": {"address": c.local.ip().to_string(), "port": c.local.port()},
                    "remote": {"address": c.remote.ip().to_string(), "port": c.remote.port()},
                    "tcp-state": c.state,
                })
            })
            .collect();
        return put_json(conn, &json!({ "socket": v }));
    }
    let mut s = format!(
        "Active Internet connections{}\n{:<5} {:>6} {:>6} {:<45} {:<45} (state)\n",
        if all { " (including servers)" } else { "" },
        "Proto",
        "Recv-Q",
        "Send-Q",
        "Local Address",
        "Foreign Address"
    );
    for c in rows {
        s += &format!(
            "{:<5} {:>6} {:>6} {:<45} {:<45} {}\n",
            if c.local.is_ipv6() { "tcp6" } else { "tcp4" },
            c.recv_q,
            c.send_q,
            endpoint(c.local),
            endpoint(c.remote),
            c.state
        );
    }
    put(conn, &s)
}

/// `netstat -rn`.
pub(super) fn routes(node: &Node<'_>, fam: Option<bool>, json: bool, conn: &mut Conn) -> Res {
    let all = node.stack.routes();
    if json {
        let pick = |v6: bool| -> Vec<Value> {
            all.iter()
                .filter(|r| r.dst.is_ipv6() == v6)
                .map(|r| route_json(node, r))
                .collect()
        };
        let mut v = json!({});
        if fam != Some(true) {
            v["inet"] = json!(pick(false));
        }
        if fam != Some(false) {
            v["inet6"] = json!(pick(true));
        }
        return put_json(conn, &json!({ "route-information": v }));
    }
    let mut s = String::from("Routing tables\n");
    for (v6, title) in [(false, "Internet"), (true, "Internet6")] {
        if fam.is_some_and(|f| f != v6) {
            continue;
        }
        s += &format!(
            "\n{title}:\n{:<32} {:<26} {:<7} {:>8}\n",
            "Destination", "Gateway", "Flags", "Netif"
        );
        for r in all.iter().filter(|r| r.dst.is_ipv6() == v6) {
            let dst = if r.dst.len() == 0 {
                "default".to_string()
            } else if r.dst.is_host() {
                r.dst.addr().to_string()
            } else {
                r.dst.to_string()
            };
            for p in &r.paths {
                let gw = match (p.gateway, p.kind) {
                    (Some(g), _) => g.to_string(),
                    (None, route::NhKind::Forward) => format!("link#{}", p.ifindex + 1),
                    (None, _) => "-".to_string(),
                };
                let ifn = match p.kind {
                    route::NhKind::Forward => ifname(node, p.ifindex),
                    _ => "-".into(),
                };
                s += &format!("{dst:<32} {gw:<26} {:<7} {ifn:>8}\n", r.flags.to_string());
            }
        }
    }
    put(conn, &s)
}

/// `netstat -s`: the counters, summed over workers.
pub(super) fn counters(node: &Node<'_>, all: bool, json: bool, conn: &mut Conn) -> Res {
    let st = node.stack.stats();
    if json {
        let mut v = serde_json::Map::new();
        st.for_each(|g, n, x| {
            if all || x != 0 {
                let e = v.entry(g).or_insert_with(|| json!({}));
                e[n] = json!(x);
            }
        });
        let mut rt = serde_json::Map::new();
        for (stage, t) in node.stack.runtime().iter() {
            if t.calls > 0 {
                rt.insert(
                    stage.name().to_string(),
                    json!({
                        "calls": t.calls, "vectors": t.vectors, "packets": t.packets,
                        "cycles": t.cycles,
                    }),
                );
            }
        }
        let mut out = json!({ "statistics": Value::Object(v), "runtime": Value::Object(rt) });
        if let Some(f) = node.fpm {
            let f = *f.lock().unwrap_or_else(|e| e.into_inner());
            let m: serde_json::Map<String, Value> = f
                .fields()
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            out["fpm"] = Value::Object(m);
        }
        return put_json(conn, &out);
    }
    let mut s = String::new();
    let _ = st.write_netstat(&mut s, all);
    if let Some(f) = node.fpm {
        let f = *f.lock().unwrap_or_else(|e| e.into_inner());
        s += "fpm:\n";
        for (k, v) in f.fields() {
            if all || v != 0 {
                s += &format!("\t{v} {}\n", k.replace('_', " "));
            }
        }
    }
    put(conn, &s)
}

/// Each interface's packets and bytes: its queues', summed.
pub(super) fn if_counts(node: &Node<'_>) -> Vec<dev::QueueStats> {
    let n = node.stack.interfaces().len();
    let mut v = vec![dev::QueueStats::default(); n];
    for (_, ifx, q) in node.stack.queue_stats() {
        if let Some(t) = v.get_mut(ifx.get()) {
            *t += q;
        }
    }
    v
}

/// `netstat -i`.
pub(super) fn interfaces_table(node: &Node<'_>, json: bool, conn: &mut Conn) -> Res {
    let ifs = node.stack.interfaces();
    let c = if_counts(node);
    if json {
        let v: Vec<Value> = ifs
            .iter()
            .zip(&c)
            .map(|(i, q)| {
                json!({
                    "name": i.name, "up": i.is_up(), "mtu": i.mtu, "address": i.mac.to_string(),
                    "received-packets": q.ipackets, "received-bytes": q.ibytes,
                    "received-errors": q.ierrors, "dropped-packets": q.idrops,
                    "sent-packets": q.opackets, "sent-bytes": q.obytes,
                    "send-errors": q.oerrors, "send-drops": q.odrops,
                    "networks": i.addrs.iter().map(|a| json!({"network": format!("{}/{}", a.network(), a.prefix_len), "address": a.addr.to_string()}))
                        .chain(i.addrs6.iter().map(|a| json!({"network": format!("{}/{}", route::IpPrefix::new(a.addr.addr.into(), a.addr.prefix_len).addr(), a.addr.prefix_len), "address": a.addr.addr.to_string()})))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        return put_json(conn, &json!({ "interface": v }));
    }
    let mut s = format!(
        "{:<10} {:>5} {:<20} {:<26} {:>10} {:>5} {:>6} {:>10} {:>5} {:>5}\n",
        "Name", "Mtu", "Network", "Address", "Ipkts", "Ierrs", "Idrop", "Opkts", "Oerrs", "Coll"
    );
    for (i, q) in ifs.iter().zip(&c) {
        s += &format!(
            "{:<10} {:>5} {:<20} {:<26} {:>10} {:>5} {:>6} {:>10} {:>5} {:>5}\n",
            // netstat(1) marks an interface that is down with '*'.
            if i.is_up() {
                i.name.clone()
            } else {
                format!("{}*", i.name)
            },
            i.mtu,
            format!("<Link#{}>", i.index.get() + 1),
            i.mac.to_string(),
            q.ipackets,
            q.ierrors,
            q.idrops,
            q.opackets,
            q.oerrors,
            0
        );
        let nets = i
            .addrs
            .iter()
            .map(|a| {
                (
                    format!("{}/{}", a.network(), a.prefix_len),
                    a.addr.to_string(),
                )
            })
            .chain(i.addrs6.iter().map(|a| {
                let p = route::IpPrefix::new(a.addr.addr.into(), a.addr.prefix_len);
                (p.to_string(), a.addr.addr.to_string())
            }));
        for (n, a) in nets {
            s += &format!(
                "{:<10} {:>5} {n:<20} {a:<26} {:>10} {:>5} {:>6} {:>10} {:>5} {:>5}\n",
                i.name, "-", "-", "-", "-", "-", "-", "-"
            );
        }
    }
    put(conn, &s)
}

/// `netstat -w SECS`: packets and bytes in and out (all interfaces) every SECS
/// seconds, as deltas, until the client goes or COUNT lines.
pub(super) fn netstat_rates(
    node: &Node<'_>,
    secs: u64,
    count: Option<u64>,
    json: bool,
    conn: &mut Conn,
    stop: &AtomicBool,
) -> Res {
    conn.streaming();
    let total = |n: &Node<'_>| {
        let mut t = dev::QueueStats::default();
        for q in if_counts(n) {
            t += q;
        }
        t
    };
    if !json {
        put(
            conn,
            &format!(
                "{:>22} {:>33}\n{:>10} {:>5} {:>6} {:>12} {:>10} {:>5} {:>12} {:>5}\n",
                "input (Total)",
                "output",
                "packets",
                "errs",
                "idrops",
                "bytes",
                "packets",
                "errs",
                "bytes",
                "colls"
            ),
        )?;
    }
    let mut last = total(node);
    let mut lines = 0u64;
    while !stop.load(Ordering::Relaxed) && count.is_none_or(|c| lines < c) {
        let until = std::time::Instant::now() + Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            if stop.load(Ordering::Relaxed) || conn.closed() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let now = total(node);
        let line = if json {
            json!({
                "input-packets": now.ipackets - last.ipackets,
                "input-errors": now.ierrors - last.ierrors,
                "input-drops": now.idrops - last.idrops,
                "input-bytes": now.ibytes - last.ibytes,
                "output-packets": now.opackets - last.opackets,
                "output-errors": now.oerrors - last.oerrors,
                "output-bytes": now.obytes - last.obytes,
                "seconds": secs,
            })
            .to_string()
                + "\n"
        } else {
            format!(
                "{:>10} {:>5} {:>6} {:>12} {:>10} {:>5} {:>12} {:>5}\n",
                now.ipackets - last.ipackets,
                now.ierrors - last.ierrors,
                now.idrops - last.idrops,
                now.ibytes - last.ibytes,
                now.opackets - last.opackets,
                now.oerrors - last.oerrors,
                now.obytes - last.obytes,
                0
            )
        };
        if conn.print(&line).is_err() {
            return Ok(());
        }
        last = now;
        lines += 1;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// ifconfig(8)

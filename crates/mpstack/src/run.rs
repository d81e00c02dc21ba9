//! `mpstack run`: a host on a TAP device.

use crate::RunArgs;
use net::{IfConfig, InetAddr, Stack, StackConfig};
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `[TAP=]VALUE`: the TAP named, or `None`.
fn split_tap<'a>(v: &'a str, taps: &[String]) -> (Option<&'a str>, &'a str) {
    match v.split_once('=') {
        Some((t, rest)) if taps.iter().any(|x| x == t) => (Some(t), rest),
        _ => (None, v),
    }
}

/// What `--route PREFIX=GW` asks for.
enum RouteArg {
    Via(route::IpPrefix, std::net::IpAddr),
    Discard(route::IpPrefix, route::NhKind),
}

fn parse_route(r: &str) -> Result<RouteArg, String> {
    let (p, g) = r
        .rsplit_once('=')
        .ok_or_else(|| format!("--route '{r}': expected PREFIX=GATEWAY"))?;
    let prefix: route::IpPrefix = p.parse().map_err(|e| format!("--route: {e}"))?;
    let kind = match g {
        "blackhole" => Some(route::NhKind::Blackhole),
        "reject" => Some(route::NhKind::Reject),
        "prohibit" => Some(route::NhKind::Prohibit),
        _ => None,
    };
    if let Some(k) = kind {
        return Ok(RouteArg::Discard(prefix, k));
    }
    let gw: std::net::IpAddr = g.parse().map_err(|_| {
        format!("--route '{r}': '{g}' is not an address, blackhole, reject or prohibit")
    })?;
    if gw.is_ipv6() != prefix.is_ipv6() {
        return Err(format!(
            "--route '{r}': the gateway is not of the prefix's family"
        ));
    }
    Ok(RouteArg::Via(prefix, gw))
}

/// `--vlan NAME=TAP:VID`: the VLANs' names, parents (indexes into `links`, the
/// TAPs then the --packet interfaces) and ids.
fn parse_vlans(a: &RunArgs, links: &[String]) -> Result<Vec<(String, usize, u16)>, String> {
    let mut out: Vec<(String, usize, u16)> = Vec::new();
    for v in &a.vlan {
        let bad = || format!("--vlan '{v}': expected NAME=TAP:VID, e.g. vlan10=t0:10");
        let (name, rest) = v.split_once('=').ok_or_else(bad)?;
        let (tap, vid) = rest.rsplit_once(':').ok_or_else(bad)?;
        if name.is_empty() || links.iter().any(|t| t == name) || out.iter().any(|x| x.0 == name) {
            return Err(format!(
                "--vlan '{v}': '{name}' must be a new interface name"
            ));
        }
        let parent = links
            .iter()
            .position(|t| t == tap)
            .ok_or_else(|| format!("--vlan '{v}': '{tap}' is not a --tap or --packet"))?;
        let vid = match vid.parse::<u16>() {
            Ok(n) if (1..=4094).contains(&n) => n,
            _ => return Err(format!("--vlan '{v}': VLAN id '{vid}': expected 1 to 4094")),
        };
        if out.iter().any(|x| x.1 == parent && x.2 == vid) {
            return Err(format!("--vlan '{v}': {tap} has VLAN {vid} already"));
        }
        out.push((name.to_string(), parent, vid));
    }
    Ok(out)
}

/// `--bridge NAME=IF,IF`: the bridges' names and their members (indexes into
/// `ifnames`, the TAPs then the VLANs).
fn parse_bridges(a: &RunArgs, ifnames: &[String]) -> Result<Vec<(String, Vec<usize>)>, String> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for v in &a.bridge {
        let (name, list) = v
            .split_once('=')
            .ok_or_else(|| format!("--bridge '{v}': expected NAME=TAP,TAP"))?;
        if name.is_empty() || ifnames.iter().any(|t| t == name) || out.iter().any(|b| b.0 == name) {
            return Err(format!(
                "--bridge '{v}': '{name}' must be a new interface name"
            ));
        }
        let mut members = Vec::new();
        for t in list.split(',').filter(|t| !t.is_empty()) {
            let i = ifnames.iter().position(|x| x == t).ok_or_else(|| {
                format!(
                    "--bridge '{v}': '{t}' is not a --tap or --vlan; members are TAPs and VLANs"
                )
            })?;
            if let Some(b) = out.iter().find(|b| b.1.contains(&i)) {
                return Err(format!(
                    "--bridge '{v}': {t} is a member of {} already",
                    b.0
                ));
            }
            if members.contains(&i) {
                return Err(format!("--bridge '{v}': {t} given twice"));
            }
            members.push(i);
        }
        out.push((name.to_string(), members));
    }
    Ok(out)
}

/// What `--inet NAME=…`, `--inet6 NAME=…`, `--forwarding` and `--rtadv` give
/// interface `name` once it exists as `ifx`: its addresses, forwarding, router
/// advertisements (where it has IPv6 addresses).
fn configure(
    stack: &Stack,
    a: &RunArgs,
    ifx: net::IfIndex,
    name: &str,
    inet: &[InetAddr],
    inet6: &[net::Inet6Addr],
) -> Result<(), String> {
    for a4 in inet {
        stack
            .add_address(ifx, *a4)
            .map_err(|e| format!("--inet {name}={a4}: {e}"))?;
    }
    for a6 in inet6 {
        stack
            .add_address6(ifx, *a6)
            .map_err(|e| format!("--inet6 {a6}: {e}"))?;
    }
    if a.forwarding {
        stack
            .set_forwarding(ifx, true, true)
            .map_err(|e| e.to_string())?;
    }
    if a.rtadv && !inet6.is_empty() {
        stack
            .set_router_advertisements(ifx, true)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `--tunnel NAME=KIND,SRC,DST[,key=N][,mtu=N]`: each tunnel's name and parameters.
fn parse_tunnels(
    a: &RunArgs,
    names: &[String],
) -> Result<Vec<(String, net::tunnel::TunnelParams)>, String> {
    use net::tunnel::{TunnelKind, TunnelParams};
    let mut out: Vec<(String, TunnelParams)> = Vec::new();
    for v in &a.tunnel {
        let bad = |why: &str| {
            format!("--tunnel '{v}': {why}; expected NAME=KIND,SRC,DST[,key=N][,mtu=N], e.g. gif0=gif,198.18.0.2,198.18.0.1")
        };
        let (name, rest) = v.split_once('=').ok_or_else(|| bad("no NAME="))?;
        if name.is_empty() || names.iter().any(|n| n == name) || out.iter().any(|t| t.0 == name) {
            return Err(bad(&format!("'{name}' must be a new interface name")));
        }
        let mut it = rest.split(',');
        let kind = it.next().unwrap_or("");
        let addr = |s: Option<&str>, what: &str| -> Result<std::net::IpAddr, String> {
            let s = s.ok_or_else(|| bad(&format!("no {what}")))?;
            s.parse()
                .map_err(|_| bad(&format!("{what} '{s}' is not an IP address")))
        };
        let src = addr(it.next(), "source")?;
        let dst = addr(it.next(), "destination")?;
        let (mut key, mut mtu) = (None, None);
        for o in it {
            match o.split_once('=') {
                Some(("key", k)) => {
                    key = Some(
                        k.parse::<u32>()
                            .map_err(|_| bad(&format!("key '{k}' is not a 32-bit number")))?,
                    )
                }
                Some(("mtu", m)) => {
                    mtu = Some(
                        m.parse::<usize>()
                            .map_err(|_| bad(&format!("mtu '{m}' is not a number")))?,
                    )
                }
                _ => return Err(bad(&format!("unknown option '{o}'"))),
            }
        }
        let kind = match kind {
            "gif" if key.is_some() => return Err(bad("a gif tunnel has no key")),
            "gif" => TunnelKind::Gif,
            "gre" => TunnelKind::Gre { key },
            k => return Err(bad(&format!("kind '{k}' is neither gif nor gre"))),
        };
        out.push((
            name.to_string(),
            TunnelParams {
                kind,
                src,
                dst,
                mtu,
            },
        ));
    }
    Ok(out)
}

pub fn main(a: RunArgs) -> Result<ExitCode, String> {
    // The links: the TAPs, then the interfaces taken with AF_PACKET.
    crate::control::log::init(&a.log_level)?;
    let links: Vec<String> = a.tap.iter().chain(&a.packet).cloned().collect();
    let taps = &links;
    for (i, t) in taps.iter().enumerate() {
        if taps[..i].contains(t) {
            return Err(format!("--tap/--packet {t} given twice"));
        }
    }
    let vlans = parse_vlans(&a, taps)?;
    // Every interface by name: the TAPs, the VLANs, then the bridges.
    let mut names: Vec<String> = taps
        .iter()
        .cloned()
        .chain(vlans.iter().map(|v| v.0.clone()))
        .collect();
    let bridges = parse_bridges(&a, &names)?;
    names.extend(bridges.iter().map(|b| b.0.clone()));
    let tunnels = parse_tunnels(&a, &names)?;
    names.extend(tunnels.iter().map(|t| t.0.clone()));
    let member_of = |i: usize| bridges.iter().find(|b| b.1.contains(&i)).map(|b| &b.0);
    let trunk = |i: usize| vlans.iter().any(|v| v.1 == i);
    // IPv4 addresses per interface: `NAME=ADDR/LEN`, or the Nth on the Nth TAP.
    let mut inet: Vec<Vec<InetAddr>> = vec![Vec::new(); names.len()];
    for (n, v) in a.inet.iter().enumerate() {
        let (t, addr) = split_tap(v, &names);
        let i = match t {
            Some(t) => names.iter().position(|x| x == t).expect("named"),
            None if n < taps.len() => n,
            None => {
                return Err(format!(
                    "--inet {v}: more --inet than --tap; say which TAP: --inet TAP={v}"
                ))
            }
        };
        if let Some(b) = member_of(i) {
            return Err(format!(
                "--inet {v}: {} is a member of {b}, which takes no address; give it to the bridge: --inet {b}={addr}",
                names[i]
            ));
        }
        inet[i].push(addr.parse().map_err(|e| format!("--inet {v}: {e}"))?);
    }
    // A link with no address, in no bridge and carrying no VLAN waits for
    // `mpstack ifconfig` to give it an address or a bridge to take it (`addm`).
    for i in (0..taps.len()).filter(|&i| inet[i].is_empty() && member_of(i).is_none() && !trunk(i))
    {
        let has6 = a
            .inet6
            .iter()
            .any(|v| v.starts_with(&format!("{}=", taps[i])));
        if !has6 {
            println!(
                "mpstack: {}: no address and in no bridge; it carries nothing until `mpstack ifconfig` gives it an address or `ifconfig BRIDGE addm {}` takes it",
                taps[i], taps[i]
            );
        }
    }
    for (k, (name, _, _)) in vlans.iter().enumerate() {
        let i = taps.len() + k;
        let has6 = a.inet6.iter().any(|v| v.starts_with(&format!("{name}=")));
        if inet[i].is_empty() && member_of(i).is_none() && !has6 {
            return Err(format!(
                "--vlan {name}: no address for it (--inet {name}=ADDR/LEN) and in no --bridge"
            ));
        }
    }
    let gw: Option<Ipv4Addr> = match &a.gw {
        Some(g) => Some(
            g.parse()
                .map_err(|_| format!("--gw: '{g}' is not an IPv4 address"))?,
        ),
        None => None,
    };
    if let Some(g) = gw {
        if !inet.iter().flatten().any(|x| x.contains(g)) {
            return Err(format!(
                "--gw: {g} is not on any interface's subnet ({})",
                inet.iter()
                    .flatten()
                    .map(|x| format!("{}/{}", x.network(), x.prefix_len))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let mut inet6: Vec<Vec<net::Inet6Addr>> = vec![Vec::new(); names.len()];
    for v in &a.inet6 {
        let (t, addr) = split_tap(v, &names);
        let i = t.map_or(0, |t| names.iter().position(|x| x == t).expect("named"));
        if let Some(b) = member_of(i) {
            return Err(format!(
                "--inet6 {v}: {} is a member of {b}, which takes no address; give it to the bridge: --inet6 {b}={addr}",
                names[i]
            ));
        }
        inet6[i].push(addr.parse().map_err(|e| format!("--inet6 {v}: {e}"))?);
    }
    let any6 = inet6.iter().any(|v| !v.is_empty());
    let gw6: Option<std::net::Ipv6Addr> = match &a.gw6 {
        Some(g) => Some(
            g.parse()
                .map_err(|_| format!("--gw6: '{g}' is not an IPv6 address"))?,
        ),
        None => None,
    };
    if gw6.is_some() && !any6 {
        return Err("--gw6 needs an IPv6 address on the interface (--inet6)".into());
    }
    if a.rtadv && !any6 {
        return Err("--rtadv needs IPv6 addresses to advertise (--inet6)".into());
    }
    if a.slaac && !any6 {
        return Err("--slaac needs IPv6 on the interface: give it an address with --inet6 (the link-local one comes with it)".into());
    }
    let mut mtu: Vec<Option<usize>> = vec![None; taps.len()];
    for v in &a.mtu {
        let (t, n) = split_tap(v, taps);
        let i = t.map_or(0, |t| taps.iter().position(|x| x == t).expect("named"));
        mtu[i] = Some(match n.parse::<usize>() {
            Ok(n) if (576..=65535).contains(&n) => n,
            _ => return Err(format!("--mtu {v}: expected 576 to 65535 bytes")),
        });
    }
    let routes: Vec<RouteArg> = a
        .route
        .iter()
        .map(|r| parse_route(r))
        .collect::<Result<_, String>>()?;
    let mac = match &a.mac {
        Some(m) => Some(
            m.parse::<wire::EthernetAddress>()
                .map_err(|_| format!("--mac: '{m}' is not a MAC address"))?,
        ),
        None => None,
    };
    let services = crate::services::parse_list(&a.serve)?;
    let connect: Option<std::net::SocketAddr> = match &a.connect {
        Some(c) => Some(c.parse().map_err(|_| {
            format!("--connect: '{c}' is not ADDRESS:PORT (198.18.0.1:5001 or [2001:2::1]:5001)")
        })?),
        None => None,
    };
    let send = crate::client::parse_bytes(&a.send).map_err(|e| format!("--send: {e}"))?;
    let read_config = |p: &std::path::Path| -> Result<crate::control::config::Config, String> {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("--config {}: {e}", p.display()))?;
        crate::control::config::parse(&text).map_err(|e| format!("--config {}: {e}", p.display()))
    };
    let mut config = match &a.config {
        Some(p) => read_config(p)?,
        None => Default::default(),
    };
    // The control socket first: a second node of the same name stops here, before
    // it takes any interface.
    // Without --name, a second node takes the default name with its process id,
    // and a node that cannot make its socket (no /run/mpstack) runs without one.
    let given = a.name.is_some();
    let mut name = a
        .name
        .clone()
        .unwrap_or_else(|| crate::control::DEFAULT_NAME.to_string());
    let control = if name == "none" {
        None
    } else {
        match crate::control::listen(&name) {
            Ok(c) => Some(c),
            Err(e) if given => return Err(format!("--name: {e}")),
            Err(_) => {
                name = format!("{}-{}", crate::control::DEFAULT_NAME, std::process::id());
                match crate::control::listen(&name) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        println!("mpstack: no control socket: {e}");
                        None
                    }
                }
            }
        }
    };
    // The socket is removed however this function returns (`control`'s drop),
    // if it is still the one this node made.
    let control_stats = crate::control::ControlStats::default();
    let metrics = match &a.metrics {
        Some(m) => Some(crate::control::metrics::listen(m)?),
        None => None,
    };
    let fpm = match &a.fpm {
        Some(f) => {
            let (at, policy) = fpm_policy(&a, f)?;
            let l = std::net::TcpListener::bind(at).map_err(|e| format!("--fpm {at}: {e}"))?;
            Some((
                l,
                std::sync::Mutex::new(net::fpm::FpmStats::default()),
                policy,
            ))
        }
        None => None,
    };
    let workers = a.workers as usize;
    let queues = a.queues.map(|q| q as usize).unwrap_or(workers).max(1);
    let mut tcp = net::tcp::TcpConfig::default();
    // The TCP memory bound's default (`net.inet.tcp.mem`): half the mbuf pool,
    // or a tenth of the machine's memory if that is less.
    if let Some(total) = mem_total() {
        tcp.mem = net::tcp::TcpMemLimits::for_memory(total);
    }
    let mut tuned = Vec::new();
    let mut srcroute = net::SourceRouting::default();
    let mut dn_limits = fw::dummynet::DnLimits::default();
    for s in &a.sysctl {
        let said = match crate::sysctl::apply_ip(&mut srcroute, s)
            .or_else(|| crate::sysctl::apply_dummynet(&mut dn_limits, s))
        {
            Some(said) => said,
            None => crate::sysctl::apply(&mut tcp, s),
        };
        tuned.push(said.map_err(|e| format!("--sysctl: {e}"))?);
    }

    let mut stack = Stack::new(StackConfig {
        name: format!("mpstack-{}", taps[0]),
        workers,
        busy_poll: std::time::Duration::from_micros(a.busy_poll),
        tcp,
        dad_transmits: a.dad_transmits,
        slaac: a.slaac,
        // A router takes no default router from advertisements (RFC 4861 §6.2.8).
        accept_rtadv: !a.forwarding,
        send_redirects: !a.no_redirects,
        flow_table: a.flow_table.as_deref().map(|m| route::FlowTableConfig {
            mode: if m == "dst" {
                route::FlowMode::Destination
            } else {
                route::FlowMode::FourTuple
            },
            ..route::FlowTableConfig::default()
        }),
        ..StackConfig::default()
    });
    stack.set_source_routing(srcroute);
    let mut ifindexes = Vec::new();
    // The AF_PACKET interfaces: bridge members among them are held in promiscuous
    // mode while they are members (from the start, or `ifconfig BR addm` later).
    let packet_links = crate::control::cmds::PacketLinks::new();
    for (i, name) in taps.iter().enumerate() {
        let tap: Box<dyn dev::Device> = if i < a.tap.len() {
            Box::new(
                dev::tap::TapDevice::open_with(name, queues, a.offload)
                    .map_err(|e| format!("TAP '{name}': {e}"))?,
            )
        } else {
            let opts = dev::packet::PacketOptions {
                promisc: false,
                offload: a.offload,
            };
            Box::new(
                dev::packet::PacketDevice::open(name, queues, opts)
                    .map_err(|e| format!("--packet {name}: {e}"))?,
            )
        };
        let device: Box<dyn dev::Device> = match &a.pcap {
            Some(path) => {
                let path = if i == 0 {
                    path.clone()
                } else {
                    let mut p = path.clone().into_os_string();
                    p.push(format!(".{name}"));
                    p.into()
                };
                let w = dev::pcap::PcapWriter::create(&path)
                    .map_err(|e| format!("--pcap {}: {e}", path.display()))?;
                Box::new(dev::pcap::PcapDevice::new(tap, w))
            }
            None => tap,
        };
        let ifindex = stack
            .add_interface(
                device,
                IfConfig {
                    addrs: inet[i].clone(),
                    mac: if i == 0 { mac } else { None },
                    mtu: mtu[i],
                    ..IfConfig::default()
                },
            )
            .map_err(|e| format!("--tap {name}: {e}"))?;
        if i >= a.tap.len() {
            packet_links.add(ifindex, name);
        }
        // Its IPv4 addresses came with it (`IfConfig`).
        configure(&stack, &a, ifindex, name, &[], &inet6[i])?;
        ifindexes.push(ifindex);
    }
    let bparams = net::link::bridge::BridgeParams {
        max_addrs: a.bridge_maxaddr as usize,
        ageing: a.bridge_timeout,
        stp: a.stp.then(|| net::link::bridge::StpParams {
            priority: a.stp_priority,
            times: net::link::bridge::StpTimes {
                max_age: a.stp_maxage * 256,
                hello_time: a.stp_hellotime * 256,
                forward_delay: a.stp_fwddelay * 256,
            },
            ..net::link::bridge::StpParams::default()
        }),
    };
    for (k, (name, parent, vid)) in vlans.iter().enumerate() {
        let i = taps.len() + k;
        let v = stack
            .add_vlan(name, ifindexes[*parent], *vid)
            .map_err(|e| format!("--vlan {name}: {e}"))?;
        configure(&stack, &a, v, name, &inet[i], &inet6[i])?;
        ifindexes.push(v);
    }
    for (k, (name, members)) in bridges.iter().enumerate() {
        let i = taps.len() + vlans.len() + k;
        let b = stack
            .add_bridge(name, bparams)
            .map_err(|e| format!("--bridge {name}: {e}"))?;
        for &m in members {
            packet_links
                .set_promisc(ifindexes[m], true)
                .map_err(|e| format!("--bridge {name}: {e}"))?;
            stack
                .bridge_add_member(b, ifindexes[m], net::link::bridge::MemberFlags::default())
                .map_err(|e| format!("--bridge {name}: {e}"))?;
        }
        configure(&stack, &a, b, name, &inet[i], &inet6[i])?;
        ifindexes.push(b);
    }
    for (k, (name, p)) in tunnels.iter().enumerate() {
        let i = taps.len() + vlans.len() + bridges.len() + k;
        let t = stack
            .add_tunnel(name, *p)
            .map_err(|e| format!("--tunnel {name}: {e}"))?;
        configure(&stack, &a, t, name, &inet[i], &inet6[i])?;
        ifindexes.push(t);
    }
    // The first interface with an address (a bridge's, when every TAP is a member).
    let ifindex = (0..names.len())
        .find(|&i| !inet[i].is_empty() || !inet6[i].is_empty())
        .map_or(ifindexes[0], |i| ifindexes[i]);
    stack.set_default_gateway(gw);
    if let Some(g) = gw6 {
        stack.set_default_gateway6(Some((g, ifindex)));
    }
    for r in &routes {
        let res = match *r {
            RouteArg::Via(p, g) => stack.add_route_via(p, g),
            RouteArg::Discard(p, k) => stack.add_route(route::RouteSpec::discard(p, k)),
        };
        res.map_err(|e| format!("--route: {e}"))?;
    }
    let inet6: Vec<net::Inet6Addr> = inet6.into_iter().flatten().collect();
    let ipfw = match &a.ipfw {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--ipfw {}: {e}", path.display()))?;
            let cfg = fw::RulesetConfig {
                default_allow: a.ipfw_default == "allow",
                ..fw::RulesetConfig::default()
            };
            let f = net::ipfw::Ipfw::new(cfg, workers)?;
            f.set_dummynet_limits(dn_limits);
            // FILE:LINE:COL: message, as a compiler says it.
            f.load(&text)
                .map_err(|e| format!("--ipfw {}:{e}", path.display()))?;
            f.attach(&stack);
            if a.ipfw_layer2 {
                f.attach_layer2(&stack);
            }
            Some(f)
        }
        // A config file with ipfw lines: a firewall with only the default rule,
        // which the file's lines fill.
        None if config.has_ipfw() => {
            let cfg = fw::RulesetConfig {
                default_allow: a.ipfw_default == "allow",
                ..fw::RulesetConfig::default()
            };
            let f = net::ipfw::Ipfw::new(cfg, workers)?;
            f.set_dummynet_limits(dn_limits);
            f.attach(&stack);
            Some(f)
        }
        None => None,
    };
    let default_allow = a.ipfw_default == "allow";
    let firewall = match ipfw {
        Some(f) => crate::control::cmds::Firewall::running(f, default_allow, a.ipfw_layer2),
        None => crate::control::cmds::Firewall::off(default_allow, a.ipfw_layer2, dn_limits),
    };
    if let Some(p) = &a.config {
        let node = crate::control::cmds::Node {
            stack: &stack,
            fw: &firewall,
            sysctl: std::sync::Mutex::new(()),
            fpm: None,
            packet: Some(&packet_links),
            clock: None,
        };
        let n = crate::control::config::apply(&node, &config, &p.display().to_string())
            .map_err(|e| format!("--config: {e}"))?;
        println!("mpstack: --config {}: {n} line(s) applied", p.display());
    }
    // The workers' clock, kept to give the dynamic states' lifetimes at exit.
    let clock = Arc::new(dev::time::MonotonicClock::new());
    stack
        .start_with_clock(clock.clone())
        .map_err(|e| format!("starting workers: {e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .map_err(|e| format!("signal handler: {e}"))?;
    let tcp_counters = Arc::new(crate::services::Counters::default());
    let limits = crate::services::Limits {
        max_conns: a.serve_max_conns,
        idle_timeout: Duration::from_secs_f64(a.serve_idle_timeout),
        header_timeout: Duration::from_secs_f64(a.serve_header_timeout),
        max_conns_per_source: a.serve_max_conns_per_source,
    };
    let tcp_services = crate::services::start(
        &stack,
        &services,
        !inet6.is_empty(),
        workers,
        limits,
        stop.clone(),
        tcp_counters.clone(),
    )?;
    let svc_names = crate::services::describe(&services, !inet6.is_empty());
    let ifs: Vec<String> = stack
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
        .collect();
    for t in &tuned {
        println!("mpstack: sysctl {t}");
    }
    println!(
        "mpstack: up on {}{}, {} worker(s), {} queue(s); services: {svc_names}; SIGINT or SIGTERM stops",
        ifs.join(" and "),
        if a.forwarding { ", forwarding" } else { "" },
        workers,
        queues,
    );

    let udp_counters = Arc::new(crate::services::UdpCounters::default());
    let udp_limits = crate::services::UdpLimits {
        per_source_rate: a.serve_udp_rate,
        burst: a.serve_udp_rate.saturating_mul(2),
        ..crate::services::UdpLimits::default()
    };
    let udp_services = crate::services::start_udp(
        &stack,
        &services,
        !inet6.is_empty(),
        udp_limits,
        stop.clone(),
        udp_counters.clone(),
    )?;

    let started = std::time::Instant::now();
    let mut code = ExitCode::SUCCESS;
    let node = crate::control::cmds::Node {
        stack: &stack,
        fw: &firewall,
        sysctl: std::sync::Mutex::new(()),
        fpm: fpm.as_ref().map(|(_, st, _)| st),
        packet: Some(&packet_links),
        clock: Some(&*clock),
    };
    if let Some(c) = &control {
        println!(
            "mpstack: control socket {} (mpstack route|netstat|ifconfig|arp|ndp|ipfw|sysctl -j {})",
            c.path.display(),
            name
        );
    }
    std::thread::scope(|scope| {
        if let Some(c) = &control {
            let (node, stop, st) = (&node, &stop, &control_stats);
            scope.spawn(move || crate::control::serve(&c.listener, node, stop, st));
        }
        {
            let (node, stop) = (&node, &stop);
            scope.spawn(move || crate::control::log::route_events(node, stop));
        }
        if let Some((l, st, policy)) = &fpm {
            let (stack, stop) = (&stack, &stop);
            scope.spawn(move || net::fpm::serve(stack, l, stop, st, policy));
            if let Ok(at) = l.local_addr() {
                let from = if policy.allow.is_empty() {
                    "loopback".to_string()
                } else {
                    policy
                        .allow
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                println!(
                    "mpstack: routes from FRR (fpm) at {at}, from {from} (users {}), at most {} routes",
                    a.fpm_user.join(" "),
                    policy.max_routes
                );
            }
        }
        if let Some(l) = &metrics {
            let (node, stop, name) = (&node, &stop, &name);
            scope.spawn(move || crate::control::metrics::serve(l, node, name, stop));
            if let Ok(at) = l.local_addr() {
                println!("mpstack: metrics at http://{at}/metrics");
            }
        }
        if let Some(to) = connect {
            match crate::client::run(&stack, to, send, a.seed, &stop) {
            Ok(r) => println!(
                "mpstack: client: sent {} byte(s) sha256 {}, received {} byte(s) sha256 {}, in {:.3}s ({:.3} Gbit/s out)",
                r.sent,
                r.sent_sha256,
                r.received,
                r.received_sha256,
                r.secs,
                r.sent as f64 * 8.0 / r.secs.max(1e-9) / 1e9
            ),
            Err(e) => {
                eprintln!("mpstack: client: {e}");
                code = ExitCode::FAILURE;
            }
        }
            stop.store(true, Ordering::Relaxed);
        }
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            if hup.swap(false, Ordering::Relaxed) {
                reload_config(&a, &node, &mut config, &read_config);
            }
            if a.duration
                .is_some_and(|d| started.elapsed().as_secs_f64() >= d)
            {
                stop.store(true, Ordering::Relaxed);
            }
        }
    });
    if control.is_some() {
        println!("mpstack: {}", control_stats.summary());
    }
    udp_services.join();
    tcp_services.join();
    stack.stop();
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
    print_routes(&stack, &names);
    let now = dev::time::Clock::now(&*clock);
    for b in stack.bridges() {
        print_bridge(&stack, b, &names, now);
    }
    if let Some(f) = firewall.get() {
        for l in f.show().lines() {
            println!("ipfw: {l}");
        }
        // `ipfw -d list`'s second part: the states that have not expired.
        let now = dev::time::Clock::now(&*clock);
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
    Ok(code)
}

/// Where `--fpm` listens and whom it takes routes from: `--fpm` alone or `--fpm
/// PORT` on 127.0.0.1, `--fpm ADDR:PORT` elsewhere (a peer then needs
/// `--fpm-allow` unless it is on loopback); sockets on this host only of root and
/// the `--fpm-user`s.
fn fpm_policy(a: &RunArgs, f: &str) -> Result<(std::net::SocketAddr, net::fpm::FpmPolicy), String> {
    let at: std::net::SocketAddr = match f.parse::<u16>() {
        Ok(port) => (Ipv4Addr::LOCALHOST, port).into(),
        Err(_) => f.parse().map_err(|_| {
            format!("--fpm '{f}': expected PORT or ADDRESS:PORT, e.g. 2620 or 127.0.0.1:2620")
        })?,
    };
    let allow = a
        .fpm_allow
        .iter()
        .map(|p| {
            p.parse::<route::IpPrefix>()
                .map_err(|e| format!("--fpm-allow '{p}': {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if !at.ip().is_loopback() && allow.is_empty() {
        return Err(format!(
            "--fpm {at}: not a loopback address: say which peers may feed the FIB with --fpm-allow PREFIX"
        ));
    }
    let mut uids = vec![0];
    for u in &a.fpm_user {
        match user_id(u) {
            Some(id) => uids.push(id),
            None if u == "frr" && a.fpm_user.len() == 1 => {
                println!("mpstack: --fpm: no user 'frr' on this host; only root's sockets may feed the FIB");
            }
            None => return Err(format!("--fpm-user '{u}': no such user")),
        }
    }
    Ok((
        at,
        net::fpm::FpmPolicy {
            allow,
            local_uids: Some(uids),
            max_routes: a.fpm_max_routes,
            ..net::fpm::FpmPolicy::default()
        },
    ))
}

/// A user's id, by name (from /etc/passwd) or given as a number.
fn user_id(u: &str) -> Option<u32> {
    if let Ok(n) = u.parse() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == u).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// SIGHUP: the config file read again and the difference applied (or nothing, if
/// any of it fails); what happened is printed.
fn reload_config(
    a: &RunArgs,
    node: &crate::control::cmds::Node<'_>,
    config: &mut crate::control::config::Config,
    read: &dyn Fn(&std::path::Path) -> Result<crate::control::config::Config, String>,
) {
    let Some(p) = &a.config else {
        println!("mpstack: SIGHUP: no --config to reload");
        return;
    };
    let file = p.display().to_string();
    let r = read(p).and_then(|new| {
        crate::control::config::reload(node, config, &new, &file).map(|r| (new, r))
    });
    match r {
        Ok((new, r)) => {
            *config = new;
            println!(
                "mpstack: --config {file}: reloaded: {} line(s) undone, {} taken out with no inverse (their settings stay), {} applied",
                r.undone, r.kept, r.applied
            );
        }
        Err(e) => println!("mpstack: --config: reload refused, the node is as it was: {e}"),
    }
}

/// The routing table as `netstat -rn` shows it.
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

/// The machine's memory in bytes (`MemTotal` of /proc/meminfo), where there is one.
fn mem_total() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

//! `mpstack run`'s arguments read into what the node is made of: its links, VLANs,
//! bridges and tunnels, their addresses, the gateways, MTUs and routes, the services
//! and the client, and the config file.

use crate::RunArgs;
use net::InetAddr;
use std::net::Ipv4Addr;

/// The node that the arguments describe, checked, before anything is opened.
pub(super) struct Plan {
    /// The links: the TAPs, then the interfaces taken with AF_PACKET.
    pub links: Vec<String>,
    pub vlans: Vec<(String, usize, u16)>,
    pub bridges: Vec<(String, Vec<usize>)>,
    pub tunnels: Vec<(String, net::tunnel::TunnelParams)>,
    /// Every interface by name: the links, the VLANs, the bridges, then the tunnels.
    pub names: Vec<String>,
    /// The IPv4 and IPv6 addresses of each of `names`.
    pub inet: Vec<Vec<InetAddr>>,
    pub inet6: Vec<Vec<net::Inet6Addr>>,
    pub gw: Option<Ipv4Addr>,
    pub gw6: Option<std::net::Ipv6Addr>,
    /// Each link's MTU, where given.
    pub mtu: Vec<Option<usize>>,
    pub routes: Vec<RouteArg>,
    pub mac: Option<wire::EthernetAddress>,
    pub services: Vec<crate::services::Service>,
    pub connect: Option<std::net::SocketAddr>,
    pub send: u64,
}

/// The arguments checked and read into a [`Plan`].
pub(super) fn plan(a: &RunArgs) -> Result<Plan, String> {
    let links: Vec<String> = a.tap.iter().chain(&a.packet).cloned().collect();
    let taps = &links;
    for (i, t) in taps.iter().enumerate() {
        if taps[..i].contains(t) {
            return Err(format!("--tap/--packet {t} given twice"));
        }
    }
    let vlans = parse_vlans(a, taps)?;
    // Every interface by name: the TAPs, the VLANs, then the bridges.
    let mut names: Vec<String> = taps
        .iter()
        .cloned()
        .chain(vlans.iter().map(|v| v.0.clone()))
        .collect();
    let bridges = parse_bridges(a, &names)?;
    names.extend(bridges.iter().map(|b| b.0.clone()));
    let tunnels = parse_tunnels(a, &names)?;
    names.extend(tunnels.iter().map(|t| t.0.clone()));
    let inet = inet4(a, taps, &names, &vlans, &bridges)?;
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
    let inet6 = inet6(a, &names, &bridges)?;
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
    Ok(Plan {
        links,
        vlans,
        bridges,
        tunnels,
        names,
        inet,
        inet6,
        gw,
        gw6,
        mtu,
        routes,
        mac,
        services,
        connect,
        send,
    })
}

/// The bridge that interface `i` is a member of.
fn member_of(bridges: &[(String, Vec<usize>)], i: usize) -> Option<&String> {
    bridges.iter().find(|b| b.1.contains(&i)).map(|b| &b.0)
}

/// `--inet`: the IPv4 addresses of each of `names`, `NAME=ADDR/LEN` or the Nth on
/// the Nth TAP; what a link with none is waiting for is said.
fn inet4(
    a: &RunArgs,
    taps: &[String],
    names: &[String],
    vlans: &[(String, usize, u16)],
    bridges: &[(String, Vec<usize>)],
) -> Result<Vec<Vec<InetAddr>>, String> {
    let trunk = |i: usize| vlans.iter().any(|v| v.1 == i);
    // IPv4 addresses per interface: `NAME=ADDR/LEN`, or the Nth on the Nth TAP.
    let mut inet: Vec<Vec<InetAddr>> = vec![Vec::new(); names.len()];
    for (n, v) in a.inet.iter().enumerate() {
        let (t, addr) = split_tap(v, names);
        let i = match t {
            Some(t) => names.iter().position(|x| x == t).expect("named"),
            None if n < taps.len() => n,
            None => {
                return Err(format!(
                    "--inet {v}: more --inet than --tap; say which TAP: --inet TAP={v}"
                ))
            }
        };
        if let Some(b) = member_of(bridges, i) {
            return Err(format!(
                "--inet {v}: {} is a member of {b}, which takes no address; give it to the bridge: --inet {b}={addr}",
                names[i]
            ));
        }
        inet[i].push(addr.parse().map_err(|e| format!("--inet {v}: {e}"))?);
    }
    // A link with no address, in no bridge and carrying no VLAN waits for
    // `mpstack ifconfig` to give it an address or a bridge to take it (`addm`).
    for i in (0..taps.len())
        .filter(|&i| inet[i].is_empty() && member_of(bridges, i).is_none() && !trunk(i))
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
        if inet[i].is_empty() && member_of(bridges, i).is_none() && !has6 {
            return Err(format!(
                "--vlan {name}: no address for it (--inet {name}=ADDR/LEN) and in no --bridge"
            ));
        }
    }
    Ok(inet)
}

/// `--inet6`: the IPv6 addresses of each of `names`, `NAME=ADDR/LEN` or on the first.
fn inet6(
    a: &RunArgs,
    names: &[String],
    bridges: &[(String, Vec<usize>)],
) -> Result<Vec<Vec<net::Inet6Addr>>, String> {
    let mut inet6: Vec<Vec<net::Inet6Addr>> = vec![Vec::new(); names.len()];
    for v in &a.inet6 {
        let (t, addr) = split_tap(v, names);
        let i = t.map_or(0, |t| names.iter().position(|x| x == t).expect("named"));
        if let Some(b) = member_of(bridges, i) {
            return Err(format!(
                "--inet6 {v}: {} is a member of {b}, which takes no address; give it to the bridge: --inet6 {b}={addr}",
                names[i]
            ));
        }
        inet6[i].push(addr.parse().map_err(|e| format!("--inet6 {v}: {e}"))?);
    }
    Ok(inet6)
}

/// `--config FILE` read and parsed.
pub(super) fn read_config(p: &std::path::Path) -> Result<crate::control::config::Config, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("--config {}: {e}", p.display()))?;
    crate::control::config::parse(&text).map_err(|e| format!("--config {}: {e}", p.display()))
}

/// `[TAP=]VALUE`: the TAP named, or `None`.
fn split_tap<'a>(v: &'a str, taps: &[String]) -> (Option<&'a str>, &'a str) {
    match v.split_once('=') {
        Some((t, rest)) if taps.iter().any(|x| x == t) => (Some(t), rest),
        _ => (None, v),
    }
}

/// What `--route PREFIX=GW` asks for.
pub(super) enum RouteArg {
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

//! `mpstack run`'s stack made: its tunables (`--sysctl`), its links (TAP, AF_PACKET,
//! pcap), VLANs, bridges and tunnels with their addresses, its gateways and routes,
//! and its firewall (`--ipfw`).

use super::parse::{Plan, RouteArg};
use crate::RunArgs;
use net::{IfConfig, InetAddr, Stack, StackConfig};

/// The stack, before its workers start, and what was made with it.
pub(super) struct Built {
    pub stack: Stack,
    /// The `--sysctl`s as they were taken, to be printed.
    pub tuned: Vec<String>,
    pub dn_limits: fw::dummynet::DnLimits,
    /// The AF_PACKET interfaces: bridge members among them are held in promiscuous
    /// mode while they are members (from the start, or `ifconfig BR addm` later).
    pub packet_links: crate::control::cmds::PacketLinks,
}

/// The stack with the tunables of `--sysctl`, and every interface, gateway and route
/// of `plan`.
pub(super) fn build(
    a: &RunArgs,
    plan: &Plan,
    workers: usize,
    queues: usize,
) -> Result<Built, String> {
    let taps = &plan.links;
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
    let packet_links = crate::control::cmds::PacketLinks::new();
    let mut ifindexes = links(a, plan, &mut stack, &packet_links, queues)?;
    virtual_interfaces(a, plan, &stack, &packet_links, &mut ifindexes)?;
    let (names, inet, inet6) = (&plan.names, &plan.inet, &plan.inet6);
    // The first interface with an address (a bridge's, when every TAP is a member).
    let ifindex = (0..names.len())
        .find(|&i| !inet[i].is_empty() || !inet6[i].is_empty())
        .map_or(ifindexes[0], |i| ifindexes[i]);
    stack.set_default_gateway(plan.gw);
    if let Some(g) = plan.gw6 {
        stack.set_default_gateway6(Some((g, ifindex)));
    }
    for r in &plan.routes {
        let res = match *r {
            RouteArg::Via(p, g) => stack.add_route_via(p, g),
            RouteArg::Discard(p, k) => stack.add_route(route::RouteSpec::discard(p, k)),
        };
        res.map_err(|e| format!("--route: {e}"))?;
    }
    Ok(Built {
        stack,
        tuned,
        dn_limits,
        packet_links,
    })
}

/// The TAPs and AF_PACKET interfaces opened (behind a pcap writer with `--pcap`) and
/// added to the stack with their addresses: their interface indexes.
fn links(
    a: &RunArgs,
    plan: &Plan,
    stack: &mut Stack,
    packet_links: &crate::control::cmds::PacketLinks,
    queues: usize,
) -> Result<Vec<net::IfIndex>, String> {
    let (inet, inet6, mtu, mac) = (&plan.inet, &plan.inet6, &plan.mtu, plan.mac);
    let taps = &plan.links;
    let mut ifindexes = Vec::new();
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
        configure(stack, a, ifindex, name, &[], &inet6[i])?;
        ifindexes.push(ifindex);
    }
    Ok(ifindexes)
}

/// The VLANs, bridges and tunnels added to the stack with their addresses, their
/// interface indexes after the links' in `ifindexes`.
fn virtual_interfaces(
    a: &RunArgs,
    plan: &Plan,
    stack: &Stack,
    packet_links: &crate::control::cmds::PacketLinks,
    ifindexes: &mut Vec<net::IfIndex>,
) -> Result<(), String> {
    let (taps, vlans, bridges, tunnels) = (&plan.links, &plan.vlans, &plan.bridges, &plan.tunnels);
    let (inet, inet6) = (&plan.inet, &plan.inet6);
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
        configure(stack, a, v, name, &inet[i], &inet6[i])?;
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
        configure(stack, a, b, name, &inet[i], &inet6[i])?;
        ifindexes.push(b);
    }
    for (k, (name, p)) in tunnels.iter().enumerate() {
        let i = taps.len() + vlans.len() + bridges.len() + k;
        let t = stack
            .add_tunnel(name, *p)
            .map_err(|e| format!("--tunnel {name}: {e}"))?;
        configure(stack, a, t, name, &inet[i], &inet6[i])?;
        ifindexes.push(t);
    }
    Ok(())
}

/// The firewall of `--ipfw FILE`, or an empty one when the config file has ipfw
/// lines, attached to the stack; or none, which `sysctl net.inet.ip.fw.enable=1` can
/// turn on later.
pub(super) fn firewall(
    a: &RunArgs,
    stack: &Stack,
    config: &crate::control::config::Config,
    workers: usize,
    dn_limits: fw::dummynet::DnLimits,
) -> Result<crate::control::cmds::Firewall, String> {
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
            f.attach(stack);
            if a.ipfw_layer2 {
                f.attach_layer2(stack);
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
            f.attach(stack);
            Some(f)
        }
        None => None,
    };
    let default_allow = a.ipfw_default == "allow";
    let firewall = match ipfw {
        Some(f) => crate::control::cmds::Firewall::running(f, default_allow, a.ipfw_layer2),
        None => crate::control::cmds::Firewall::off(default_allow, a.ipfw_layer2, dn_limits),
    };
    Ok(firewall)
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

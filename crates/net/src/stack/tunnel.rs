//! The tunnels' control side: creating a `gif` or `gre` interface with its
//! endpoints (`ifconfig gif0 create; ifconfig gif0 tunnel SRC DST`).

use super::{Stack, StackError};
use crate::link::iface::{flags, IfIndex};
use crate::tunnel::{TunnelConf, TunnelKind, TunnelParams, GIF_MTU, GRE_MTU};
use std::net::IpAddr;

/// The smallest MTU a tunnel takes: IPv6's minimum link MTU (RFC 8200 §5), which
/// an IPv6 inner packet needs; IPv4's 68 would do for IPv4 alone.
const MIN_MTU: usize = 1280;
/// The largest: an outer IPv4 datagram's total length less its header.
const MAX_MTU: usize = 65535 - 20 - 8;

impl Stack {
    /// Creates tunnel interface `name` carrying packets between `p.src` (this host)
    /// and `p.dst` (the far end), both IPv4 or both IPv6. Addresses and routes go on
    /// its interface as on any other; what is routed through it leaves
    /// encapsulated by the route to `p.dst`. It may be created while the stack runs.
    pub fn add_tunnel(&self, name: &str, p: TunnelParams) -> Result<IfIndex, StackError> {
        check_endpoint(p.src, "source")?;
        check_endpoint(p.dst, "destination")?;
        if p.src.is_ipv4() != p.dst.is_ipv4() {
            return Err(StackError::Tunnel(format!(
                "tunnel endpoints {} and {} are of different families",
                p.src, p.dst
            )));
        }
        let mtu = p.mtu.unwrap_or(match p.kind {
            TunnelKind::Gif => GIF_MTU,
            TunnelKind::Gre { .. } => GRE_MTU,
        });
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(StackError::Tunnel(format!(
                "tunnel MTU {mtu} out of range ({MIN_MTU}-{MAX_MTU})"
            )));
        }
        let shared = &self.shared;
        let seed = self.mac_seed;
        shared.update(|c| {
            if c.ifaces.iter().any(|i| i.name == name) {
                return Err(StackError::Tunnel(format!(
                    "an interface named {name} exists already"
                )));
            }
            // Two tunnels with the same endpoints could not tell their packets apart
            // (GRE's key can).
            let same = |t: &TunnelConf| {
                t.src == p.src
                    && t.dst == p.dst
                    && match (t.kind, p.kind) {
                        (TunnelKind::Gif, TunnelKind::Gif) => true,
                        (TunnelKind::Gre { key: a }, TunnelKind::Gre { key: b }) => a == b,
                        _ => false,
                    }
            };
            if let Some(t) = c.tunnels.iter().find(|t| same(t)) {
                return Err(StackError::Tunnel(format!(
                    "{} has the tunnel {} -> {} ({}) already",
                    c.ifaces[t.ifindex.get()].name,
                    p.src,
                    p.dst,
                    p.kind
                )));
            }
            // A link address only for the IPv6 link-local identifier; never on a wire.
            let mac = super::local_mac(seed, 0x6e, IfIndex(c.ifaces.len() as u16));
            let iff = flags::IFF_UP | flags::IFF_POINTOPOINT | flags::IFF_MULTICAST;
            let ifindex = super::bridge::push_virtual(shared, c, name, mac, mtu, iff);
            c.tunnels.push(TunnelConf {
                ifindex,
                kind: p.kind,
                src: p.src,
                dst: p.dst,
            });
            Ok(ifindex)
        })
    }

    /// Every tunnel, as the workers see them now.
    pub fn tunnels(&self) -> Vec<TunnelConf> {
        self.shared.cfg.load().tunnels.clone()
    }
}

fn check_endpoint(a: IpAddr, what: &str) -> Result<(), StackError> {
    if a.is_unspecified() || a.is_multicast() || a.is_loopback() {
        return Err(StackError::Tunnel(format!(
            "{a} cannot be a tunnel's {what}"
        )));
    }
    if let IpAddr::V4(v) = a {
        if v.is_broadcast() {
            return Err(StackError::Tunnel(format!(
                "{a} cannot be a tunnel's {what}"
            )));
        }
    }
    Ok(())
}

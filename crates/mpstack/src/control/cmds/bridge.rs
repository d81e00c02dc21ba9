//! ifconfig(8)'s bridge parameters on a running node: `addm`, `deletem`,
//! `learn`/`-learn`, `discover`/`-discover`, `sticky`/`-sticky`, `stp`/`-stp`,
//! `edge`/`-edge`, `autoedge`/`-autoedge`, `static`, `deladdr`, `flush`,
//! `deleteall`, and `addr` (the address cache), as FreeBSD's if_bridge(4) takes
//! them, several in one command (`ifconfig bridge0 addm em1 addm em2 -learn em2`);
//! and `bpduguard`/`-bpduguard`, `rootguard`/`-rootguard`, which FreeBSD has not,
//! named in its style.
//!
//! The words become `BridgeOp`s that `Stack::bridge_apply` checks and applies all
//! or nothing (a member added twice, a member of another bridge, an interface with
//! addresses, an unknown one): a bad command leaves the node untouched. An AF_PACKET
//! member is held in promiscuous mode while it is one ([`PacketLinks`]).

use super::{fail, iface, put, put_json, usage, Fail, Node, Res};
use crate::control::Conn;
use net::link::bridge::MemberFlags;
use net::{BridgeOp, IfIndex};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;
use wire::EthernetAddress;

/// The words that make an ifconfig command a bridge one.
pub const WORDS: &[&str] = &[
    "addm",
    "deletem",
    "learn",
    "-learn",
    "discover",
    "-discover",
    "sticky",
    "-sticky",
    "stp",
    "-stp",
    "edge",
    "-edge",
    "autoedge",
    "-autoedge",
    "bpduguard",
    "-bpduguard",
    "rootguard",
    "-rootguard",
    "static",
    "deladdr",
    "flush",
    "deleteall",
    "addr",
];

/// The member flags, each with its `-` form (a member's name follows).
pub const FLAG_WORDS: &[&str] = &[
    "learn",
    "discover",
    "sticky",
    "stp",
    "edge",
    "autoedge",
    "bpduguard",
    "rootguard",
];

/// A node's AF_PACKET interfaces (by the stack's index: the kernel's name) and the
/// promiscuous mode each holds while it is a bridge member. A TAP needs none: the
/// kernel hands it every frame.
#[derive(Debug, Default)]
pub struct PacketLinks {
    links: Mutex<HashMap<IfIndex, (String, Option<dev::packet::Promisc>)>>,
}

impl PacketLinks {
    pub fn new() -> PacketLinks {
        PacketLinks::default()
    }

    /// `ifindex` is the AF_PACKET device on kernel interface `kname`.
    pub fn add(&self, ifindex: IfIndex, kname: &str) {
        self.lock().insert(ifindex, (kname.to_string(), None));
    }

    /// Puts `ifindex` in promiscuous mode, or lets it go; nothing for a TAP.
    pub fn set_promisc(&self, ifindex: IfIndex, on: bool) -> Result<(), String> {
        let mut l = self.lock();
        let Some((kname, held)) = l.get_mut(&ifindex) else {
            return Ok(());
        };
        if !on {
            *held = None;
        } else if held.is_none() {
            *held = Some(dev::packet::Promisc::hold(kname).map_err(|e| e.to_string())?);
        }
        Ok(())
    }

    /// Whether `ifindex` is held in promiscuous mode now.
    pub fn promisc(&self, ifindex: IfIndex) -> bool {
        self.lock().get(&ifindex).is_some_and(|x| x.1.is_some())
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<IfIndex, (String, Option<dev::packet::Promisc>)>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn mac(s: &str) -> Result<EthernetAddress, Fail> {
    s.parse::<EthernetAddress>()
        .map_err(|_| usage(format!("ifconfig: {s}: bad Ethernet address")))
}

/// `ifconfig BRIDGE PARAM…` for a bridge's parameters (the first word is one of
/// [`WORDS`]): the words become [`BridgeOp`]s, which `Stack::bridge_apply` checks
/// and applies all or nothing.
pub(super) fn command(
    node: &Node<'_>,
    name: &str,
    args: &[&str],
    json: bool,
    conn: &mut Conn,
) -> Res {
    let br = iface(node, name).map_err(|e| fail(format!("ifconfig: {}", e.msg)))?;
    let bc = node
        .stack
        .bridge(br.index)
        .map_err(|_| fail(format!("ifconfig: {name} is not a bridge")))?;
    if args == ["addr"] {
        return addresses(node, name, &bc, json, conn);
    }
    // A member's flags as the command leaves them.
    let mut flags: HashMap<IfIndex, MemberFlags> =
        bc.members.iter().map(|m| (m.ifindex, m.flags)).collect();
    let mut ops = Vec::new();
    let mut w = args;
    while let Some((&word, rest)) = w.split_first() {
        let need = |n: usize| -> Result<&[&str], Fail> {
            rest.get(..n)
                .ok_or_else(|| usage(format!("ifconfig: {word}: needs {n} argument(s)")))
        };
        let ifx = |m: &str| {
            iface(node, m)
                .map(|i| i.index)
                .map_err(|e| fail(format!("ifconfig: {}", e.msg)))
        };
        let used = match word {
            "addm" => {
                let m = ifx(need(1)?[0])?;
                flags.insert(m, MemberFlags::default());
                ops.push(BridgeOp::Add(m, MemberFlags::default()));
                1
            }
            "deletem" => {
                ops.push(BridgeOp::Delete(ifx(need(1)?[0])?));
                1
            }
            w if FLAG_WORDS.contains(&w.trim_start_matches('-')) => {
                let m = ifx(need(1)?[0])?;
                let on = !word.starts_with('-');
                let f = flags.entry(m).or_default();
                match word.trim_start_matches('-') {
                    "learn" => f.learning = on,
                    "discover" => f.discover = on,
                    "sticky" => f.sticky = on,
                    "stp" => f.stp = on,
                    "edge" => f.edge = on,
                    "autoedge" => f.autoedge = on,
                    "bpduguard" => f.bpduguard = on,
                    _ => f.rootguard = on,
                }
                ops.push(BridgeOp::Flags(m, *f));
                1
            }
            "static" => {
                let a = need(2)?;
                ops.push(BridgeOp::Static(ifx(a[0])?, mac(a[1])?, 0));
                2
            }
            "deladdr" => {
                ops.push(BridgeOp::DelAddr(mac(need(1)?[0])?));
                1
            }
            "flush" => {
                ops.push(BridgeOp::Flush { statics: false });
                0
            }
            "deleteall" => {
                ops.push(BridgeOp::Flush { statics: true });
                0
            }
            "addr" => return Err(usage("ifconfig: addr lists the address cache, alone")),
            w => {
                return Err(usage(format!(
                    "ifconfig: {w}: not a bridge parameter ({})",
                    WORDS.join(", ")
                )))
            }
        };
        w = &rest[used..];
    }
    // Promiscuous mode for the new AF_PACKET members first: if the kernel refuses
    // it, nothing has changed; if the bridge refuses the command, it is given back.
    let mut held = Vec::new();
    let release = |held: &[IfIndex]| {
        for &h in held {
            if let Some(p) = node.packet {
                let _ = p.set_promisc(h, false);
            }
        }
    };
    for op in &ops {
        if let (BridgeOp::Add(i, _), Some(p)) = (op, node.packet) {
            if !p.promisc(*i) {
                if let Err(e) = p.set_promisc(*i, true) {
                    release(&held);
                    return Err(fail(format!("ifconfig: addm: {e}")));
                }
                held.push(*i);
            }
        }
    }
    if let Err(e) = node.stack.bridge_apply(br.index, &ops) {
        release(&held);
        return Err(fail(format!("ifconfig: {name}: {e}")));
    }
    // Interfaces the command took out (and did not put back) give the mode back.
    let now = node
        .stack
        .bridge(br.index)
        .map(|b| b.members)
        .unwrap_or_default();
    let left: Vec<IfIndex> = ops
        .iter()
        .filter_map(|op| match op {
            BridgeOp::Add(i, _) | BridgeOp::Delete(i) => Some(*i),
            _ => None,
        })
        .filter(|i| now.iter().all(|m| m.ifindex != *i))
        .collect();
    release(&left);
    put(conn, "")
}

/// `ifconfig BRIDGE addr`: the address cache, as FreeBSD prints it
/// (`MAC Vlan1 MEMBER EXPIRE flags=0<>`).
fn addresses(
    node: &Node<'_>,
    name: &str,
    bc: &net::link::bridge::BridgeConf,
    json: bool,
    conn: &mut Conn,
) -> Res {
    let now = node
        .clock
        .map_or(0, |c| (c.now().as_nanos() / 1_000_000_000) as u32);
    let mut rows = bc.br.rt.entries(now);
    rows.sort_by_key(|r| (r.2.member, r.1 .0, r.0));
    let who = |m: u16| super::ifname(node, u32::from(m));
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(vlan, mac, e, exp)| {
                json!({
                    "address": mac.to_string(), "vlan": vlan, "interface": who(e.member),
                    "static": e.flags.is_static,
                    "expire": (!e.flags.is_static).then(|| exp.saturating_sub(now)),
                })
            })
            .collect();
        return put_json(conn, &json!({ "bridge": name, "addresses": v }));
    }
    let mut s = String::new();
    for (vlan, mac, e, exp) in rows {
        let (left, flags) = if e.flags.is_static {
            (0, "1<STATIC>")
        } else {
            (exp.saturating_sub(now), "0<>")
        };
        s += &format!(
            "{mac} Vlan{} {} {left} flags={flags}\n",
            vlan.max(1),
            who(e.member)
        );
    }
    put(conn, &s)
}

/// What a member's port is beyond its state: an edge, held by root guard,
/// disabled by BPDU guard.
fn port_notes(bc: &net::link::bridge::BridgeConf, slot: u16) -> Vec<&'static str> {
    let slot = usize::from(slot);
    let (edge, inconsistent) = bc.br.stp_port(slot).unwrap_or_default();
    [
        (edge, "edge"),
        (inconsistent, "root-inconsistent"),
        (bc.br.guard_disabled(slot), "bpduguard-disabled"),
    ]
    .iter()
    .filter(|x| x.0)
    .map(|x| x.1)
    .collect()
}

/// The lines `ifconfig` adds for a bridge: its cache's bounds (and the ageing in
/// force during a topology change, the forward delay) and counts, each member
/// with its flags, port and state.
pub(super) fn describe(node: &Node<'_>, bc: &net::link::bridge::BridgeConf) -> String {
    let rs = bc.br.rt.stats();
    let mut s = format!(
        "\tmaxaddr {} timeout {}{}\n\taddresses {} learned {} moved {} evicted {} refused {} expired {}\n",
        bc.br.rt.max(),
        bc.br.rt.ageing(),
        match bc.br.rt.ageing_now() {
            a if a != bc.br.rt.ageing() => format!(" (topology change: ageing {a})"),
            _ => String::new(),
        },
        rs.entries,
        rs.learned,
        rs.moved,
        rs.evicted,
        rs.refused,
        rs.expired,
    );
    let stp = bc.br.stp_enabled();
    for m in &bc.members {
        let mut notes = port_notes(bc, m.slot);
        if node.packet.is_some_and(|p| p.promisc(m.ifindex)) {
            notes.push("promisc");
        }
        s += &format!(
            "\tmember: {} flags=<{}>\n\t        port {} state {}{}\n",
            super::ifname(node, u32::from(m.ifindex.0)),
            m.flags.names(stp).join(","),
            m.slot + 1,
            bc.br.port_state(usize::from(m.slot)),
            notes.iter().map(|n| format!(" {n}")).collect::<String>(),
        );
    }
    s
}

/// The same as JSON.
pub(super) fn describe_json(
    node: &Node<'_>,
    bc: &net::link::bridge::BridgeConf,
) -> serde_json::Value {
    let rs = bc.br.rt.stats();
    let stp = bc.br.stp_enabled();
    json!({
        "maxaddr": bc.br.rt.max(),
        "timeout": bc.br.rt.ageing(),
        "ageing": bc.br.rt.ageing_now(),
        "addresses": rs.entries,
        "learned": rs.learned,
        "moved": rs.moved,
        "evicted": rs.evicted,
        "refused": rs.refused,
        "expired": rs.expired,
        "members": bc.members.iter().map(|m| json!({
            "interface": super::ifname(node, u32::from(m.ifindex.0)),
            "flags": m.flags.names(stp),
            "port": m.slot + 1,
            "state": bc.br.port_state(usize::from(m.slot)).to_string(),
            "notes": port_notes(bc, m.slot),
        })).collect::<Vec<_>>(),
    })
}

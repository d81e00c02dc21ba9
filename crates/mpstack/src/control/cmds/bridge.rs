//! ifconfig(8)'s bridge parameters on a running node: `addm`, `deletem`,
//! `learn`/`-learn`, `discover`/`-discover`, `sticky`/`-sticky`, `static`,
//! `deladdr`, `flush`, `deleteall`, and `addr` (the address cache), as
//! FreeBSD's if_bridge(4) takes them, several in one command
//! (`ifconfig bridge0 addm em1 addm em2 -learn em2`).
//!
//! The whole command is checked against the bridge as it is before anything is
//! applied (a member added twice, a member of another bridge, an interface with
//! addresses, an unknown one): a bad command leaves the node untouched. An AF_PACKET
//! member is held in promiscuous mode while it is one ([`PacketLinks`]).

use super::{fail, iface, put, put_json, usage, Fail, Node, Res};
use crate::control::Conn;
use net::link::bridge::{MemberFlags, MAX_MEMBERS};
use net::IfIndex;
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
    "static",
    "deladdr",
    "flush",
    "deleteall",
    "addr",
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

/// One parameter of the command, checked.
#[derive(Debug)]
enum Op {
    Addm(IfIndex),
    Deletem(IfIndex),
    Flags(IfIndex, MemberFlags),
    Static(IfIndex, EthernetAddress),
    Deladdr(EthernetAddress),
    Flush { statics: bool },
}

fn mac(s: &str) -> Result<EthernetAddress, Fail> {
    s.parse::<EthernetAddress>()
        .map_err(|_| usage(format!("ifconfig: {s}: bad Ethernet address")))
}

/// `ifconfig BRIDGE PARAM…` for a bridge's parameters (the first word is one of
/// [`WORDS`]).
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
    // The members as the command goes, and those of the other bridges.
    let mut members: Vec<(IfIndex, MemberFlags)> =
        bc.members.iter().map(|m| (m.ifindex, m.flags)).collect();
    let mut elsewhere: HashMap<IfIndex, String> = HashMap::new();
    for b in node.stack.bridges().into_iter().filter(|b| *b != br.index) {
        if let Ok(o) = node.stack.bridge(b) {
            let bname = super::ifname(node, u32::from(b.0));
            for m in o.members {
                elsewhere.insert(m.ifindex, bname.clone());
            }
        }
    }
    let bridges = node.stack.bridges();
    let entries = bc.br.rt.entries(0);
    let mut ops = Vec::new();
    let mut w = args;
    while let Some((&word, rest)) = w.split_first() {
        let need = |n: usize| -> Result<&[&str], Fail> {
            rest.get(..n)
                .ok_or_else(|| usage(format!("ifconfig: {word}: needs {n} argument(s)")))
        };
        let member_of = |m: &str, members: &[(IfIndex, MemberFlags)]| -> Result<usize, Fail> {
            let i = iface(node, m).map_err(|e| fail(format!("ifconfig: {}", e.msg)))?;
            members
                .iter()
                .position(|x| x.0 == i.index)
                .ok_or_else(|| fail(format!("ifconfig: {m} is not a member of {name}")))
        };
        let used = match word {
            "addm" => {
                let m = need(1)?[0];
                let i = iface(node, m).map_err(|e| fail(format!("ifconfig: {}", e.msg)))?;
                let why = if members.iter().any(|x| x.0 == i.index) {
                    Some(format!("{m} is a member of {name} already"))
                } else if let Some(b) = elsewhere.get(&i.index) {
                    Some(format!("{m} is a member of {b} already"))
                } else if bridges.contains(&i.index) {
                    Some(format!("{m} is a bridge: a bridge cannot be a member"))
                } else if i.no_link_header() {
                    Some(format!(
                        "{m} has no link layer: a bridge member carries Ethernet frames"
                    ))
                } else if !i.addrs.is_empty() || !i.addrs6.is_empty() {
                    Some(format!(
                        "{m} has addresses: a bridge member takes none (delete them, and give them to the bridge)"
                    ))
                } else if members.len() >= MAX_MEMBERS {
                    Some(format!("{name} has {MAX_MEMBERS} members already"))
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(fail(format!("ifconfig: addm {m}: {why}")));
                }
                members.push((i.index, MemberFlags::default()));
                ops.push(Op::Addm(i.index));
                1
            }
            "deletem" => {
                let m = need(1)?[0];
                let k = member_of(m, &members)?;
                ops.push(Op::Deletem(members.remove(k).0));
                1
            }
            "learn" | "-learn" | "discover" | "-discover" | "sticky" | "-sticky" => {
                let k = member_of(need(1)?[0], &members)?;
                let on = !word.starts_with('-');
                let f = &mut members[k].1;
                match word.trim_start_matches('-') {
                    "learn" => f.learning = on,
                    "discover" => f.discover = on,
                    _ => f.sticky = on,
                }
                let f = *f;
                ops.push(Op::Flags(members[k].0, f));
                1
            }
            "static" => {
                let a = need(2)?;
                let k = member_of(a[0], &members)?;
                let mac = mac(a[1])?;
                if mac.is_multicast() {
                    return Err(fail(format!(
                        "ifconfig: static {mac}: a group address; only unicast ones are cached"
                    )));
                }
                ops.push(Op::Static(members[k].0, mac));
                2
            }
            "deladdr" => {
                let mac = mac(need(1)?[0])?;
                if !entries.iter().any(|e| e.1 == mac) {
                    return Err(fail(format!(
                        "ifconfig: deladdr {mac}: not in {name}'s address cache"
                    )));
                }
                ops.push(Op::Deladdr(mac));
                1
            }
            "flush" => {
                ops.push(Op::Flush { statics: false });
                0
            }
            "deleteall" => {
                ops.push(Op::Flush { statics: true });
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
    // Promiscuous mode for the new AF_PACKET members first: if the kernel
    // refuses it, nothing has changed.
    let mut held = Vec::new();
    for op in &ops {
        if let Op::Addm(i) = op {
            if let Some(p) = node.packet {
                if !p.promisc(*i) {
                    if let Err(e) = p.set_promisc(*i, true) {
                        for h in held {
                            let _ = p.set_promisc(h, false);
                        }
                        return Err(fail(format!("ifconfig: addm: {e}")));
                    }
                    held.push(*i);
                }
            }
        }
    }
    for op in ops {
        let b = br.index;
        let r = match op {
            Op::Addm(i) => node.stack.bridge_add_member(b, i, MemberFlags::default()),
            Op::Deletem(i) => {
                let r = node.stack.bridge_delete_member(b, i);
                if r.is_ok() {
                    if let Some(p) = node.packet {
                        let _ = p.set_promisc(i, false);
                    }
                }
                r
            }
            Op::Flags(i, f) => node.stack.bridge_set_member_flags(b, i, f),
            Op::Static(i, mac) => node.stack.bridge_add_static(b, i, mac, 0),
            Op::Deladdr(mac) => {
                for (vlan, _, _, _) in entries.iter().filter(|e| e.1 == mac) {
                    bc.br.rt.delete(*vlan, mac);
                }
                Ok(())
            }
            Op::Flush { statics } => {
                bc.br.rt.flush(statics);
                Ok(())
            }
        };
        r.map_err(|e| fail(format!("ifconfig: {name}: {e}")))?;
    }
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

/// The lines `ifconfig` adds for a bridge: its cache's bounds, each member with
/// its flags, port and state.
pub(super) fn describe(node: &Node<'_>, bc: &net::link::bridge::BridgeConf) -> String {
    let mut s = format!(
        "\tmaxaddr {} timeout {}\n",
        bc.br.rt.max(),
        bc.br.rt.ageing()
    );
    for m in &bc.members {
        s += &format!(
            "\tmember: {} flags=<{}>\n\t        port {} state {}{}\n",
            super::ifname(node, u32::from(m.ifindex.0)),
            member_flags(m.flags).join(","),
            m.slot + 1,
            bc.br.port_state(usize::from(m.slot)),
            if node.packet.is_some_and(|p| p.promisc(m.ifindex)) {
                " promisc"
            } else {
                ""
            }
        );
    }
    s
}

/// The same as JSON.
pub(super) fn describe_json(
    node: &Node<'_>,
    bc: &net::link::bridge::BridgeConf,
) -> serde_json::Value {
    json!({
        "maxaddr": bc.br.rt.max(),
        "timeout": bc.br.rt.ageing(),
        "members": bc.members.iter().map(|m| json!({
            "interface": super::ifname(node, u32::from(m.ifindex.0)),
            "flags": member_flags(m.flags),
            "port": m.slot + 1,
            "state": bc.br.port_state(usize::from(m.slot)).to_string(),
        })).collect::<Vec<_>>(),
    })
}

fn member_flags(f: MemberFlags) -> Vec<&'static str> {
    [
        (f.learning, "LEARNING"),
        (f.discover, "DISCOVER"),
        (f.sticky, "STICKY"),
    ]
    .iter()
    .filter(|x| x.0)
    .map(|x| x.1)
    .collect()
}

//! The bridge's control side: creating a bridge, adding and removing members
//! (bridge(4)'s `addm`, `deletem`), members' flags, static addresses.
//!
//! Each change is a new configuration published as any other (the member list is
//! read by the workers without locks); the spanning tree picks up membership
//! changes on worker 0's next timer run, which is asked for at once.

use super::{Stack, StackError};
use crate::link::arp::ArpTable;
use crate::link::bridge::{Bridge, BridgeConf, BridgeParams, L2Role, Member, MemberFlags};
use crate::link::bridge::{PortState, MAX_MEMBERS};
use crate::link::iface::{flags, IfIndex, Ifnet};
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wire::EthernetAddress;

/// A bridge's interface MTU (Ethernet's).
const BRIDGE_MTU: usize = 1500;

impl Stack {
    /// Creates a bridge with its own interface `name` (`ifconfig bridge0 create`)
    /// and no member yet. Addresses go on its interface as on any other; it may be
    /// created while the stack runs.
    pub fn add_bridge(&self, name: &str, p: BridgeParams) -> Result<IfIndex, StackError> {
        if p.max_addrs == 0 {
            return Err(StackError::Bridge(
                "a bridge's address table needs room for one address at least".into(),
            ));
        }
        let shared = &self.shared;
        let seed = self.mac_seed;
        shared.update(|c| {
            if c.ifaces.iter().any(|i| i.name == name) {
                return Err(StackError::Bridge(format!(
                    "an interface named {name} exists already"
                )));
            }
            let index = IfIndex(c.ifaces.len() as u16);
            let mac = super::local_mac(seed, 0xb5, index);
            let br = Bridge::new(index, mac, p, shared.isn_secret ^ u64::from(index.0), 0);
            let iff = flags::IFF_UP | flags::IFF_BROADCAST;
            push_virtual(shared, c, name, mac, BRIDGE_MTU, iff);
            c.bridges.list.push(BridgeConf {
                br: Arc::new(br),
                members: Vec::new(),
            });
            Ok(index)
        })
    }

    /// Creates an 802.1Q VLAN interface `name` with VLAN id `vid` over `parent`
    /// (`ifconfig vlan10 create vlan 10 vlandev em0`): frames tagged `vid` on the
    /// parent are its own, untagged; what it sends leaves by the parent, tagged. It
    /// takes the parent's link address and MTU. The parent must be a device's
    /// interface (not a bridge, not a VLAN).
    pub fn add_vlan(&self, name: &str, parent: IfIndex, vid: u16) -> Result<IfIndex, StackError> {
        if !(1..=4094).contains(&vid) {
            return Err(StackError::Bridge(format!(
                "VLAN id {vid} out of range (1-4094)"
            )));
        }
        let shared = &self.shared;
        shared.update(|c| {
            let p = c
                .ifaces
                .get(parent.get())
                .cloned()
                .ok_or(StackError::NoInterface(parent))?;
            if c.ifaces.iter().any(|i| i.name == name) {
                return Err(StackError::Bridge(format!(
                    "an interface named {name} exists already"
                )));
            }
            if matches!(c.bridges.role(parent), L2Role::Bridge(_))
                || c.bridges.vlan(parent).is_some()
            {
                return Err(StackError::Bridge(format!(
                    "{}: a VLAN's parent must be a device's interface",
                    p.name
                )));
            }
            if let Some(v) = c
                .bridges
                .vlans
                .iter()
                .find(|v| v.parent == parent && v.vid == vid)
            {
                return Err(StackError::Bridge(format!(
                    "{} has VLAN {vid} already ({})",
                    p.name,
                    c.ifaces[v.ifindex.get()].name
                )));
            }
            let iff = flags::IFF_UP | flags::IFF_BROADCAST;
            let index = push_virtual(shared, c, name, p.mac, p.mtu, iff);
            c.bridges.vlans.push(crate::link::bridge::VlanConf {
                ifindex: index,
                parent,
                vid,
            });
            Ok(index)
        })
    }

    /// Adds interface `member` to bridge `bridge` (`addm`). The member must be a
    /// device's interface (or a VLAN's) in no other bridge, with no address of its
    /// own (as FreeBSD's `net.link.bridge.member_ifaddrs=0`: the bridge's interface
    /// holds them). With the spanning tree on, it starts blocking and forwards after
    /// twice the forward delay; without, at once. Works on a running stack: frames
    /// from the member are bridged from the next burst on.
    pub fn bridge_add_member(
        &self,
        bridge: IfIndex,
        member: IfIndex,
        mflags: MemberFlags,
    ) -> Result<(), StackError> {
        self.bridge_apply(bridge, &[BridgeOp::Add(member, mflags)])
    }

    /// Removes `member` from `bridge` (`deletem`): it stops forwarding at once, and
    /// the addresses learned on it are forgotten (its static ones too).
    pub fn bridge_delete_member(&self, bridge: IfIndex, member: IfIndex) -> Result<(), StackError> {
        self.bridge_apply(bridge, &[BridgeOp::Delete(member)])
    }

    /// Sets a member's flags (`learn`/`-learn`, `discover`/`-discover`,
    /// `sticky`/`-sticky`, `stp`/`-stp`, `edge`/`-edge`, `autoedge`/`-autoedge`,
    /// `bpduguard`/`-bpduguard`, `rootguard`/`-rootguard`). A member BPDU guard
    /// disabled forwards again (through the tree's states, when it runs).
    pub fn bridge_set_member_flags(
        &self,
        bridge: IfIndex,
        member: IfIndex,
        mflags: MemberFlags,
    ) -> Result<(), StackError> {
        self.bridge_apply(bridge, &[BridgeOp::Flags(member, mflags)])
    }

    /// Adds a static address (`static ADDRESS MEMBER`): `mac` (on `vlan`, 0 for
    /// untagged frames) is on `member`, never aged, never moved.
    pub fn bridge_add_static(
        &self,
        bridge: IfIndex,
        member: IfIndex,
        mac: EthernetAddress,
        vlan: u16,
    ) -> Result<(), StackError> {
        self.bridge_apply(bridge, &[BridgeOp::Static(member, mac, vlan)])
    }

    /// Applies `ops` to `bridge` in order, as ifconfig(8) applies several bridge
    /// parameters in one command, all or nothing: each is checked against the
    /// bridge as the ones before it leave it, and if one is refused none takes
    /// effect. The member list is published once; the address table changes after
    /// it (only a full table can still refuse a static address then).
    pub fn bridge_apply(&self, bridge: IfIndex, ops: &[BridgeOp]) -> Result<(), StackError> {
        let (br, gone, added, flagged) = self.shared.update(|c| {
            let b = bridge_index(c, bridge)?;
            let name = |i: IfIndex| if_name(c, i);
            let bname = name(bridge);
            let br = c.bridges.list[b].br.clone();
            // The address cache, read only if a `deladdr` needs it.
            let mut entries = None;
            let mut members = c.bridges.list[b].members.clone();
            let (mut gone, mut added, mut flagged) = (Vec::new(), Vec::new(), Vec::new());
            let not_member =
                |m: IfIndex| StackError::Bridge(format!("{} is not a member of {bname}", name(m)));
            for op in ops {
                match *op {
                    BridgeOp::Add(m, mflags) => {
                        check_member(c, b, &members, m)?;
                        if members.len() >= MAX_MEMBERS {
                            return Err(StackError::Bridge(format!(
                                "{bname} has {MAX_MEMBERS} members already"
                            )));
                        }
                        let slot = (0..MAX_MEMBERS as u16)
                            .find(|s| members.iter().all(|x| x.slot != *s))
                            .unwrap_or(0);
                        members.push(Member {
                            ifindex: m,
                            slot,
                            flags: mflags,
                        });
                        added.push(slot);
                    }
                    BridgeOp::Delete(m) => {
                        let k = members
                            .iter()
                            .position(|x| x.ifindex == m)
                            .ok_or_else(|| not_member(m))?;
                        let x = members.remove(k);
                        added.retain(|s| *s != x.slot);
                        gone.push((m, x.slot));
                    }
                    BridgeOp::Flags(m, mflags) => {
                        let x = members
                            .iter_mut()
                            .find(|x| x.ifindex == m)
                            .ok_or_else(|| not_member(m))?;
                        x.flags = mflags;
                        flagged.push(x.slot);
                    }
                    BridgeOp::Static(m, mac, _) => {
                        if mac.is_multicast() {
                            return Err(StackError::Bridge(format!(
                                "{mac} is a group address: only unicast addresses are learned"
                            )));
                        }
                        if !members.iter().any(|x| x.ifindex == m) {
                            return Err(not_member(m));
                        }
                    }
                    BridgeOp::DelAddr(mac) => {
                        let cached = entries.get_or_insert_with(|| br.rt.entries(0));
                        if !cached.iter().any(|e| e.1 == mac) {
                            return Err(StackError::Bridge(format!(
                                "{mac}: not in {bname}'s address cache"
                            )));
                        }
                    }
                    BridgeOp::Flush { .. } => {}
                }
            }
            c.bridges.list[b].members = members;
            flagged.retain(|s| !gone.iter().any(|g| g.1 == *s));
            Ok::<_, StackError>((br, gone, added, flagged))
        })?;
        // The ports of members gone stop; those of new members forward at once,
        // or wait for the spanning tree (a slot may still hold a removed member's
        // state).
        let stp = br.stp_enabled();
        for &(m, slot) in &gone {
            br.guard_reset(usize::from(slot));
            if !stp {
                br.set_port_state(usize::from(slot), PortState::Disabled);
            }
            br.rt.delete_member(m.0, true);
        }
        // Setting a member's flags is the operator's word that a member BPDU guard
        // disabled may forward again (as `shutdown`/`no shutdown` of an
        // err-disabled port elsewhere).
        for &slot in &flagged {
            if br.guard_reset(usize::from(slot)) && !stp {
                br.set_port_state(usize::from(slot), PortState::Forwarding);
            }
        }
        for &slot in &added {
            br.guard_reset(usize::from(slot));
            let state = if stp {
                PortState::Disabled
            } else {
                PortState::Forwarding
            };
            br.set_port_state(usize::from(slot), state);
        }
        for op in ops {
            match *op {
                BridgeOp::Static(m, mac, vlan) => br
                    .rt
                    .add_static(vlan, mac, m.0, 0)
                    .map_err(|e| StackError::Bridge(e.to_string()))?,
                BridgeOp::DelAddr(mac) => {
                    for (vlan, _, _, _) in br.rt.entries(0).iter().filter(|e| e.1 == mac) {
                        br.rt.delete(*vlan, mac);
                    }
                }
                BridgeOp::Flush { statics } => {
                    br.rt.flush(statics);
                }
                _ => {}
            }
        }
        if stp && !(gone.is_empty() && added.is_empty() && flagged.is_empty()) {
            self.stp_changed(&br);
        }
        Ok(())
    }

    /// Bridge `bridge` as the workers see it now: its table and state (`br`) and its
    /// members.
    pub fn bridge(&self, bridge: IfIndex) -> Result<BridgeConf, StackError> {
        let c = self.shared.cfg.load();
        let b = bridge_index(&c, bridge)?;
        Ok(c.bridges.list[b].clone())
    }

    /// Every bridge's interface.
    pub fn bridges(&self) -> Vec<IfIndex> {
        let c = self.shared.cfg.load();
        c.bridges.list.iter().map(|b| b.br.ifindex).collect()
    }

    /// Asks worker 0 to bring the spanning tree in line with the member list.
    fn stp_changed(&self, br: &Bridge) {
        br.stp_next.store(0, Ordering::Relaxed);
        self.shared.notify_worker(0);
    }
}

/// Adds an interface with no device of its own (a bridge's, a VLAN's, a tunnel's):
/// its frames leave through the worker's flush, which hands them to the members, the
/// parent or the tunnel's encapsulation. `iff` are its flags (`IFF_UP` and more).
pub(super) fn push_virtual(
    shared: &super::Shared,
    c: &mut super::NetConfig,
    name: &str,
    mac: EthernetAddress,
    mtu: usize,
    iff: u32,
) -> IfIndex {
    let index = IfIndex(c.ifaces.len() as u16);
    let ifp = Arc::new(Ifnet {
        index,
        name: name.to_string(),
        mac,
        mtu,
        flags: iff,
        addrs: Vec::new(),
        addrs6: Vec::new(),
        arp: Arc::new(ArpTable::new(shared.params.arp)),
        nd6: Arc::new(crate::inet6::nd6::Nd6Table::new(shared.params.arp)),
        num_queues: 1,
        forwarding: Arc::default(),
        offload: dev::Offloads::default(),
    });
    ifp.arp.set_watch(index.0 as u32, shared.rtbus.clone());
    ifp.nd6.set_watch(index.0 as u32, shared.rtbus.clone());
    c.ifaces.push(ifp);
    let hq = shared.params.handoff_queue;
    c.handoff.push(Arc::new(ArrayQueue::new(hq.max(1))));
    index
}

/// One of ifconfig(8)'s bridge parameters, for [`Stack::bridge_apply`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BridgeOp {
    /// `addm IF`.
    Add(IfIndex, MemberFlags),
    /// `deletem IF`.
    Delete(IfIndex),
    /// A member's flags (`[-]learn`, `[-]discover`, `[-]sticky`, `[-]stp`,
    /// `[-]edge`, `[-]autoedge`, `[-]bpduguard`, `[-]rootguard`).
    Flags(IfIndex, MemberFlags),
    /// `static IF MAC`, on a VLAN (0: untagged frames).
    Static(IfIndex, EthernetAddress, u16),
    /// `deladdr MAC`: the address leaves the cache, on every VLAN.
    DelAddr(EthernetAddress),
    /// `flush` (learned addresses), or `deleteall` (`statics`: static ones too).
    Flush { statics: bool },
}

/// Why interface `m` cannot join bridge `b`, whose members are `members` so far.
fn check_member(
    c: &super::NetConfig,
    b: usize,
    members: &[Member],
    m: IfIndex,
) -> Result<(), StackError> {
    let name = |i: IfIndex| if_name(c, i);
    let mif = c.ifaces.get(m.get()).ok_or(StackError::NoInterface(m))?;
    let mname = &mif.name;
    let why = if members.iter().any(|x| x.ifindex == m) {
        format!(
            "{mname} is a member of {} already",
            name(c.bridges.list[b].br.ifindex)
        )
    } else if let L2Role::Member { b: ob, .. } = c.bridges.role(m) {
        // (This bridge's own members are the list above, as changed so far.)
        match ob as usize == b {
            true => return Ok(()),
            false => format!(
                "{mname} is a member of {} already",
                name(c.bridges.list[ob as usize].br.ifindex)
            ),
        }
    } else if matches!(c.bridges.role(m), L2Role::Bridge(_)) {
        format!("{mname} is a bridge: a bridge cannot be a member")
    } else if mif.no_link_header() {
        format!("{mname} has no link layer: a bridge member carries Ethernet frames")
    } else if !mif.addrs.is_empty() || !mif.addrs6.is_empty() {
        format!(
            "{mname} has addresses: a bridge member takes none (delete them, and give them to the bridge)"
        )
    } else {
        return Ok(());
    };
    Err(StackError::Bridge(why))
}

/// The name of interface `i` ("" if there is none).
fn if_name(c: &super::NetConfig, i: IfIndex) -> String {
    c.ifaces
        .get(i.get())
        .map_or_else(String::new, |f| f.name.clone())
}

/// The index in the bridge list of the bridge whose interface is `i`.
fn bridge_index(c: &super::NetConfig, i: IfIndex) -> Result<usize, StackError> {
    match c.bridges.role(i) {
        L2Role::Bridge(b) => Ok(b as usize),
        _ if i.get() >= c.ifaces.len() => Err(StackError::NoInterface(i)),
        _ => Err(StackError::Bridge(format!(
            "{} is not a bridge",
            c.ifaces[i.get()].name
        ))),
    }
}

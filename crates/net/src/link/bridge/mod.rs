//! The learning bridge (FreeBSD's `if_bridge`): an interface that joins member
//! links into one segment.
//!
//! The parts:
//! - [`rtable`]: the address table, read by every worker without a lock, learned
//!   into in batches.
//! - [`stp`]: the 802.1D spanning tree as a state machine without I/O.
//! - [`Bridge`]: one bridge's state that outlives configuration changes (its table,
//!   its ports' spanning-tree states, the tree itself), shared by every published
//!   configuration.
//! - [`BridgeConf`]: one bridge's member list as the data path reads it, published
//!   with the stack's configuration (RCU: a change is a new configuration swapped in
//!   with one pointer store; the old one is freed when the last worker lets go).
//! - the data path (`input`): `bridge_input` over a member's burst, in place of
//!   `ether_input`; `bridge_output` for what the host sends on the bridge.
//!
//! VLAN interfaces (`vlan`: 802.1Q, FreeBSD's vlan(4)) live here too: a VLAN is a
//! bridge's member like a device's interface, which gives access ports (a VLAN
//! bridged with an untagged link) and trunks (tagged frames bridged as they are,
//! learned per VLAN).
//!
//! A member's own addresses take no traffic while it is in a bridge (as on Linux):
//! the host's addresses on the segment go on the bridge interface, whose link
//! address is the bridge's own.

pub(crate) mod input;
pub mod rtable;
pub mod stp;
pub(crate) mod vlan;

pub use rtable::{BridgeRtable, Learn, RtEntry, RtError, RtFlags, RtStats};
pub use stp::{PortOptions, PortState, Received, Stp, StpOut, StpTimes};

use crate::ifindex::IfIndex;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
const _: () = assert!(MAX_MEMBERS <= 64, "Bridge::guard_down is one bit a slot");
use std::sync::{Arc, Mutex};
use wire::EthernetAddress;

/// Members a bridge holds at most (each has a slot in the spanning tree).
pub const MAX_MEMBERS: usize = 64;

/// A member's flags (bridge(4)'s `learning`, `discover`, `sticky`, `stp`, `edge`,
/// `autoedge`; and `bpduguard`, `rootguard`, which FreeBSD has not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberFlags {
    /// Source addresses of frames from the member are learned (on by default).
    pub learning: bool,
    /// Frames for unknown unicast destinations are sent to the member (on by
    /// default; broadcast and multicast go to every member regardless).
    pub discover: bool,
    /// Addresses learned on the member stay on it: they do not move to another
    /// member (they still age).
    pub sticky: bool,
    /// The member takes part in the bridge's spanning tree, when it runs one (on
    /// by default, `-stp`: it forwards at once and its BPDUs are dropped, counted
    /// in `bridge.bpdunostp`).
    pub stp: bool,
    /// An edge port (`edge`): no bridge behind it, so it forwards without
    /// listening and learning and its changes are no topology change; a BPDU on it
    /// makes it an ordinary port until it is enabled again.
    pub edge: bool,
    /// An edge port if it hears no BPDU while it listens (`autoedge`): it skips
    /// learning (see [`stp`]).
    pub autoedge: bool,
    /// BPDU guard (`bpduguard`): a BPDU on the member disables it (counted in
    /// `bridge.bpduguard`, logged) until the operator sets its flags again.
    pub bpduguard: bool,
    /// Root guard (`rootguard`): a BPDU that would make the member the root port is
    /// refused and holds it blocking until such BPDUs have stopped for max age
    /// (counted in `bridge.rootguard`).
    pub rootguard: bool,
}

impl MemberFlags {
    /// The flags set, as ifconfig(8) names them (`LEARNING`, `DISCOVER`, `STICKY`,
    /// `STP`, `EDGE`, `AUTOEDGE`, `BPDUGUARD`, `ROOTGUARD`); `STP` only when the
    /// bridge runs the tree (`stp`).
    pub fn names(self, stp: bool) -> Vec<&'static str> {
        [
            (self.learning, "LEARNING"),
            (self.discover, "DISCOVER"),
            (self.sticky, "STICKY"),
            (self.stp && stp, "STP"),
            (self.edge, "EDGE"),
            (self.autoedge, "AUTOEDGE"),
            (self.bpduguard, "BPDUGUARD"),
            (self.rootguard, "ROOTGUARD"),
        ]
        .iter()
        .filter(|x| x.0)
        .map(|x| x.1)
        .collect()
    }
}

impl MemberFlags {
    /// What the spanning tree takes from the flags.
    pub fn port_options(self) -> PortOptions {
        PortOptions {
            edge: self.edge,
            autoedge: self.autoedge,
            root_guard: self.rootguard,
        }
    }
}

impl Default for MemberFlags {
    fn default() -> Self {
        MemberFlags {
            learning: true,
            discover: true,
            sticky: false,
            stp: true,
            edge: false,
            autoedge: false,
            bpduguard: false,
            rootguard: false,
        }
    }
}

/// The spanning tree's settings of a bridge (bridge(4)'s `priority`, `hellotime`,
/// `fwddelay`, `maxage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StpParams {
    pub priority: u16,
    pub times: StpTimes,
    /// Every member's path cost.
    pub path_cost: u32,
}

impl Default for StpParams {
    fn default() -> Self {
        StpParams {
            priority: stp::DEFAULT_PRIORITY,
            times: StpTimes::default(),
            path_cost: stp::DEFAULT_PATH_COST,
        }
    }
}

/// What a bridge is made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeParams {
    /// Addresses the table holds at most (bridge(4)'s `maxaddr`).
    pub max_addrs: usize,
    /// Seconds a learned address lives without a frame from it (`timeout`).
    pub ageing: u32,
    /// Run the 802.1D spanning tree on every member (`stp`); off: every member
    /// forwards at once, and BPDUs are dropped (counted in `bridge.bpdunostp`).
    pub stp: Option<StpParams>,
}

impl Default for BridgeParams {
    fn default() -> Self {
        BridgeParams {
            max_addrs: rtable::DEFAULT_MAX,
            ageing: rtable::DEFAULT_AGEING,
            stp: None,
        }
    }
}

/// The spanning tree and what it has to send, under the bridge's lock.
#[derive(Debug)]
pub(crate) struct StpState {
    pub stp: Stp,
    /// BPDUs to send, by spanning-tree port (slot).
    pub out: Vec<StpOut>,
}

/// One bridge's state that outlives configuration changes, shared by every
/// published configuration (FreeBSD's `bridge_softc`).
#[derive(Debug)]
pub struct Bridge {
    /// The bridge's own interface.
    pub ifindex: IfIndex,
    /// The bridge's link address (its interface's, and its spanning-tree id's).
    pub mac: EthernetAddress,
    /// The address table.
    pub rt: BridgeRtable,
    /// Each slot's port state ([`PortState`] as a byte), read by the data path.
    states: Box<[AtomicU8]>,
    pub(crate) stp: Option<Mutex<StpState>>,
    /// When the spanning tree next has work (nanoseconds; `u64::MAX`: never), so
    /// that worker 0 takes the lock only when it does.
    pub(crate) stp_next: AtomicU64,
    /// The second the table was last aged.
    pub(crate) aged: AtomicU32,
    /// The slots BPDU guard has disabled, one bit each, until the operator sets
    /// the member's flags again.
    guard_down: AtomicU64,
}

fn state_byte(s: PortState) -> u8 {
    match s {
        PortState::Disabled => 0,
        PortState::Blocking => 1,
        PortState::Listening => 2,
        PortState::Learning => 3,
        PortState::Forwarding => 4,
    }
}

fn byte_state(b: u8) -> PortState {
    match b {
        1 => PortState::Blocking,
        2 => PortState::Listening,
        3 => PortState::Learning,
        4 => PortState::Forwarding,
        _ => PortState::Disabled,
    }
}

impl Bridge {
    pub(crate) fn new(
        ifindex: IfIndex,
        mac: EthernetAddress,
        p: BridgeParams,
        seed: u64,
        now: u64,
    ) -> Bridge {
        let stp = p.stp.map(|s| {
            let mut stp = Stp::new(mac, s.priority, s.times, now);
            for _ in 0..MAX_MEMBERS {
                stp.add_port(s.path_cost);
            }
            Mutex::new(StpState {
                stp,
                out: Vec::new(),
            })
        });
        Bridge {
            ifindex,
            mac,
            rt: BridgeRtable::new(p.max_addrs, p.ageing, seed),
            states: (0..MAX_MEMBERS).map(|_| AtomicU8::new(0)).collect(),
            stp,
            stp_next: AtomicU64::new(now),
            aged: AtomicU32::new(0),
            guard_down: AtomicU64::new(0),
        }
    }

    /// Whether BPDU guard has disabled the port in `slot`.
    pub fn guard_disabled(&self, slot: usize) -> bool {
        slot < MAX_MEMBERS && self.guard_down.load(Ordering::Relaxed) & 1 << slot != 0
    }

    /// BPDU guard trips on member `slot`: its port is disabled (blocked, its
    /// addresses forgotten, out of the tree) until [`Bridge::guard_reset`].
    /// Whether it was not disabled already.
    pub(crate) fn guard_trip(&self, members: &[Member], slot: usize, now: u64) -> bool {
        let bit = 1u64 << slot;
        if slot >= MAX_MEMBERS || self.guard_down.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            return false;
        }
        self.set_port_state(slot, PortState::Disabled);
        if let Some(m) = members.iter().find(|m| usize::from(m.slot) == slot) {
            self.rt.delete_member(m.ifindex.0, false);
        }
        self.with_stp(members, |stp, out| stp.disable_port(slot, now, out), None);
        true
    }

    /// The operator set the member's flags (or it left): BPDU guard lets its port
    /// in `slot` go again. Whether it had been disabled.
    pub(crate) fn guard_reset(&self, slot: usize) -> bool {
        slot < MAX_MEMBERS
            && self.guard_down.fetch_and(!(1 << slot), Ordering::Relaxed) & 1 << slot != 0
    }

    /// The state of the port in `slot`, as the data path sees it.
    #[inline]
    pub fn port_state(&self, slot: usize) -> PortState {
        self.states.get(slot).map_or(PortState::Disabled, |b| {
            byte_state(b.load(Ordering::Relaxed))
        })
    }

    pub(crate) fn set_port_state(&self, slot: usize, s: PortState) {
        if let Some(b) = self.states.get(slot) {
            b.store(state_byte(s), Ordering::Relaxed);
        }
    }

    /// Whether the spanning tree runs.
    pub fn stp_enabled(&self) -> bool {
        self.stp.is_some()
    }

    /// Runs `f` on the spanning tree under its lock, then publishes the ports'
    /// states (a member out of the tree, `-stp`, forwards; one BPDU guard disabled
    /// does not), forgets the addresses of a port that stopped forwarding, ages
    /// the table with the forward delay while a topology change lasts (802.1D
    /// §8.3.5: active hosts stay learned; flushing the whole table at each change
    /// let a rogue root toggling the TC flag turn the bridge into a hub), and notes
    /// the next deadline.
    /// The BPDUs to send are moved to `send`; without one (the control side, which
    /// has no transmit vectors) they wait for worker 0's next timer run. Returns
    /// false when the spanning tree is off.
    pub(crate) fn with_stp(
        &self,
        members: &[Member],
        f: impl FnOnce(&mut Stp, &mut Vec<StpOut>),
        send: Option<&mut Vec<StpOut>>,
    ) -> bool {
        let Some(lock) = &self.stp else {
            return false;
        };
        let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let StpState { stp, out } = &mut *g;
        f(stp, out);
        let down = self.guard_down.load(Ordering::Relaxed);
        for slot in 0..MAX_MEMBERS {
            let m = members.iter().find(|m| usize::from(m.slot) == slot);
            let s = match m {
                _ if down & 1 << slot != 0 => PortState::Disabled,
                Some(m) if !m.flags.stp => PortState::Forwarding,
                _ => stp.port_state(slot),
            };
            if self.port_state(slot).forwards() && !s.forwards() {
                if let Some(m) = m {
                    self.rt.delete_member(m.ifindex.0, false);
                }
            }
            self.set_port_state(slot, s);
        }
        let short = stp
            .topology_change()
            .then(|| u32::from(stp.forward_delay()).div_ceil(256));
        self.rt.set_short_ageing(short);
        if let Some(send) = send {
            send.append(out);
        }
        let next = if out.is_empty() {
            stp.next_deadline().unwrap_or(u64::MAX)
        } else {
            0
        };
        self.stp_next.store(next, Ordering::Relaxed);
        true
    }

    /// The spanning tree as it stands: root, root port (a slot), whether a
    /// topology change is under way.
    pub fn stp_status(&self) -> Option<StpStatus> {
        let lock = self.stp.as_ref()?;
        let g = lock.lock().unwrap_or_else(|e| e.into_inner());
        Some(StpStatus {
            bridge_id: g.stp.bridge_id(),
            root: g.stp.root(),
            root_path_cost: g.stp.root_path_cost(),
            root_port: g.stp.root_port(),
            topology_change: g.stp.topology_change(),
        })
    }

    /// The spanning tree's view of the port in `slot`: whether it operates as an
    /// edge, whether root guard holds it (`None` when the tree is off).
    pub fn stp_port(&self, slot: usize) -> Option<(bool, bool)> {
        let lock = self.stp.as_ref()?;
        let g = lock.lock().unwrap_or_else(|e| e.into_inner());
        Some((g.stp.port_edge(slot), g.stp.port_root_inconsistent(slot)))
    }
}

/// The spanning tree's view of the network, for `ifconfig bridge0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StpStatus {
    pub bridge_id: wire::BridgeId,
    pub root: wire::BridgeId,
    pub root_path_cost: u32,
    /// The root port's slot ([`Member::slot`]); `None` on the root bridge.
    pub root_port: Option<usize>,
    pub topology_change: bool,
}

/// A member as the data path reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub ifindex: IfIndex,
    /// Its slot: its index in the bridge's port states and spanning tree.
    pub slot: u16,
    pub flags: MemberFlags,
}

/// One bridge as published with the configuration: its state and members.
#[derive(Clone, Debug)]
pub struct BridgeConf {
    pub br: Arc<Bridge>,
    pub members: Vec<Member>,
}

impl BridgeConf {
    /// The member whose interface is `i`.
    #[inline]
    pub fn member(&self, i: IfIndex) -> Option<&Member> {
        self.members.iter().find(|m| m.ifindex == i)
    }
}

/// What an interface is to the layer 2 switching: nothing, a bridge, or a member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum L2Role {
    #[default]
    None,
    /// The interface of bridge `b` (an index into [`Bridges::list`]).
    Bridge(u16),
    /// Member `m` of bridge `b`.
    Member { b: u16, m: u16 },
}

/// An 802.1Q VLAN interface (FreeBSD's vlan(4)): frames tagged `vid` on `parent`
/// are its frames, untagged; what it sends leaves by `parent`, tagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanConf {
    pub ifindex: IfIndex,
    pub parent: IfIndex,
    pub vid: u16,
}

/// The layer-2 interfaces of a stack (bridges and VLANs), as published with its
/// configuration.
#[derive(Clone, Debug, Default)]
pub struct Bridges {
    pub list: Vec<BridgeConf>,
    pub vlans: Vec<VlanConf>,
    /// Each interface's role, by index (empty while there is no bridge).
    role: Vec<L2Role>,
    /// Each interface's VLANs (VLAN id, VLAN interface), by index (empty while
    /// there is no VLAN).
    trunk: Vec<Vec<(u16, IfIndex)>>,
    /// Each interface's VLAN, if it is one, by index.
    vlan_of: Vec<Option<VlanConf>>,
}

impl Bridges {
    /// The role of interface `i`.
    #[inline]
    pub fn role(&self, i: IfIndex) -> L2Role {
        self.role.get(i.get()).copied().unwrap_or_default()
    }

    /// The bridge and member an interface is, if it is a member.
    #[inline]
    pub(crate) fn member_of(&self, i: IfIndex) -> Option<(&BridgeConf, usize)> {
        match self.role(i) {
            L2Role::Member { b, m } => Some((&self.list[b as usize], m as usize)),
            _ => None,
        }
    }

    /// The bridge whose interface is `i`.
    pub fn bridge_of(&self, i: IfIndex) -> Option<&BridgeConf> {
        match self.role(i) {
            L2Role::Bridge(b) => self.list.get(b as usize),
            _ => None,
        }
    }

    /// The VLANs over interface `i` (VLAN id, VLAN interface).
    #[inline]
    pub(crate) fn trunk(&self, i: IfIndex) -> &[(u16, IfIndex)] {
        self.trunk.get(i.get()).map_or(&[], |v| v.as_slice())
    }

    /// The VLAN interface `i` is, if it is one.
    #[inline]
    pub fn vlan(&self, i: IfIndex) -> Option<VlanConf> {
        self.vlan_of.get(i.get()).copied().flatten()
    }

    /// Remakes the roles after a change to the list.
    pub(crate) fn reindex(&mut self, nifs: usize) {
        self.trunk.clear();
        self.vlan_of.clear();
        if !self.vlans.is_empty() {
            self.trunk.resize(nifs, Vec::new());
            self.vlan_of.resize(nifs, None);
            for v in &self.vlans {
                if let Some(t) = self.trunk.get_mut(v.parent.get()) {
                    t.push((v.vid, v.ifindex));
                }
                if let Some(o) = self.vlan_of.get_mut(v.ifindex.get()) {
                    *o = Some(*v);
                }
            }
        }
        self.role.clear();
        if self.list.is_empty() {
            return;
        }
        self.role.resize(nifs, L2Role::None);
        for (b, bc) in self.list.iter().enumerate() {
            if let Some(r) = self.role.get_mut(bc.br.ifindex.get()) {
                *r = L2Role::Bridge(b as u16);
            }
            for (m, mb) in bc.members.iter().enumerate() {
                if let Some(r) = self.role.get_mut(mb.ifindex.get()) {
                    *r = L2Role::Member {
                        b: b as u16,
                        m: m as u16,
                    };
                }
            }
        }
    }
}

//! The IEEE 802.1D spanning tree protocol (802.1D-1998 clause 8, the protocol the
//! Linux kernel bridge runs with `stp_state 1`), as a state machine with no I/O:
//! BPDUs in ([`Stp::input`]), timers by deadline ([`Stp::tick`],
//! [`Stp::next_deadline`]), BPDUs out (the `out` vectors), and each port's state
//! (blocking, listening, learning, forwarding, disabled) for the bridge to obey.
//!
//! The procedures keep 802.1D's names and order (`root_selection`,
//! `designated_port_selection`, `port_state_selection`, `topology_change_detection`,
//! `transmit_config`, …); where the kernel bridge (`net/bridge/br_stp*.c`) differs
//! we do as it does, since it is the peer we meet: every bridge sends configuration
//! BPDUs on its designated ports each hello time, not the root alone, and a port's
//! path cost defaults to 100 (the kernel's for a link of unknown speed).
//!
//! Times are nanoseconds of the stack's clock; BPDU times are 1/256 s as on the wire.
//!
//! A port may carry settings from outside 802.1D-1998 ([`PortOptions`]): `edge`
//! and `autoedge` (FreeBSD's bridge(4) words, from RSTP's edge ports, 802.1D-2004
//! §17.13.1): an edge port forwards without listening and learning, and its
//! changes are no topology change; a BPDU heard on it makes it an ordinary port
//! again. `rootguard`: a port that must never lead to the root; a BPDU that would
//! make it the root port is refused and holds the port blocking
//! ("root-inconsistent") until such BPDUs have stopped for max age.

use wire::stp::{BridgeId, StpConfig, StpFlags, StpRepr};
use wire::EthernetAddress;

/// 802.1D's defaults (Table 8-3), in 1/256 s: max age 20 s, hello time 2 s,
/// forward delay 15 s; and the hold time, 1 s.
pub const DEFAULT_MAX_AGE: u16 = 20 * 256;
pub const DEFAULT_HELLO_TIME: u16 = 2 * 256;
pub const DEFAULT_FORWARD_DELAY: u16 = 15 * 256;
const HOLD_TIME: u16 = 256;
/// The default bridge priority.
pub const DEFAULT_PRIORITY: u16 = 0x8000;
/// The default port path cost (the Linux bridge's for a link of unknown speed).
pub const DEFAULT_PATH_COST: u32 = 100;
/// The default port priority.
pub const DEFAULT_PORT_PRIORITY: u8 = 0x80;

/// 1/256 s in nanoseconds.
fn ns(t: u16) -> u64 {
    u64::from(t) * 3_906_250
}

/// A port's state (§8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    Disabled,
    Blocking,
    Listening,
    Learning,
    Forwarding,
}

impl PortState {
    /// Frames are learned from (learning, forwarding).
    pub fn learns(self) -> bool {
        matches!(self, PortState::Learning | PortState::Forwarding)
    }
    /// Frames are forwarded to and from it.
    pub fn forwards(self) -> bool {
        self == PortState::Forwarding
    }
}

impl std::fmt::Display for PortState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PortState::Disabled => "disabled",
            PortState::Blocking => "blocking",
            PortState::Listening => "listening",
            PortState::Learning => "learning",
            PortState::Forwarding => "forwarding",
        })
    }
}

/// A port's settings beyond 802.1D-1998 (see the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortOptions {
    /// An edge port by the operator's word (`edge`): no bridge behind it.
    pub edge: bool,
    /// An edge port if it hears no BPDU while it listens (`autoedge`).
    pub autoedge: bool,
    /// Refuse BPDUs that would make the port the root port (`rootguard`).
    pub root_guard: bool,
}

/// What became of a BPDU given to [`Stp::input`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// The protocol took it (or ignored it as 802.1D says: stale, our own).
    Taken,
    /// Refused by root guard: the port is root-inconsistent (blocking) for max age.
    RootGuard,
}

/// A BPDU to send on a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StpOut {
    pub port: usize,
    pub bpdu: StpRepr,
}

/// The bridge's own timer values (§8.5.3), in 1/256 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StpTimes {
    pub max_age: u16,
    pub hello_time: u16,
    pub forward_delay: u16,
}

impl StpTimes {
    /// The times held to 802.1D's ranges (Table 8-3): max age 6-40 s, hello time
    /// 1-10 s, forward delay 4-30 s.
    pub fn held(self) -> StpTimes {
        StpTimes {
            max_age: self.max_age.clamp(6 * 256, 40 * 256),
            hello_time: self.hello_time.clamp(256, 10 * 256),
            forward_delay: self.forward_delay.clamp(4 * 256, 30 * 256),
        }
    }
}

impl Default for StpTimes {
    fn default() -> Self {
        StpTimes {
            max_age: DEFAULT_MAX_AGE,
            hello_time: DEFAULT_HELLO_TIME,
            forward_delay: DEFAULT_FORWARD_DELAY,
        }
    }
}

#[derive(Clone, Debug)]
struct Port {
    id: u16,
    path_cost: u32,
    state: PortState,
    designated_root: BridgeId,
    designated_cost: u32,
    designated_bridge: BridgeId,
    designated_port: u16,
    topology_change_ack: bool,
    config_pending: bool,
    /// The message age of the information recorded, and when it was recorded.
    info_age: u16,
    info_at: u64,
    message_age_timer: Option<u64>,
    forward_delay_timer: Option<u64>,
    hold_timer: Option<u64>,
    opts: PortOptions,
    /// Operating as an edge port now.
    oper_edge: bool,
    /// A BPDU was heard since the port was enabled.
    heard: bool,
    /// Root-inconsistent (root guard) until then.
    inconsistent_until: Option<u64>,
}

/// One bridge's spanning tree (see the module).
#[derive(Clone, Debug)]
pub struct Stp {
    bridge_id: BridgeId,
    own: StpTimes,
    designated_root: BridgeId,
    root_path_cost: u32,
    root_port: Option<usize>,
    /// The times in use: the root's, as its BPDUs carry them (§8.5.3.4-6).
    times: StpTimes,
    topology_change_detected: bool,
    topology_change: bool,
    hello_timer: Option<u64>,
    tcn_timer: Option<u64>,
    topology_change_timer: Option<u64>,
    ports: Vec<Port>,
}

impl Stp {
    /// A bridge of address `mac` and `priority` with the timer values `times` and
    /// no port yet, its hello timer started at `now` (§8.8.1).
    pub fn new(mac: EthernetAddress, priority: u16, times: StpTimes, now: u64) -> Stp {
        let id = BridgeId::new(priority, mac);
        let times = times.held();
        Stp {
            bridge_id: id,
            own: times,
            designated_root: id,
            root_path_cost: 0,
            root_port: None,
            times,
            topology_change_detected: false,
            topology_change: false,
            hello_timer: Some(now + ns(times.hello_time)),
            tcn_timer: None,
            topology_change_timer: None,
            ports: Vec::new(),
        }
    }

    /// Adds a port (disabled until [`Stp::enable_port`]); its index. Port numbers
    /// on the wire count from 1.
    pub fn add_port(&mut self, path_cost: u32) -> usize {
        let n = self.ports.len();
        let id = u16::from(DEFAULT_PORT_PRIORITY) << 8 | ((n + 1) as u16 & 0xff);
        self.ports.push(Port {
            id,
            path_cost: path_cost.max(1),
            state: PortState::Disabled,
            designated_root: self.designated_root,
            designated_cost: self.root_path_cost,
            designated_bridge: self.bridge_id,
            designated_port: id,
            topology_change_ack: false,
            config_pending: false,
            info_age: 0,
            info_at: 0,
            message_age_timer: None,
            forward_delay_timer: None,
            hold_timer: None,
            opts: PortOptions::default(),
            oper_edge: false,
            heard: false,
            inconsistent_until: None,
        });
        n
    }

    /// Sets port `p`'s edge and guard settings (see [`PortOptions`]). An enabled
    /// port made an edge before it heard a BPDU forwards at once; one whose root
    /// guard goes off leaves the root-inconsistent state.
    pub fn set_port_options(&mut self, p: usize, o: PortOptions, now: u64, out: &mut Vec<StpOut>) {
        let Some(port) = self.ports.get_mut(p) else {
            return;
        };
        if port.opts == o {
            return;
        }
        port.opts = o;
        if !o.edge && !o.autoedge {
            port.oper_edge = false;
        } else if o.edge && !port.heard && port.state != PortState::Disabled {
            port.oper_edge = true;
        }
        if !o.root_guard {
            port.inconsistent_until = None;
        }
        if port.state != PortState::Disabled {
            self.port_state_selection(now, out);
        }
    }

    /// Whether port `p` operates as an edge port now.
    pub fn port_edge(&self, p: usize) -> bool {
        self.ports.get(p).is_some_and(|p| p.oper_edge)
    }

    /// Whether port `p` is held blocking by root guard now.
    pub fn port_root_inconsistent(&self, p: usize) -> bool {
        self.ports
            .get(p)
            .is_some_and(|p| p.inconsistent_until.is_some())
    }

    pub fn bridge_id(&self) -> BridgeId {
        self.bridge_id
    }

    /// The root as this bridge knows it.
    pub fn root(&self) -> BridgeId {
        self.designated_root
    }

    pub fn root_path_cost(&self) -> u32 {
        self.root_path_cost
    }

    pub fn root_port(&self) -> Option<usize> {
        self.root_port
    }

    pub fn is_root(&self) -> bool {
        self.designated_root == self.bridge_id
    }

    pub fn port_state(&self, p: usize) -> PortState {
        self.ports.get(p).map_or(PortState::Disabled, |p| p.state)
    }

    /// A topology change is under way: learned addresses should age out after the
    /// forward delay instead of the ageing time (§8.3.5).
    pub fn topology_change(&self) -> bool {
        self.topology_change
    }

    /// The forward delay in use, in 1/256 s (the ageing time during a topology
    /// change).
    pub fn forward_delay(&self) -> u16 {
        self.times.forward_delay
    }

    /// The port's link came up (§8.8.2: initialisation of the port).
    pub fn enable_port(&mut self, p: usize, now: u64, out: &mut Vec<StpOut>) {
        if p >= self.ports.len() || self.ports[p].state != PortState::Disabled {
            return;
        }
        self.become_designated_port(p);
        self.reset_port(p, PortState::Blocking);
        self.ports[p].oper_edge = self.ports[p].opts.edge;
        self.port_state_selection(now, out);
        self.config_bpdu_generation(now, out);
    }

    /// The port's link went down, or it left the bridge (§8.8.3).
    pub fn disable_port(&mut self, p: usize, now: u64, out: &mut Vec<StpOut>) {
        if p >= self.ports.len() || self.ports[p].state == PortState::Disabled {
            return;
        }
        let was_root = self.is_root();
        self.become_designated_port(p);
        self.reset_port(p, PortState::Disabled);
        self.configuration_update();
        self.port_state_selection(now, out);
        if self.is_root() && !was_root {
            self.become_root_bridge(now, out);
        }
    }

    /// Port `p` in `state`, its flags cleared and its timers stopped (what enabling
    /// and disabling a port share, §8.8.2-3).
    fn reset_port(&mut self, p: usize, state: PortState) {
        let port = &mut self.ports[p];
        port.state = state;
        port.topology_change_ack = false;
        port.config_pending = false;
        port.message_age_timer = None;
        port.forward_delay_timer = None;
        port.hold_timer = None;
        port.oper_edge = false;
        port.heard = false;
        port.inconsistent_until = None;
    }

    /// A BPDU received on port `p` (§8.7.1, §8.7.2). RST BPDUs are read as
    /// configuration BPDUs, as an 802.1D bridge reads them.
    pub fn input(&mut self, p: usize, bpdu: &StpRepr, now: u64, out: &mut Vec<StpOut>) -> Received {
        if p >= self.ports.len() || self.ports[p].state == PortState::Disabled {
            return Received::Taken;
        }
        // 802.1D-2004 §17.19.17: a BPDU on an edge port means a bridge is there.
        let port = &mut self.ports[p];
        port.heard = true;
        if port.oper_edge {
            port.oper_edge = false;
        }
        let Some(c) = bpdu.config() else {
            self.received_tcn_bpdu(p, now, out);
            return Received::Taken;
        };
        // Our own BPDU looped back to the port that sent it (§9.3.4 a).
        if c.bridge_id == self.bridge_id && c.port_id == self.ports[p].id {
            return Received::Taken;
        }
        // The max age held to its range, as the message age timer is armed with
        // it: one value for the timer and for `transmit_config`'s test.
        if c.message_age >= StpTimes::of(c).held().max_age {
            return Received::Taken;
        }
        if self.ports[p].opts.root_guard && self.would_be_root_port(p, c) {
            // Root guard (as Cisco's): the port stays designated, blocking, until
            // such BPDUs have stopped for max age; it is a leaf of the tree by the
            // operator's word, so its blocking is no topology change.
            self.ports[p].inconsistent_until = Some(now + ns(self.times.max_age));
            if self.is_designated_port(p) {
                self.port_state_selection(now, out);
            } else {
                // Root guard set on the root port: its information goes.
                self.message_age_timer_expiry(p, now, out);
            }
            return Received::RootGuard;
        }
        self.received_config_bpdu(p, c, now, out);
        Received::Taken
    }

    /// Whether the information of `c`, recorded on port `p`, would make `p` the
    /// root port (`root_selection`'s order, §8.6.8).
    fn would_be_root_port(&self, p: usize, c: &StpConfig) -> bool {
        if c.root_id >= self.bridge_id {
            return false;
        }
        let Some(r) = self.root_port else {
            return true;
        };
        if r == p {
            return true;
        }
        let port = &self.ports[p];
        let rp = &self.ports[r];
        let new = (
            c.root_id,
            c.root_path_cost.saturating_add(port.path_cost),
            c.bridge_id,
            c.port_id,
            port.id,
        );
        let cur = (
            rp.designated_root,
            rp.designated_cost.saturating_add(rp.path_cost),
            rp.designated_bridge,
            rp.designated_port,
            rp.id,
        );
        new < cur
    }

    /// When [`Stp::tick`] next has work, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        let bridge = [self.hello_timer, self.tcn_timer, self.topology_change_timer];
        let ports = self.ports.iter().flat_map(|p| {
            [
                p.message_age_timer,
                p.forward_delay_timer,
                p.hold_timer,
                p.inconsistent_until,
            ]
        });
        bridge.into_iter().chain(ports).flatten().min()
    }

    /// Runs the timers due at `now` (§8.7.3-8.7.9).
    pub fn tick(&mut self, now: u64, out: &mut Vec<StpOut>) {
        let due = |t: Option<u64>| t.is_some_and(|d| d <= now);
        if due(self.hello_timer) {
            self.config_bpdu_generation(now, out);
            self.hello_timer = Some(now + ns(self.own.hello_time));
        }
        if due(self.tcn_timer) {
            self.transmit_tcn(out);
            self.tcn_timer = Some(now + ns(self.own.hello_time));
        }
        if due(self.topology_change_timer) {
            self.topology_change_timer = None;
            self.topology_change_detected = false;
            self.topology_change = false;
        }
        for p in 0..self.ports.len() {
            if due(self.ports[p].message_age_timer) {
                self.ports[p].message_age_timer = None;
                self.message_age_timer_expiry(p, now, out);
            }
            if due(self.ports[p].forward_delay_timer) {
                self.ports[p].forward_delay_timer = None;
                self.forward_delay_timer_expiry(p, now, out);
            }
            if due(self.ports[p].hold_timer) {
                self.ports[p].hold_timer = None;
                if self.ports[p].config_pending {
                    self.transmit_config(p, now, out);
                }
            }
            if due(self.ports[p].inconsistent_until) {
                self.ports[p].inconsistent_until = None;
                self.port_state_selection(now, out);
            }
        }
    }

    // ---- 802.1D's procedures (§8.6) ------------------------------------------------

    fn is_designated_port(&self, p: usize) -> bool {
        let port = &self.ports[p];
        port.designated_bridge == self.bridge_id && port.designated_port == port.id
    }

    fn received_config_bpdu(&mut self, p: usize, c: &StpConfig, now: u64, out: &mut Vec<StpOut>) {
        let was_root = self.is_root();
        if self.supersedes_port_info(p, c) {
            self.record_config_information(p, c, now);
            self.configuration_update();
            self.port_state_selection(now, out);
            // 802.1D stops the hello timer of a bridge that stops being the root;
            // the Linux bridge keeps it (see the module), and so do we.
            if !self.is_root() && was_root && self.topology_change_detected {
                self.topology_change_timer = None;
                self.transmit_tcn(out);
                self.tcn_timer = Some(now + ns(self.own.hello_time));
            }
            if Some(p) == self.root_port {
                self.record_config_timeout_values(c);
                self.config_bpdu_generation(now, out);
                if c.flags.contains(StpFlags::TCA) {
                    self.topology_change_detected = false;
                    self.tcn_timer = None;
                }
            }
        } else if self.is_designated_port(p) {
            self.transmit_config(p, now, out);
        }
    }

    fn received_tcn_bpdu(&mut self, p: usize, now: u64, out: &mut Vec<StpOut>) {
        if self.is_designated_port(p) {
            self.topology_change_detection(now, out);
            self.ports[p].topology_change_ack = true;
            self.transmit_config(p, now, out);
        }
    }

    fn supersedes_port_info(&self, p: usize, c: &StpConfig) -> bool {
        let port = &self.ports[p];
        use std::cmp::Ordering::*;
        match c.root_id.cmp(&port.designated_root) {
            Less => return true,
            Greater => return false,
            Equal => {}
        }
        match c.root_path_cost.cmp(&port.designated_cost) {
            Less => return true,
            Greater => return false,
            Equal => {}
        }
        match c.bridge_id.cmp(&port.designated_bridge) {
            Less => return true,
            Greater => return false,
            Equal => {}
        }
        c.bridge_id != self.bridge_id || c.port_id <= port.designated_port
    }

    fn record_config_information(&mut self, p: usize, c: &StpConfig, now: u64) {
        let port = &mut self.ports[p];
        port.designated_root = c.root_id;
        port.designated_cost = c.root_path_cost;
        port.designated_bridge = c.bridge_id;
        port.designated_port = c.port_id;
        port.info_age = c.message_age;
        port.info_at = now;
        // Armed with the max age held to its range, the one `transmit_config`
        // compares the message age with once the port is the root port: armed with
        // the BPDU's own (up to 255 s) the information outlived the 40 s after
        // which we refuse to relay it, and the bridge fell silent for minutes while
        // its neighbours aged us out and unblocked (a loop). The Linux bridge arms
        // it with the one max age it uses for both (`br_record_config_information`).
        let max_age = StpTimes::of(c).held().max_age;
        port.message_age_timer = Some(now + ns(max_age.saturating_sub(c.message_age)));
    }

    /// The root's times, held to 802.1D's ranges (Table 8-3: max age 6-40 s, hello
    /// time 1-10 s, forward delay 4-30 s): a BPDU claiming a forward delay of 0 would
    /// otherwise open every port at once, and one of 0 hello time spin the timers.
    fn record_config_timeout_values(&mut self, c: &StpConfig) {
        self.times = StpTimes::of(c).held();
        self.topology_change = c.flags.contains(StpFlags::TC);
    }

    fn config_bpdu_generation(&mut self, now: u64, out: &mut Vec<StpOut>) {
        for p in 0..self.ports.len() {
            if self.ports[p].state != PortState::Disabled && self.is_designated_port(p) {
                self.transmit_config(p, now, out);
            }
        }
    }

    fn transmit_config(&mut self, p: usize, now: u64, out: &mut Vec<StpOut>) {
        if self.ports[p].hold_timer.is_some() {
            self.ports[p].config_pending = true;
            return;
        }
        let message_age = match self.root_port {
            None => 0,
            Some(r) => {
                let root = &self.ports[r];
                let since = now.saturating_sub(root.info_at) / ns(1);
                // The age of the root's information here, plus the least increment.
                root.info_age
                    .saturating_add(u16::try_from(since).unwrap_or(u16::MAX))
                    .saturating_add(1)
            }
        };
        if message_age >= self.times.max_age {
            return;
        }
        let mut flags = StpFlags::EMPTY;
        flags.set(StpFlags::TC, self.topology_change);
        flags.set(StpFlags::TCA, self.ports[p].topology_change_ack);
        out.push(StpOut {
            port: p,
            bpdu: StpRepr::Config(StpConfig {
                flags,
                root_id: self.designated_root,
                root_path_cost: self.root_path_cost,
                bridge_id: self.bridge_id,
                port_id: self.ports[p].id,
                message_age,
                max_age: self.times.max_age,
                hello_time: self.times.hello_time,
                forward_delay: self.times.forward_delay,
            }),
        });
        let port = &mut self.ports[p];
        port.topology_change_ack = false;
        port.config_pending = false;
        port.hold_timer = Some(now + ns(HOLD_TIME));
    }

    fn transmit_tcn(&mut self, out: &mut Vec<StpOut>) {
        if let Some(r) = self.root_port {
            out.push(StpOut {
                port: r,
                bpdu: StpRepr::Tcn,
            });
        }
    }

    fn configuration_update(&mut self) {
        self.root_selection();
        self.designated_port_selection();
    }

    /// Whether port `p` is a better way to the root than the root port `r` so far.
    fn better_root_port(&self, p: usize, r: Option<usize>) -> bool {
        let a = &self.ports[p];
        if self.is_designated_port(p)
            || a.state == PortState::Disabled
            || a.designated_root >= self.bridge_id
        {
            return false;
        }
        let Some(r) = r else { return true };
        let b = &self.ports[r];
        let key = |x: &Port| {
            (
                x.designated_root,
                x.designated_cost.saturating_add(x.path_cost),
                x.designated_bridge,
                x.designated_port,
                x.id,
            )
        };
        key(a) < key(b)
    }

    fn root_selection(&mut self) {
        let mut root = None;
        for p in 0..self.ports.len() {
            if self.better_root_port(p, root) {
                root = Some(p);
            }
        }
        self.root_port = root;
        match root {
            None => {
                self.designated_root = self.bridge_id;
                self.root_path_cost = 0;
            }
            Some(r) => {
                let port = &self.ports[r];
                self.designated_root = port.designated_root;
                self.root_path_cost = port.designated_cost.saturating_add(port.path_cost);
            }
        }
    }

    fn designated_port_selection(&mut self) {
        for p in 0..self.ports.len() {
            if self.ports[p].state != PortState::Disabled && self.should_become_designated(p) {
                self.become_designated_port(p);
            }
        }
    }

    fn should_become_designated(&self, p: usize) -> bool {
        if self.is_designated_port(p) {
            return true;
        }
        let port = &self.ports[p];
        if self.designated_root != port.designated_root {
            return true;
        }
        use std::cmp::Ordering::*;
        match self.root_path_cost.cmp(&port.designated_cost) {
            Less => return true,
            Greater => return false,
            Equal => {}
        }
        match self.bridge_id.cmp(&port.designated_bridge) {
            Less => return true,
            Greater => return false,
            Equal => {}
        }
        port.id < port.designated_port
    }

    fn become_designated_port(&mut self, p: usize) {
        let (root, cost, id) = (self.designated_root, self.root_path_cost, self.bridge_id);
        let port = &mut self.ports[p];
        port.designated_root = root;
        port.designated_cost = cost;
        port.designated_bridge = id;
        port.designated_port = port.id;
    }

    fn port_state_selection(&mut self, now: u64, out: &mut Vec<StpOut>) {
        let mut tc = false;
        for p in 0..self.ports.len() {
            if self.ports[p].state == PortState::Disabled {
                continue;
            }
            if Some(p) == self.root_port {
                self.ports[p].config_pending = false;
                self.ports[p].topology_change_ack = false;
                self.make_forwarding(p, now);
            } else if self.is_designated_port(p) {
                self.ports[p].message_age_timer = None;
                if self.ports[p].inconsistent_until.is_some() {
                    // Root guard holds it (see `input`): no topology change.
                    self.make_blocking(p);
                } else {
                    self.make_forwarding(p, now);
                }
            } else {
                self.ports[p].config_pending = false;
                self.ports[p].topology_change_ack = false;
                tc |= self.make_blocking(p);
            }
        }
        if tc {
            self.topology_change_detection(now, out);
        }
    }

    fn make_forwarding(&mut self, p: usize, now: u64) {
        let port = &mut self.ports[p];
        if port.oper_edge && port.state != PortState::Forwarding {
            // 802.1D-2004 §17.29.3: an edge port goes to forwarding at once.
            port.state = PortState::Forwarding;
            port.forward_delay_timer = None;
        } else if port.state == PortState::Blocking {
            port.state = PortState::Listening;
            port.forward_delay_timer = Some(now + ns(self.times.forward_delay));
        }
    }

    /// Blocks port `p`; whether that was a topology change (it had been learning or
    /// forwarding).
    fn make_blocking(&mut self, p: usize) -> bool {
        let port = &mut self.ports[p];
        if matches!(port.state, PortState::Disabled | PortState::Blocking) {
            return false;
        }
        // An edge port's changes are no topology change (802.1D-2004 §17.19.18).
        let tc =
            matches!(port.state, PortState::Forwarding | PortState::Learning) && !port.oper_edge;
        port.state = PortState::Blocking;
        port.forward_delay_timer = None;
        tc
    }

    fn topology_change_detection(&mut self, now: u64, out: &mut Vec<StpOut>) {
        if self.is_root() {
            self.topology_change = true;
            self.topology_change_timer =
                Some(now + ns(self.own.max_age) + ns(self.own.forward_delay));
        } else if !self.topology_change_detected {
            self.transmit_tcn(out);
            self.tcn_timer = Some(now + ns(self.own.hello_time));
        }
        self.topology_change_detected = true;
    }

    fn message_age_timer_expiry(&mut self, p: usize, now: u64, out: &mut Vec<StpOut>) {
        if self.is_designated_port(p) {
            return;
        }
        let was_root = self.is_root();
        self.become_designated_port(p);
        self.configuration_update();
        self.port_state_selection(now, out);
        if self.is_root() && !was_root {
            self.become_root_bridge(now, out);
        }
    }

    fn become_root_bridge(&mut self, now: u64, out: &mut Vec<StpOut>) {
        self.times = self.own;
        self.topology_change_detection(now, out);
        self.tcn_timer = None;
        self.config_bpdu_generation(now, out);
        self.hello_timer = Some(now + ns(self.own.hello_time));
    }

    fn forward_delay_timer_expiry(&mut self, p: usize, now: u64, out: &mut Vec<StpOut>) {
        match self.ports[p].state {
            PortState::Listening => {
                let quiet = self.ports[p].opts.autoedge && !self.ports[p].heard;
                if quiet && self.is_designated_port(p) {
                    // `autoedge`: a forward delay of listening heard no bridge, so
                    // the tree's information has had its time to arrive (what
                    // listening is for); the port skips learning as an edge.
                    let port = &mut self.ports[p];
                    port.oper_edge = true;
                    port.state = PortState::Forwarding;
                } else {
                    self.ports[p].state = PortState::Learning;
                    self.ports[p].forward_delay_timer = Some(now + ns(self.times.forward_delay));
                }
            }
            PortState::Learning => {
                self.ports[p].state = PortState::Forwarding;
                if !self.ports[p].oper_edge
                    && (0..self.ports.len()).any(|q| self.is_designated_port(q))
                {
                    self.topology_change_detection(now, out);
                }
            }
            _ => {}
        }
    }
}

impl StpTimes {
    /// The times a BPDU carries.
    fn of(c: &StpConfig) -> StpTimes {
        StpTimes {
            max_age: c.max_age,
            hello_time: c.hello_time,
            forward_delay: c.forward_delay,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    /// Bridges joined by point-to-point links (bridge, port) – (bridge, port), run in
    /// virtual time: every BPDU a bridge sends reaches the other end of its link.
    /// A link: (bridge, port) at each end, and whether it is up.
    type Link = ((usize, usize), (usize, usize), bool);

    struct Net {
        bridges: Vec<Stp>,
        links: Vec<Link>,
        now: u64,
    }

    impl Net {
        fn new(n: usize) -> Net {
            let bridges = (0..n)
                .map(|i| {
                    let mac = EthernetAddress([0x02, 0, 0, 0, 0, 0x10 + i as u8]);
                    Stp::new(mac, DEFAULT_PRIORITY, StpTimes::default(), 0)
                })
                .collect();
            Net {
                bridges,
                links: Vec::new(),
                now: 0,
            }
        }

        fn link(&mut self, a: usize, b: usize) -> usize {
            let pa = self.bridges[a].add_port(DEFAULT_PATH_COST);
            let pb = self.bridges[b].add_port(DEFAULT_PATH_COST);
            self.links.push(((a, pa), (b, pb), true));
            let mut out = Vec::new();
            self.bridges[a].enable_port(pa, 0, &mut out);
            self.deliver(a, out);
            let mut out = Vec::new();
            self.bridges[b].enable_port(pb, 0, &mut out);
            self.deliver(b, out);
            self.links.len() - 1
        }

        fn cut(&mut self, l: usize) {
            let ((a, pa), (b, pb), _) = self.links[l];
            self.links[l].2 = false;
            let mut out = Vec::new();
            self.bridges[a].disable_port(pa, self.now, &mut out);
            self.deliver(a, out);
            let mut out = Vec::new();
            self.bridges[b].disable_port(pb, self.now, &mut out);
            self.deliver(b, out);
        }

        fn deliver(&mut self, from: usize, out: Vec<StpOut>) {
            let mut queue: Vec<(usize, StpOut)> = out.into_iter().map(|o| (from, o)).collect();
            let mut n = 0;
            while let Some((b, o)) = queue.pop() {
                n += 1;
                assert!(n < 10_000, "a BPDU storm");
                let peer = self.links.iter().find_map(|&(x, y, up)| {
                    if !up {
                        None
                    } else if x == (b, o.port) {
                        Some(y)
                    } else if y == (b, o.port) {
                        Some(x)
                    } else {
                        None
                    }
                });
                if let Some((pb, pp)) = peer {
                    let mut more = Vec::new();
                    self.bridges[pb].input(pp, &o.bpdu, self.now, &mut more);
                    queue.extend(more.into_iter().map(|m| (pb, m)));
                }
            }
        }

        /// Runs `secs` of virtual time, a tick every 100 ms.
        fn run(&mut self, secs: u64) {
            let end = self.now + secs * SEC;
            while self.now < end {
                self.now += SEC / 10;
                for b in 0..self.bridges.len() {
                    let mut out = Vec::new();
                    self.bridges[b].tick(self.now, &mut out);
                    self.deliver(b, out);
                }
            }
        }

        fn states(&self) -> Vec<PortState> {
            self.links
                .iter()
                .flat_map(|&((a, pa), (b, pb), _)| {
                    [
                        self.bridges[a].port_state(pa),
                        self.bridges[b].port_state(pb),
                    ]
                })
                .collect()
        }
    }

    #[test]
    fn a_loop_of_three_bridges_blocks_one_port_and_reconverges_when_a_link_goes() {
        let mut n = Net::new(3);
        let l01 = n.link(0, 1);
        let _l12 = n.link(1, 2);
        let l20 = n.link(2, 0);
        n.run(40);
        // Bridge 0 has the lowest address: the root, on every bridge.
        for b in &n.bridges {
            assert_eq!(b.root(), n.bridges[0].bridge_id());
        }
        assert!(n.bridges[0].is_root());
        let s = n.states();
        let blocked = s.iter().filter(|&&x| x == PortState::Blocking).count();
        let forwarding = s.iter().filter(|&&x| x == PortState::Forwarding).count();
        assert_eq!((blocked, forwarding), (1, 5), "{s:?}");
        // The link between the two non-root bridges holds the blocked port, on the
        // bridge with the higher identifier (bridge 2).
        let (_, p21) = n.links[1].1;
        assert_eq!(n.bridges[2].port_state(p21), PortState::Blocking);
        assert_eq!(n.bridges[1].root_path_cost(), DEFAULT_PATH_COST);
        // Cut the root's link to bridge 2: bridge 2's blocked port must take over,
        // after max age at most plus twice the forward delay.
        n.cut(l20);
        n.run(20 + 2 * 15 + 2);
        assert_eq!(n.bridges[2].port_state(p21), PortState::Forwarding);
        assert_eq!(n.bridges[2].root(), n.bridges[0].bridge_id());
        assert_eq!(n.bridges[2].root_path_cost(), 2 * DEFAULT_PATH_COST);
        // The tree is whole: every up link forwards at both ends.
        for (l, &((a, pa), (b, pb), up)) in n.links.iter().enumerate() {
            if up {
                assert!(n.bridges[a].port_state(pa).forwards(), "link {l}");
                assert!(n.bridges[b].port_state(pb).forwards(), "link {l}");
            }
        }
        // A topology change was flagged at the root and spread.
        assert!(n.bridges[0].topology_change());
        // Cut the root off entirely: 1 and 2 elect bridge 1.
        n.cut(l01);
        n.run(20 + 2 * 15 + 2);
        assert!(n.bridges[1].is_root());
        assert_eq!(n.bridges[2].root(), n.bridges[1].bridge_id());
        assert!(n.bridges[2].port_state(p21).forwards());
    }

    #[test]
    fn a_port_that_stops_forwarding_tells_the_root_at_once() {
        // 0 — 1 — 2, settled, the root's topology change over.
        let mut n = Net::new(3);
        n.link(0, 1);
        n.link(1, 2);
        n.run(80);
        assert!(!n.bridges[0].topology_change());
        let (_, p21) = n.links[1].1;
        assert!(n.bridges[2].port_state(p21).forwards());
        // A direct link to the root: once the root answers on it (its hold time
        // past), bridge 2's port towards 1 stops being its root port and blocks, and
        // its TCN reaches the root then, not a hello time later.
        n.link(0, 2);
        n.run(2);
        assert_eq!(n.bridges[2].port_state(p21), PortState::Blocking);
        assert!(n.bridges[0].topology_change());
    }

    #[test]
    fn a_port_passes_listening_and_learning_before_it_forwards() {
        let mut n = Net::new(2);
        n.link(0, 1);
        assert_eq!(n.bridges[1].port_state(0), PortState::Listening);
        n.run(14);
        assert_eq!(n.bridges[1].port_state(0), PortState::Listening);
        n.run(2);
        assert_eq!(n.bridges[1].port_state(0), PortState::Learning);
        assert!(n.bridges[1].port_state(0).learns());
        n.run(15);
        assert_eq!(n.bridges[1].port_state(0), PortState::Forwarding);
    }

    #[test]
    fn a_forward_delay_of_zero_is_held_to_four_seconds() {
        let mut n = Net::new(2);
        n.bridges[0] = Stp::new(
            EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
            DEFAULT_PRIORITY,
            StpTimes {
                forward_delay: 0,
                ..StpTimes::default()
            },
            0,
        );
        assert_eq!(n.bridges[0].forward_delay(), 4 * 256);
        n.link(0, 1);
        n.run(1);
        // Bridge 1 takes the root's times, held to the range, not a zero.
        assert_eq!(n.bridges[1].root(), n.bridges[0].bridge_id());
        assert_eq!(n.bridges[1].forward_delay(), 4 * 256);
        // The root's own port listens 4 s, then learns.
        assert_eq!(n.bridges[0].port_state(0), PortState::Listening);
        n.run(4);
        assert_eq!(n.bridges[0].port_state(0), PortState::Learning);
    }

    #[test]
    fn a_bridge_ignores_its_own_bpdu_and_stale_ones() {
        let mut b = Stp::new(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            DEFAULT_PRIORITY,
            StpTimes::default(),
            0,
        );
        let p = b.add_port(DEFAULT_PATH_COST);
        let mut out = Vec::new();
        b.enable_port(p, 0, &mut out);
        let own = out.iter().find(|o| o.port == p).unwrap().bpdu;
        let mut more = Vec::new();
        b.input(p, &own, 1, &mut more);
        assert!(b.is_root());
        // A better root whose information is as old as its max age is ignored.
        let better = BridgeId::new(0x1000, EthernetAddress([2, 0, 0, 0, 0, 9]));
        let stale = StpConfig {
            flags: StpFlags::EMPTY,
            root_id: better,
            root_path_cost: 0,
            bridge_id: better,
            port_id: 0x8001,
            message_age: DEFAULT_MAX_AGE,
            max_age: DEFAULT_MAX_AGE,
            hello_time: DEFAULT_HELLO_TIME,
            forward_delay: DEFAULT_FORWARD_DELAY,
        };
        b.input(p, &StpRepr::Config(stale), 2, &mut more);
        assert!(b.is_root());
        // A fresh one makes it the root port; its information ages out without hellos.
        let fresh = StpRepr::Config(StpConfig {
            message_age: 256,
            ..stale
        });
        b.input(p, &fresh, 3, &mut more);
        assert_eq!((b.root(), b.root_port()), (better, Some(p)));
        let mut t = 3;
        while t < 25 * SEC {
            t += SEC / 10;
            b.tick(t, &mut more);
        }
        assert!(b.is_root(), "max age passed: root again");
        assert!(b.next_deadline().is_some());
    }

    fn one_port(opts: PortOptions) -> Stp {
        let mut b = Stp::new(
            EthernetAddress([2, 0, 0, 0, 0, 5]),
            DEFAULT_PRIORITY,
            StpTimes::default(),
            0,
        );
        let p = b.add_port(DEFAULT_PATH_COST);
        let mut out = Vec::new();
        b.set_port_options(p, opts, 0, &mut out);
        b.enable_port(p, 0, &mut out);
        b
    }

    fn superior(now_age: u16) -> StpRepr {
        let better = BridgeId::new(0x1000, EthernetAddress([2, 0, 0, 0, 0, 9]));
        StpRepr::Config(StpConfig {
            flags: StpFlags::EMPTY,
            root_id: better,
            root_path_cost: 0,
            bridge_id: better,
            port_id: 0x8001,
            message_age: now_age,
            max_age: DEFAULT_MAX_AGE,
            hello_time: DEFAULT_HELLO_TIME,
            forward_delay: DEFAULT_FORWARD_DELAY,
        })
    }

    #[test]
    fn an_edge_port_forwards_at_once_until_it_hears_a_bpdu() {
        let b = one_port(PortOptions {
            edge: true,
            ..PortOptions::default()
        });
        assert_eq!(b.port_state(0), PortState::Forwarding);
        assert!(b.port_edge(0) && !b.topology_change());
        let mut b = b;
        let mut out = Vec::new();
        b.input(0, &superior(0), SEC, &mut out);
        assert!(!b.port_edge(0), "a bridge is there");
        assert_eq!(b.root_port(), Some(0));
    }

    #[test]
    fn an_autoedge_port_that_hears_nothing_skips_learning() {
        let mut b = one_port(PortOptions {
            autoedge: true,
            ..PortOptions::default()
        });
        assert_eq!(b.port_state(0), PortState::Listening);
        let mut out = Vec::new();
        b.tick(15 * SEC, &mut out);
        assert_eq!(b.port_state(0), PortState::Forwarding);
        assert!(b.port_edge(0));
        assert!(
            !b.topology_change(),
            "an edge's change is no topology change"
        );
        // One that hears a BPDU while listening learns as any port.
        let mut b = one_port(PortOptions {
            autoedge: true,
            ..PortOptions::default()
        });
        b.input(0, &StpRepr::Tcn, SEC, &mut out);
        b.tick(15 * SEC, &mut out);
        assert_eq!(b.port_state(0), PortState::Learning);
    }

    #[test]
    fn root_guard_holds_a_port_blocking_while_superior_bpdus_come() {
        let mut b = one_port(PortOptions {
            root_guard: true,
            ..PortOptions::default()
        });
        let mut out = Vec::new();
        let mut t = 0;
        // Forwarding, and the topology change that made it over.
        while t < 80 * SEC {
            t += SEC / 10;
            b.tick(t, &mut out);
        }
        assert_eq!(b.port_state(0), PortState::Forwarding);
        assert!(!b.topology_change());
        for _ in 0..10 {
            assert_eq!(b.input(0, &superior(0), t, &mut out), Received::RootGuard);
            assert!(b.is_root(), "the superior root is refused");
            assert_eq!(b.port_state(0), PortState::Blocking);
            assert!(b.port_root_inconsistent(0));
            t += 2 * SEC;
            b.tick(t, &mut out);
        }
        assert!(
            !b.topology_change(),
            "root guard's block is no topology change"
        );
        // Quiet for max age after the last (2 s before): listening again, then
        // forwarding.
        let quiet = t;
        while t < quiet + 17 * SEC {
            t += SEC / 10;
            b.tick(t, &mut out);
        }
        assert!(b.port_root_inconsistent(0));
        while t < quiet + 19 * SEC {
            t += SEC / 10;
            b.tick(t, &mut out);
        }
        assert!(!b.port_root_inconsistent(0));
        assert_eq!(b.port_state(0), PortState::Listening);
        while t < quiet + 52 * SEC {
            t += SEC / 10;
            b.tick(t, &mut out);
        }
        assert_eq!(b.port_state(0), PortState::Forwarding);
    }
}

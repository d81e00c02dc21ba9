//! Next-hop objects and route flags (FreeBSD 13's `nhop_object`, with the flags of
//! `route(4)`).
//!
//! A route in the FIB points at a next hop by index; a next hop says where a packet
//! goes (interface, gateway, MTU) and carries the resolved L2 rewrite: the gateway's
//! MAC, written in place by the interface's neighbour table when it learns or loses
//! the address. A forwarded packet therefore costs one longest-prefix match and one
//! next-hop read, with no lock and no reference count touched.
//!
//! Next hops are shared by every route with the same interface, gateway, MTU and kind,
//! live as long as a route uses them, and keep their index while they live, so a
//! flow table may cache an index and validate it with [`NextHop::generation`].

use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Route flags in the BSD spirit (`RTF_*` of `route(4)`; the values are FreeBSD's,
/// `CONNECTED` is NetBSD's).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RtFlags(pub u32);

impl RtFlags {
    /// The route is usable.
    pub const UP: RtFlags = RtFlags(0x1);
    /// The destination is reached through a gateway.
    pub const GATEWAY: RtFlags = RtFlags(0x2);
    /// A host route (a /32 or /128).
    pub const HOST: RtFlags = RtFlags(0x4);
    /// Packets are dropped with an ICMP unreachable.
    pub const REJECT: RtFlags = RtFlags(0x8);
    /// Created dynamically (by a redirect).
    pub const DYNAMIC: RtFlags = RtFlags(0x10);
    /// Modified dynamically (by a redirect).
    pub const MODIFIED: RtFlags = RtFlags(0x20);
    /// A neighbour (link-layer) entry: used on neighbour change messages.
    pub const LLINFO: RtFlags = RtFlags(0x400);
    /// Added by hand (`route add`, `--route`).
    pub const STATIC: RtFlags = RtFlags(0x800);
    /// Packets are dropped silently.
    pub const BLACKHOLE: RtFlags = RtFlags(0x1000);
    /// A reject route answers "administratively prohibited" rather than
    /// unreachable (Linux's `prohibit`; FreeBSD's `RTF_PROTO1` slot).
    pub const PROHIBIT: RtFlags = RtFlags(0x8000);
    /// Installed by a routing daemon through the Forwarding Plane Manager (FreeBSD's
    /// `RTF_PROTO2`, `2` in `netstat -r`): such routes are the daemon's to replace,
    /// withdraw and resynchronise; the others it does not touch.
    pub const PROTO2: RtFlags = RtFlags(0x4000);
    /// The route to a network an interface address is in (NetBSD's `RTF_CONNECTED`).
    pub const CONNECTED: RtFlags = RtFlags(0x0010_0000);

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: RtFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag of `other` is set.
    pub const fn intersects(self, other: RtFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// `self | other`.
    #[must_use]
    pub const fn with(self, other: RtFlags) -> RtFlags {
        RtFlags(self.0 | other.0)
    }

    /// `self & !other`.
    #[must_use]
    pub const fn without(self, other: RtFlags) -> RtFlags {
        RtFlags(self.0 & !other.0)
    }
}

impl std::ops::BitOr for RtFlags {
    type Output = RtFlags;
    fn bitor(self, rhs: RtFlags) -> RtFlags {
        self.with(rhs)
    }
}

/// The letters of `netstat -r`: `U` up, `G` gateway, `H` host, `R` reject, `D`
/// dynamic, `M` modified, `L` link info, `S` static, `B` blackhole, `P` prohibit,
/// `C` connected, `2` from a routing daemon.
impl fmt::Display for RtFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LETTERS: [(RtFlags, char); 12] = [
            (RtFlags::UP, 'U'),
            (RtFlags::GATEWAY, 'G'),
            (RtFlags::HOST, 'H'),
            (RtFlags::REJECT, 'R'),
            (RtFlags::DYNAMIC, 'D'),
            (RtFlags::MODIFIED, 'M'),
            (RtFlags::LLINFO, 'L'),
            (RtFlags::STATIC, 'S'),
            (RtFlags::BLACKHOLE, 'B'),
            (RtFlags::PROHIBIT, 'P'),
            (RtFlags::CONNECTED, 'C'),
            (RtFlags::PROTO2, '2'),
        ];
        for (flag, c) in LETTERS {
            if self.contains(flag) {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for RtFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RtFlags({self})")
    }
}

/// What a next hop does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NhKind {
    /// Send it out of the interface, to the gateway or (when none) to the
    /// destination itself.
    Forward,
    /// Drop it silently.
    Blackhole,
    /// Drop it and answer "unreachable".
    Reject,
    /// Drop it and answer "administratively prohibited".
    Prohibit,
    /// The network or broadcast address of a subnet on the interface's link: a
    /// directed broadcast (Linux's `RTN_BROADCAST`; VPP installs these with the
    /// interface address). Not a route anyone adds: the FIB holds one for each
    /// such address of a connected route ([`crate::Rib::compile`]). Forwarded only
    /// where directed broadcasts are (RFC 2644), then as a link broadcast; our own
    /// datagrams to it leave as one.
    Broadcast,
}

/// What identifies a next hop: routes with equal keys share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NhKey {
    pub kind: NhKind,
    pub ifindex: u32,
    pub gateway: Option<IpAddr>,
    /// 0: the interface's MTU.
    pub mtu: u32,
}

const L2_VALID: u64 = 1 << 63;

/// A next-hop object.
#[derive(Debug)]
pub struct NextHop {
    /// Its index in the FIB's next-hop table (stable while it lives).
    pub index: u32,
    pub kind: NhKind,
    /// The outgoing interface (its index in the stack).
    pub ifindex: u32,
    /// The gateway; `None` for a connected route, where the destination is the
    /// neighbour.
    pub gateway: Option<IpAddr>,
    /// A route MTU below the interface's (`route add -mtu`); 0 when none.
    pub mtu: u32,
    generation: AtomicU32,
    alive: AtomicBool,
    /// The gateway's MAC in the low 48 bits, [`L2_VALID`] when resolved.
    l2: AtomicU64,
    /// Until when the rewrite may be used without asking the neighbour table, in the
    /// caller's clock (nanoseconds).
    l2_until: AtomicU64,
}

impl NextHop {
    pub(crate) fn new(index: u32, key: NhKey) -> NextHop {
        NextHop {
            index,
            kind: key.kind,
            ifindex: key.ifindex,
            gateway: key.gateway,
            mtu: key.mtu,
            generation: AtomicU32::new(1),
            alive: AtomicBool::new(true),
            l2: AtomicU64::new(0),
            l2_until: AtomicU64::new(0),
        }
    }

    /// The key routes share it by.
    pub fn key(&self) -> NhKey {
        NhKey {
            kind: self.kind,
            ifindex: self.ifindex,
            gateway: self.gateway,
            mtu: self.mtu,
        }
    }

    /// Bumped whenever what the next hop means changes (it is withdrawn, or its L2
    /// rewrite changes to another address): a cached (index, generation) pair that
    /// no longer matches must be looked up again.
    #[inline]
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a route still uses it.
    #[inline]
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Whether `generation` (from a cache) still describes this next hop.
    #[inline]
    pub fn is_valid(&self, generation: u32) -> bool {
        self.is_alive() && self.generation() == generation
    }

    pub(crate) fn withdraw(&self) {
        self.alive.store(false, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.clear_l2();
    }

    /// The resolved destination MAC, if it may be used at `now` (nanoseconds of the
    /// clock the neighbour table runs on).
    #[inline]
    pub fn l2(&self, now: u64) -> Option<[u8; 6]> {
        let v = self.l2.load(Ordering::Acquire);
        if v & L2_VALID == 0 || now >= self.l2_until.load(Ordering::Relaxed) {
            return None;
        }
        let b = v.to_be_bytes();
        Some([b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// Written by the neighbour table: the gateway is at `mac` until `until`.
    pub fn set_l2(&self, mac: [u8; 6], until: u64) {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&mac);
        let v = u64::from_be_bytes(b) | L2_VALID;
        self.l2_until.store(until, Ordering::Relaxed);
        let old = self.l2.swap(v, Ordering::AcqRel);
        if old != v && old & L2_VALID != 0 {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Written by the neighbour table: the gateway's address is no longer known.
    pub fn clear_l2(&self) {
        self.l2.store(0, Ordering::Release);
    }

    /// Flags as a route to this next hop shows them.
    pub fn flags(&self) -> RtFlags {
        let mut f = RtFlags::UP;
        if self.gateway.is_some() {
            f = f | RtFlags::GATEWAY;
        }
        match self.kind {
            NhKind::Forward => {}
            NhKind::Blackhole => f = f | RtFlags::BLACKHOLE,
            NhKind::Reject => f = f | RtFlags::REJECT,
            NhKind::Prohibit => f = f | RtFlags::REJECT | RtFlags::PROHIBIT,
            NhKind::Broadcast => {}
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nh() -> NextHop {
        NextHop::new(
            3,
            NhKey {
                kind: NhKind::Forward,
                ifindex: 1,
                gateway: Some("198.18.0.1".parse().unwrap()),
                mtu: 0,
            },
        )
    }

    #[test]
    fn l2_rewrite_is_used_until_it_expires() {
        let n = nh();
        assert_eq!(n.l2(0), None);
        n.set_l2([2, 0, 0, 0, 0, 9], 100);
        assert_eq!(n.l2(99), Some([2, 0, 0, 0, 0, 9]));
        assert_eq!(n.l2(100), None);
        n.clear_l2();
        assert_eq!(n.l2(0), None);
    }

    #[test]
    fn generation_changes_when_the_rewrite_moves_or_the_hop_is_withdrawn() {
        let n = nh();
        let g = n.generation();
        n.set_l2([2, 0, 0, 0, 0, 9], 100);
        n.set_l2([2, 0, 0, 0, 0, 9], 200);
        assert!(
            n.is_valid(g),
            "refreshing the same address keeps cached flows"
        );
        n.set_l2([2, 0, 0, 0, 0, 10], 200);
        assert!(!n.is_valid(g));
        let g = n.generation();
        n.withdraw();
        assert!(!n.is_valid(g));
        assert_eq!(n.l2(0), None);
    }

    #[test]
    fn flags_print_as_netstat_does() {
        assert_eq!(nh().flags().to_string(), "UG");
        assert_eq!(
            (RtFlags::UP | RtFlags::HOST | RtFlags::STATIC).to_string(),
            "UHS"
        );
        assert_eq!((RtFlags::UP | RtFlags::BLACKHOLE).to_string(), "UB");
    }
}

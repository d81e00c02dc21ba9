//! The mpstack network stack: one [`Stack`] per virtual host.
//!
//! Data path, as vector stages a worker runs one after another over a burst:
//! `ether_input` → `arp_input` | `ip_input` / `ip6_input` (pfil in) → `ip_forward` /
//! `ip6_forward` (pfil out) → `ether_output` → device; or local delivery through the
//! protocol switch to `icmp_input` | `udp_input` | `tcp_input` → sockets; and back
//! through `udp_output` / `tcp_output` → `ip_output` → pfil → (`frag`) →
//! `arp_resolve_output` → `ether_output`. Each stage keeps runtime counters
//! ([`runtime`]). Protocol code takes `now` and never reads a clock; every drop bumps a
//! named counter ([`stats::DropReason`]).
#![forbid(unsafe_code)]

// Shared by every family: counters, header access, stage counters, parking.
pub mod hdr;
pub mod ifindex;
pub mod loglimit;
pub mod netchan;
mod park;
pub mod runtime;
pub(crate) mod sockbuf;
pub mod stats;

// The families, bottom up; a family uses only those before it (and the shared
// modules above): `link` (interfaces, Ethernet, ARP, neighbour tables, LRO, GSO),
// `pfil` (the hooks and ipfw), `inet`, `inet6`, `tunnel` (gif, gre), `tcp`, and
// `stack` (the Stack, its workers and the sockets), which drives the others.
pub mod inet;
pub mod inet6;
pub(crate) mod ip;
pub(crate) mod ip46;
pub mod link;
pub mod pfil;
pub mod stack;
pub mod tcp;
pub mod tunnel;

pub use inet6::nd6;
pub use ip::frag;
pub use link::{arp, gso, iface, lle, lro};
pub use pfil::ipfw;
#[cfg(feature = "tokio")]
pub use stack::async_io;
pub use stack::fpm;
pub use stack::socket;

pub use frag::FragParams;
pub use iface::{AddrState, IfConfig, IfIndex, Ifnet, Inet6Addr, InetAddr};
pub use inet::cx::SourceRouting;
pub use pfil::{Dir, PfilCtx, PfilHook, PfilPoint, Reject, Verdict};
pub use socket::{BindError, EchoReply, PingSocket, UdpSocket};
pub use stack::netchannel::{NetChannel, Packet};
pub use stack::tcp_socket::{TcpBound, TcpBuffers, TcpListener, TcpStream};
pub use stack::{BridgeOp, ConnQuery, NetConfig, Stack, StackConfig, StackError};
pub use stats::{DropReason, Stats};

/// FxHash (rustc's hasher): tables keyed by addresses and ports on the data path need
/// speed, not DoS resistance — their size is bounded and their keys are not chosen
/// freely by the sender (ours, or neighbours that answered us).
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u8(b);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    /// The product's high bits, which every input bit reaches, rotated down to
    /// where the table indexes (hashbrown takes its bucket from the low bits): a
    /// multiplication's low bits see only the input's low bits, and an IPv4
    /// address hashes as its bytes in memory order, so the low bits of every
    /// address of one subnet are its network prefix. Without this, the 1,024
    /// neighbours of a /16 all started their probe at one bucket (measured
    /// 2026-12-03: `bench router`'s v4-connected at 0.50x v4-few, the neighbour
    /// lookup the hottest function). rustc-hash 2 finishes the same way.
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

/// Builds [`FxHasher`]s.
pub type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

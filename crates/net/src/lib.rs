//! The mpstack network stack: one [`Stack`] per virtual host.
//!
//! Data path (DESIGN.md): `ether_input` → `arp_input` | `ip_input` → pfil →
//! `icmp_input` | `udp_input` → sockets; and back through `udp_output` /
//! `icmp` → `ip_output` → pfil → (`frag`) → `arp_resolve_output` → `ether_output` → device.
//! Protocol code takes `now` and never reads a clock; every drop bumps a named
//! counter ([`stats::DropReason`]).
#![forbid(unsafe_code)]

pub mod arp;
#[cfg(feature = "tokio")]
pub mod async_io;
mod ether;
mod forward;
pub mod frag;
pub mod gso;
pub mod hdr;
mod icmp;
mod icmp6;
pub mod iface;
mod inet6;
mod ip;
mod ip6;
pub mod ipfw;
pub mod lle;
pub mod lro;
pub mod nd6;
mod park;
pub mod pfil;
pub mod runtime;
pub mod socket;
pub mod stack;
pub mod stats;
pub mod tcp;
mod udp;
mod worker;

pub use frag::FragParams;
pub use iface::{AddrState, IfConfig, IfIndex, Ifnet, Inet6Addr, InetAddr};
pub use pfil::{Dir, PfilCtx, PfilHook, PfilPoint, Reject, Verdict};
pub use socket::{BindError, EchoReply, PingSocket, UdpSocket};
pub use stack::{NetConfig, Stack, StackConfig, StackError};
pub use stats::{DropReason, Stats};
pub use tcp::{TcpBuffers, TcpListener, TcpStream};

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
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`FxHasher`]s.
pub type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

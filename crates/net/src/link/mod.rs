//! The link layer (FreeBSD's `net/`): interfaces and their addresses, Ethernet
//! input and output, ARP and the neighbour tables, and the software offloads that
//! sit at the link (LRO on receive, GSO on send).
//!
//! What it may call: the shared modules (`stats`, `hdr`, `runtime`) and the `mbuf`,
//! `wire`, `dev` and `route` crates; no other family.
//!
//! The layer's batch context, [`LinkCx`], is here: what a link stage may read for
//! a batch (the time, the interfaces, the bridges, the hooks) and where it writes
//! (the transmit vectors, the counters, the neighbour caches, the answers the hooks
//! asked for). Every link module takes it, the bridge's data path included, and it
//! holds the bridges' table, so it lives above both (its methods are in `cx`). The
//! families above are given it beside their own state (`inet::cx::InetCx` holds a
//! borrow of it next to `ip::IpCx` and `inet::cx::Inet4`), and call down with
//! `cx.link`; nothing here knows a family above.

pub mod arp;
pub mod bridge;
pub(crate) mod cx;
pub(crate) mod ether;
pub mod gso;
pub mod iface;
pub mod lle;
pub mod lro;
pub(crate) mod output;

use crate::hdr::HdrAccess;
use crate::link::arp::ArpOutput;
use crate::link::bridge::Bridges;
use crate::link::cx::{ArpCache, Nd6Cache, Rejected};
use crate::link::iface::Ifnet;
use crate::pfil::{PfilEnv, PfilHeads};
use crate::stats::Stats;
use dev::Instant;
use mbuf::Mbuf;
use std::sync::Arc;

/// A context that holds the link context (every family's does): what the link's
/// helpers that call back into a family take, so the callback gets its own
/// context back.
pub(crate) trait AsLink<'a> {
    fn link(&mut self) -> &mut LinkCx<'a>;
}

impl<'a> AsLink<'a> for LinkCx<'a> {
    #[inline(always)]
    fn link(&mut self) -> &mut LinkCx<'a> {
        self
    }
}

/// What a link stage may touch while processing one batch.
pub(crate) struct LinkCx<'a> {
    pub now: Instant,
    pub worker: usize,
    pub stats: &'a mut Stats,
    /// How input code makes headers contiguous.
    pub access: HdrAccess,
    /// The interfaces, by index, as published for this batch.
    pub ifaces: &'a [Arc<Ifnet>],
    /// Frames to transmit, per interface index.
    pub tx: &'a mut [Vec<Mbuf>],
    pub arp_out: &'a mut Vec<ArpOutput>,
    /// The segments software segmentation cuts a packet into (`fit_link`), reused
    /// from packet to packet.
    pub gso_segs: &'a mut Vec<Mbuf>,
    pub arp_snaps: &'a mut [ArpCache],
    /// The same for the IPv6 neighbour tables.
    pub nd6_snaps: &'a mut [Nd6Cache],
    /// The hooks at each point, and what they may ask of the stack.
    pub pfil: &'a PfilHeads,
    pub pfil_env: &'a dyn PfilEnv,
    /// The packets being sent are a hook's own answers (a firewall's reject): they
    /// skip the hooks (FreeBSD's M_SKIP_FIREWALL).
    pub pfil_skip: bool,
    /// Packets the hooks refused, for the worker to answer.
    pub rejects: &'a mut Vec<Rejected>,
    /// The bridges and their members, as published for this batch.
    pub bridges: &'a Bridges,
}

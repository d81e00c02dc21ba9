//! The link layer (FreeBSD's `net/`): interfaces and their addresses, Ethernet
//! input and output, ARP and the neighbour tables, and the software offloads that
//! sit at the link (LRO on receive, GSO on send).
//!
//! What it may call: the shared modules (`stats`, `hdr`, `runtime`) and the `mbuf`,
//! `wire`, `dev` and `route` crates; no other family.

pub mod arp;
pub mod bridge;
pub(crate) mod cx;
pub(crate) mod ether;
pub mod gso;
pub mod iface;
pub mod lle;
pub mod lro;
pub(crate) mod output;

//! IPv6 (FreeBSD's `netinet6/`): input with the extension-header chain, output and
//! forwarding, ICMPv6, neighbour discovery, MLD and router advertisements, UDP
//! over IPv6.
//!
//! What it may call: `inet`, `link`, `pfil` and the shared modules.

pub mod cx;
pub(crate) mod forward6;
pub(crate) mod icmp6;
pub(crate) mod input6;
pub(crate) mod ip6;
pub mod nd6;
pub(crate) mod udp6;

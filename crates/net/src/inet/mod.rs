//! IPv4 (FreeBSD's `netinet/`): input, output and forwarding, ICMP and UDP.
//! Fragment reassembly, of both families, is `crate::ip::frag`.
//!
//! What it may call: `link`, `pfil` and the shared modules.

pub mod cx;
pub(crate) mod forward;
pub(crate) mod icmp;
pub(crate) mod input;
pub(crate) mod ip;
pub(crate) mod udp;

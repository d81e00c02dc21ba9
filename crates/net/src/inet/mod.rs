//! IPv4 (FreeBSD's `netinet/`): input, output and forwarding, ICMP, UDP, and
//! fragment reassembly (of both families: `frag6` lives with it, as the two share
//! their bounds).
//!
//! What it may call: `link`, `pfil` and the shared modules.

pub mod cx;
pub(crate) mod forward;
pub mod frag;
pub(crate) mod icmp;
pub(crate) mod input;
pub(crate) mod ip;
pub(crate) mod udp;

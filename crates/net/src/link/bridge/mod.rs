//! The learning bridge (FreeBSD's `if_bridge`). So far: its address table
//! ([`rtable`]), read without locks by every worker, and the 802.1D spanning tree
//! ([`stp`]) as a state machine without I/O.

pub mod rtable;
pub mod stp;

pub use rtable::{BridgeRtable, Learn, RtEntry, RtError, RtFlags, RtStats};
pub use stp::{PortState, Stp, StpOut, StpTimes};

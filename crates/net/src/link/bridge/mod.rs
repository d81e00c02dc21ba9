//! The learning bridge (FreeBSD's `if_bridge`). So far: its address table
//! ([`rtable`]), read without locks by every worker.

pub mod rtable;

pub use rtable::{BridgeRtable, Learn, RtEntry, RtError, RtFlags, RtStats};

//! ipfw: the firewall of FreeBSD's ipfw(8), in the spirit of its 2009 rework — rules
//! in the ipfw language, compiled to flat arrays of small microinstructions that one
//! tight, allocation-free loop evaluates; tables for `table(name)` lookups; dynamic
//! states (`keep-state`, `check-state`, `limit`) sharded by a symmetric flow hash;
//! and dummynet's pipes, queues and schedulers, driven by the caller's clock.
//!
//! What it owns: rules, their compiled form and counters, tables, states, pipes. What
//! it may call: `std` and the `route` crate (address tables use its lookup
//! structures). It never touches a packet buffer: the caller describes a packet
//! ([`Program::eval`]) and acts on the verdict. No `unsafe`.

#![forbid(unsafe_code)]

pub mod dummynet;
pub mod parse;
pub mod program;
pub mod rule;
pub mod ruleset;
pub mod state;
pub mod table;

pub use parse::{parse_rule, ParseError};
pub use program::{
    CompileError, Counters, Decision, Direction, Env, IfName, IfRef, MacHdr, PacketInfo, Program,
    RejectKind, RuleCounter, Tags, Verdict,
};
pub use rule::{Action, Rule};
pub use ruleset::{CmdError, Ruleset, RulesetConfig};
pub use table::{Table, TableKey, TableType};

#[cfg(test)]
mod tests;

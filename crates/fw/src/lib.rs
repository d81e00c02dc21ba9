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
//!
//! The pieces, in the order a packet meets them:
//!
//! - [`rule`]: a rule as written; `Display` is `ipfw list`'s canonical form.
//! - [`parse`]: the ipfw(8) language → [`Rule`], errors as `LINE:COL: expected X,
//!   found Y` (the one shape of every error here, dummynet's and the commands' too).
//! - [`ruleset`]: the control plane — `add`, `delete`, `list`, `show`, `zero`, `flush`,
//!   `set enable/disable/move/swap`, `table ...`, dummynet's `pipe`/`queue`/`sched`
//!   commands, rules files — producing a [`Program`]; a rule may name only the
//!   pipes, queues and tables that exist (in a file, by its end).
//! - [`table`]: `addr`, `iface`, `number` and `flow` tables with values for `tablearg`.
//! - [`program`]: the compiled rules and the evaluator, [`PacketInfo`] in,
//!   [`Verdict`] out, [`Counters`] per worker ([`SharedCounters`] where `show` reads
//!   them from another thread while the worker counts).
//! - [`state`]: dynamic states, shared by all workers, read without a lock.
//!
//! How a datapath uses it:
//!
//! ```
//! use fw::{Counters, Decision, Env, PacketInfo, Ruleset};
//! use std::net::IpAddr;
//!
//! struct Host;
//! impl Env for Host {
//!     fn is_local(&self, a: IpAddr) -> bool { a == IpAddr::from([198, 18, 0, 1]) }
//!     fn verrevpath(&self, _src: IpAddr, _rcvif: u32) -> bool { true }
//!     fn antispoof(&self, _src: IpAddr, _rcvif: u32) -> bool { true }
//! }
//!
//! // Control plane: commands in, an immutable program out (publish it behind an Arc).
//! let mut rs = Ruleset::default();
//! rs.load("add 100 allow tcp from any to me 22 setup keep-state\nadd 200 deny ip from any to any")
//!     .unwrap();
//! let program = rs.program().unwrap();
//! let states = rs.states().clone();
//!
//! // A worker: its own counters and coin, the shared program and states.
//! let mut counters = Counters::new();
//! let mut rng = 0x9e37_79b9_u64;
//! let mut pkt = PacketInfo::new(IpAddr::from([198, 19, 0, 7]), IpAddr::from([198, 18, 0, 1]), 6);
//! pkt.dport = 22;
//! pkt.tcp_flags = 0x02; // SYN
//! let v = program.eval(&mut pkt, &Host, &states, &mut counters, 0, &mut rng);
//! assert_eq!((v.decision, v.rule), (Decision::Allow, 100));
//! assert!(rs.show(None, &[&counters]).starts_with("00100          1"));
//! ```

#![forbid(unsafe_code)]

pub mod dummynet;
pub mod parse;
pub mod program;
pub mod rule;
pub mod ruleset;
pub mod state;
pub mod table;

#[cfg(test)]
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Program>();
    shared::<state::StateShards>();
    shared::<Ruleset>();
    shared::<SharedCounters>();
};

pub use parse::{parse_rule, ParseError};
pub use program::{
    CompileError, CounterSink, CounterSource, Counters, Decision, Direction, Env, IfName, IfRef,
    MacHdr, Needs, PacketInfo, PacketVec, Program, RejectKind, RuleCounter, SharedCounters, Tags,
    Verdict, VECTOR,
};
pub use rule::{Action, Rule};
pub use ruleset::{CmdError, Ruleset, RulesetConfig};
pub use table::{Table, TableKey, TableType};

#[cfg(test)]
mod tests;

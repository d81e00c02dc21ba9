//! The control plane: the rules and tables as ipfw(8)'s commands change them, and the
//! [`Program`] compiled from them. Commands are methods (`add`, `delete`, `set_move`,
//! `table_add`, ...) and also text ([`Ruleset::execute`], [`Ruleset::load`]) in the
//! words of `ipfw`: `add 100 allow tcp from any to me 22 setup keep-state`,
//! `delete 100`, `list`, `show`, `zero`, `flush`, `set disable 3`, `set move 1 to 2`,
//! `set swap 1 2`, `set move rule 100 to 4`, `table T create type addr`,
//! `table T add 10.0.0.0/8 7`, `table T delete 10.0.0.0/8`, `table T list`,
//! `table T flush`, `table T destroy`.
//!
//! Workers never see a `Ruleset`: the caller publishes [`Ruleset::program`]'s
//! `Arc<Program>` (e.g. by swapping an `Arc` the workers load once per batch).
//!
//! dummynet's commands (`pipe N config ...`, `queue N config ...`, `sched N config
//! ...`, `pipe N delete`, `queue N delete`) run here too, for their checks: the
//! ruleset keeps which pipes and queues exist, and hands each command it took to
//! its owner's [`Dummynet`](crate::dummynet::Dummynet) ([`Ruleset::take_dummynet`]).
//!
//! # References
//!
//! A rule may name only pipes, queues and tables that exist, and a queue only a
//! pipe that exists: anything else is refused with the line and column of the name
//! (`1:10: pipe 5 is not configured`), where FreeBSD takes the rule and drops its
//! packets. A pipe, queue or table in use cannot be deleted. Within one
//! [`Ruleset::load`] the order does not matter: the names are resolved once the
//! whole file has run, so a file may add `pipe 1` rules before `pipe 1 config`, as
//! ipfw scripts often do. `pipe tablearg` names no pipe until a packet matches; a
//! table's value naming no pipe drops that packet (`NoSuchPipe`).
//!
//! # Errors
//!
//! Every error is `LINE:COL: message` ([`CmdError`]), the rule parser's shape.

use crate::dummynet::{self, DnCommand, DnLimits};
use crate::parse::{self, ParseError, Parser, Ref};
use crate::program::{CompileError, CounterSource, Program, RuleCounter, TableRef};
use crate::rule::{self, Action, AddrSpec, Arg, IfPat, OptKind, Rule};
use crate::state::{StateConfig, StateShards};
use crate::table::{FlowFields, Table, TableError, TableKey, TableType};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write};
use std::sync::Arc;

mod text;

/// Bounds and defaults.
#[derive(Clone, Copy, Debug)]
pub struct RulesetConfig {
    /// What rule 65535 does (FreeBSD's `IPFIREWALL_DEFAULT_TO_ACCEPT`).
    pub default_allow: bool,
    pub max_rules: usize,
    pub max_tables: usize,
    pub table_max_entries: usize,
    /// Step between automatically numbered rules (`net.inet.ip.fw.autoinc_step`).
    pub autoinc_step: u16,
    pub state_shards: usize,
    pub states: StateConfig,
}

impl Default for RulesetConfig {
    fn default() -> Self {
        RulesetConfig {
            default_allow: false,
            max_rules: 65534,
            max_tables: 128,
            table_max_entries: 1 << 20,
            autoinc_step: 100,
            state_shards: 16,
            states: StateConfig::default(),
        }
    }
}

/// A command that failed: where, and why. Both kinds display as `LINE:COL:
/// message`; a method called directly (not through [`Ruleset::execute`] or
/// [`Ruleset::load`]) has no text, and its `Failed` is line 0, displayed as the
/// message alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdError {
    Parse(ParseError),
    /// The command parsed but cannot be done (no such rule, table type mismatch,
    /// a pipe that is not configured, ...): `col` is where the word it is about
    /// starts.
    Failed {
        line: usize,
        col: usize,
        msg: String,
    },
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::Parse(e) => e.fmt(f),
            CmdError::Failed { line: 0, msg, .. } => f.write_str(msg),
            CmdError::Failed { line, col, msg } => write!(f, "{line}:{col}: {msg}"),
        }
    }
}

impl std::error::Error for CmdError {}

impl From<ParseError> for CmdError {
    fn from(e: ParseError) -> Self {
        CmdError::Parse(e)
    }
}

fn failed(msg: impl fmt::Display) -> CmdError {
    CmdError::Failed {
        line: 0,
        col: 0,
        msg: msg.to_string(),
    }
}

/// `e` placed at `line`:`col` if it has no place yet.
fn place(e: CmdError, line: usize, col: usize) -> CmdError {
    match e {
        CmdError::Failed { line: 0, msg, .. } => failed_at(line, col, msg),
        e => e,
    }
}

fn failed_at(line: usize, col: usize, msg: impl fmt::Display) -> CmdError {
    CmdError::Failed {
        line,
        col,
        msg: msg.to_string(),
    }
}

/// Who named a reference left to check at the end of a load.
#[derive(Clone, Debug)]
enum Owner {
    /// The rule of this id.
    Rule(u32),
    /// Queue `.0` configured to feed pipe `.1`.
    Queue(u32, u32),
}

/// A name not yet defined when its line ran, in a load: checked once the whole
/// file has run.
#[derive(Clone, Debug)]
struct Pending {
    line: usize,
    col: usize,
    what: Ref,
    /// A table's needed type.
    ttype: Option<TableType>,
    owner: Owner,
}

#[derive(Debug, Clone)]
struct TableSlot {
    table: Table,
    compiled: Option<Arc<crate::table::CompiledTable>>,
}

/// The rules, tables and states of one firewall.
#[derive(Debug, Clone)]
pub struct Ruleset {
    cfg: RulesetConfig,
    /// Sorted by number; rules of one number keep the order they were added in.
    rules: Vec<(Rule, u32)>,
    next_id: u32,
    /// Bit `s`: set `s` is enabled.
    enabled: u32,
    tables: BTreeMap<String, TableSlot>,
    states: Arc<StateShards>,
    program: Option<Arc<Program>>,
    /// Counter sums at the last `zero`, by rule id (workers own the live counters).
    zero_base: HashMap<u32, RuleCounter>,
    /// dummynet's pipes, and its queues with the pipe each feeds, as the commands
    /// run here left them.
    pipes: BTreeSet<u32>,
    queues: BTreeMap<u32, u32>,
    dn_limits: DnLimits,
    /// dummynet commands taken and not yet handed to the owner.
    dn_out: Vec<DnCommand>,
    /// In a load: the names to check once the whole file has run.
    pending: Option<Vec<Pending>>,
}

impl Default for Ruleset {
    fn default() -> Self {
        Self::new(RulesetConfig::default())
    }
}

impl Ruleset {
    pub fn new(cfg: RulesetConfig) -> Self {
        Ruleset {
            cfg,
            rules: Vec::new(),
            next_id: 1,
            enabled: u32::MAX,
            tables: BTreeMap::new(),
            states: Arc::new(StateShards::new(cfg.state_shards, cfg.states)),
            program: None,
            zero_base: HashMap::new(),
            pipes: BTreeSet::new(),
            queues: BTreeMap::new(),
            dn_limits: DnLimits::default(),
            dn_out: Vec::new(),
            pending: None,
        }
    }

    /// The dummynet commands run since the last call, in order, for the owner to
    /// apply to its [`Dummynet`](crate::dummynet::Dummynet): they have been checked
    /// against the same [`DnLimits`] (set both with
    /// [`set_dummynet_limits`](Self::set_dummynet_limits)), so `apply` takes them.
    pub fn take_dummynet(&mut self) -> Vec<DnCommand> {
        std::mem::take(&mut self.dn_out)
    }

    /// The queue limits dummynet's commands are checked against.
    pub fn dummynet_limits(&self) -> DnLimits {
        self.dn_limits
    }

    /// Sets [`dummynet_limits`](Self::dummynet_limits); false if they are not
    /// valid (see [`DnLimits::is_valid`]).
    pub fn set_dummynet_limits(&mut self, lim: DnLimits) -> bool {
        if lim.is_valid() {
            self.dn_limits = lim;
        }
        lim.is_valid()
    }

    /// The pipes configured, by number.
    pub fn dummynet_pipes(&self) -> impl Iterator<Item = u32> + '_ {
        self.pipes.iter().copied()
    }

    /// The queues configured, by number, each with the pipe it feeds.
    pub fn dummynet_queues(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.queues.iter().map(|(q, p)| (*q, *p))
    }

    /// The dynamic states the rules' `keep-state`/`limit` fill; pass them to `eval`.
    pub fn states(&self) -> &Arc<StateShards> {
        &self.states
    }

    /// Becomes `old` (a copy taken before changes that are now undone), keeping
    /// the rule ids handed out since unused: a rule added and taken out again
    /// leaves no counts behind for the next rule.
    pub fn restore(&mut self, mut old: Ruleset) {
        old.next_id = old.next_id.max(self.next_id);
        old.dn_out.clear();
        old.pending = None;
        *self = old;
    }

    pub fn set_default_allow(&mut self, allow: bool) {
        self.cfg.default_allow = allow;
        self.program = None;
    }

    /// The rules in order (the default rule not included), with their ids.
    pub fn rules(&self) -> impl Iterator<Item = (&Rule, u32)> {
        self.rules.iter().map(|(r, id)| (r, *id))
    }

    /// Adds a rule; a rule numbered 0 gets the last rule's number plus the step.
    /// The pipes, queues and tables it names must exist (tables of the type its use
    /// needs). Returns the rule's number.
    pub fn add(&mut self, r: Rule) -> Result<u16, CmdError> {
        self.add_at(r, 0, &[])
    }

    /// [`add`](Self::add) for line `line` of a text, whose parser noted where the
    /// rule names each thing (`at`), for the errors.
    fn add_at(&mut self, mut r: Rule, line: usize, at: &[(Ref, usize)]) -> Result<u16, CmdError> {
        if self.rules.len() >= self.cfg.max_rules {
            return Err(failed("too many rules"));
        }
        if r.num == 0 {
            let last = self.rules.last().map_or(0, |(r, _)| r.num as u32);
            let n = last + self.cfg.autoinc_step as u32;
            if n >= rule::DEFAULT_RULE as u32 {
                return Err(failed("no rule number left after the last rule"));
            }
            r.num = n as u16;
        }
        let col = |what: &Ref| at.iter().find(|(x, _)| x == what).map_or(0, |x| x.1);
        let mut later = Vec::new();
        for (what, ttype) in rule_refs(&r) {
            let c = col(&what);
            match self.resolve(&what, ttype) {
                Ok(()) => {}
                // In a load, a name not defined yet may be defined further on.
                Err(Missing::Undefined(_)) if self.pending.is_some() => {
                    later.push((what, ttype, c));
                }
                Err(e) => return Err(failed_at(line, c, e)),
            }
        }
        let id = self.next_id;
        if let Some(p) = &mut self.pending {
            p.extend(later.into_iter().map(|(what, ttype, col)| Pending {
                line,
                col,
                what,
                ttype,
                owner: Owner::Rule(id),
            }));
        }
        let pos = self.rules.partition_point(|(x, _)| x.num <= r.num);
        let num = r.num;
        self.rules.insert(pos, (r, id));
        self.next_id += 1;
        self.program = None;
        Ok(num)
    }

    /// Whether `what` exists (a table, of a type that serves `ttype`).
    fn resolve(&self, what: &Ref, ttype: Option<TableType>) -> Result<(), Missing> {
        match what {
            Ref::Pipe(n) if !self.pipes.contains(n) => Err(Missing::Undefined(format!(
                "pipe {n} is not configured (pipe {n} config ...)"
            ))),
            Ref::Queue(n) if !self.queues.contains_key(n) => Err(Missing::Undefined(format!(
                "queue {n} is not configured (queue {n} config pipe N ...)"
            ))),
            Ref::Table(name) => {
                let want = ttype.unwrap_or(TableType::Addr);
                match (self.tables.get(name), want) {
                    (Some(t), TableType::Flow(_))
                        if matches!(t.table.ttype(), TableType::Flow(_)) =>
                    {
                        Ok(())
                    }
                    (Some(t), TableType::Addr) if t.table.ttype() == TableType::AddrHash => Ok(()),
                    (Some(t), _) if t.table.ttype() == want => Ok(()),
                    (Some(t), _) => Err(Missing::Mismatch(format!(
                        "table {name} has type {}, the rule needs {want}",
                        t.table.ttype()
                    ))),
                    (None, TableType::Flow(_)) => Err(Missing::Undefined(format!(
                        "table {name} does not exist (table {name} create type flow:FIELDS)"
                    ))),
                    (None, _) => Err(Missing::Undefined(format!(
                        "table {name} does not exist (table {name} create type {want})"
                    ))),
                }
            }
            _ => Ok(()),
        }
    }

    /// What uses pipe, queue or table `what`: a rule, or a queue feeding the pipe.
    fn user_of(&self, what: &Ref) -> Option<String> {
        let by_rule = self.rules.iter().find(|(r, _)| match what {
            Ref::Table(name) => rule_uses(r, name),
            _ => rule_refs(r).iter().any(|(x, _)| x == what),
        });
        if let Some((r, _)) = by_rule {
            return Some(format!("rule {}", r.num));
        }
        match what {
            Ref::Pipe(n) => self
                .queues
                .iter()
                .find(|(_, p)| *p == n)
                .map(|(q, _)| format!("queue {q}")),
            _ => None,
        }
    }

    /// Deletes every rule numbered `num` (and their states); how many went.
    pub fn delete(&mut self, num: u16) -> Result<usize, CmdError> {
        let n = self.remove_where(|r| r.num == num);
        if n == 0 {
            return Err(failed(format!("rule {num} not found")));
        }
        Ok(n)
    }

    /// Deletes every rule of set `set`.
    pub fn delete_set(&mut self, set: u8) -> usize {
        self.remove_where(|r| r.set == set)
    }

    fn remove_where(&mut self, f: impl Fn(&Rule) -> bool) -> usize {
        let before = self.rules.len();
        let states = &self.states;
        self.rules.retain(|(r, id)| {
            if f(r) {
                states.remove_rule(*id);
                false
            } else {
                true
            }
        });
        self.program = None;
        before - self.rules.len()
    }

    /// Deletes every rule and state (tables stay, as in ipfw).
    pub fn flush(&mut self) {
        self.rules.clear();
        self.states.flush();
        self.zero_base.clear();
        self.program = None;
    }

    pub fn set_enable(&mut self, set: u8, on: bool) -> Result<(), CmdError> {
        if set >= rule::SETS {
            return Err(failed(format!("set {set} out of range (0-31)")));
        }
        if on {
            self.enabled |= 1 << set;
        } else {
            self.enabled &= !(1 << set);
        }
        self.program = None;
        Ok(())
    }

    pub fn set_enabled(&self, set: u8) -> bool {
        self.enabled & (1 << set) != 0
    }

    /// `set move FROM to TO`: every rule of one set into another.
    pub fn set_move(&mut self, from: u8, to: u8) -> Result<usize, CmdError> {
        self.check_set(to)?;
        let mut n = 0;
        for (r, _) in &mut self.rules {
            if r.set == from {
                r.set = to;
                n += 1;
            }
        }
        self.program = None;
        Ok(n)
    }

    /// `set swap A B`.
    pub fn set_swap(&mut self, a: u8, b: u8) -> Result<(), CmdError> {
        self.check_set(a)?;
        self.check_set(b)?;
        for (r, _) in &mut self.rules {
            if r.set == a {
                r.set = b;
            } else if r.set == b {
                r.set = a;
            }
        }
        let (ea, eb) = (self.set_enabled(a), self.set_enabled(b));
        self.set_enable(a, eb)?;
        self.set_enable(b, ea)?;
        Ok(())
    }

    /// `set move rule NUM to SET`.
    pub fn move_rule(&mut self, num: u16, to: u8) -> Result<usize, CmdError> {
        self.check_set(to)?;
        let mut n = 0;
        for (r, _) in &mut self.rules {
            if r.num == num {
                r.set = to;
                n += 1;
            }
        }
        if n == 0 {
            return Err(failed(format!("rule {num} not found")));
        }
        self.program = None;
        Ok(n)
    }

    fn check_set(&self, s: u8) -> Result<(), CmdError> {
        if s >= rule::SETS {
            return Err(failed(format!("set {s} out of range (0-31)")));
        }
        Ok(())
    }

    // ---- tables -------------------------------------------------------------

    pub fn table_create(&mut self, name: &str, ttype: TableType) -> Result<(), CmdError> {
        if !parse::valid_name(name) {
            return Err(failed(format!("bad table name '{name}'")));
        }
        if self.tables.contains_key(name) {
            return Err(failed(format!("table {name} exists")));
        }
        if self.tables.len() >= self.cfg.max_tables {
            return Err(failed("too many tables"));
        }
        self.tables.insert(
            name.to_string(),
            TableSlot {
                table: Table::new(ttype, self.cfg.table_max_entries),
                compiled: None,
            },
        );
        self.program = None;
        Ok(())
    }

    /// Destroys a table no rule uses.
    pub fn table_destroy(&mut self, name: &str) -> Result<(), CmdError> {
        if let Some(user) = self.user_of(&Ref::Table(name.to_string())) {
            return Err(failed(format!("table {name} is in use by {user}")));
        }
        self.tables
            .remove(name)
            .ok_or_else(|| failed(format!("no table {name}")))?;
        self.program = None;
        Ok(())
    }

    /// The tables' names, sorted (`table all list`).
    pub fn table_names(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name).map(|t| &t.table)
    }

    fn table_mut(&mut self, name: &str) -> Result<&mut Table, CmdError> {
        self.program = None;
        let slot = self
            .tables
            .get_mut(name)
            .ok_or_else(|| failed(format!("no table {name}")))?;
        slot.compiled = None;
        Ok(&mut slot.table)
    }

    /// `table NAME add KEY [VALUE]`.
    pub fn table_add(&mut self, name: &str, key: &str, value: u32) -> Result<(), CmdError> {
        let t = self.table_mut(name)?;
        let k = t.parse_key(key).map_err(failed)?;
        t.add(k, value).map_err(failed)
    }

    /// `table NAME add KEY VALUE KEY VALUE ...` (the columns are the keys',
    /// for errors): all the entries or, if one fails (a bad key, a full table),
    /// none — those added before it are taken back, a value it replaced put back.
    fn table_add_all(
        &mut self,
        name: &str,
        entries: &[(&str, usize, u32)],
    ) -> Result<(), (CmdError, usize)> {
        let t = self.table_mut(name).map_err(|e| (e, 0))?;
        let mut keys = Vec::with_capacity(entries.len());
        for &(key, col, value) in entries {
            let k = t.parse_key(key).map_err(|e| (failed(e), col))?;
            keys.push((k, col, value));
        }
        let mut before: Vec<(TableKey, Option<u32>)> = Vec::with_capacity(keys.len());
        for (k, col, value) in keys {
            let old = t.get(&k);
            if let Err(e) = t.add(k.clone(), value) {
                for (k, old) in before.into_iter().rev() {
                    match old {
                        Some(v) => {
                            let _ = t.add(k, v);
                        }
                        None => {
                            let _ = t.delete(&k);
                        }
                    }
                }
                return Err((failed(e), col));
            }
            before.push((k, old));
        }
        Ok(())
    }

    /// `table NAME delete KEY KEY ...`: all of them or, if one is not there (or
    /// does not parse), none.
    fn table_delete_all(
        &mut self,
        name: &str,
        keys: &[(usize, &str)],
    ) -> Result<(), (CmdError, usize)> {
        let t = self.table_mut(name).map_err(|e| (e, 0))?;
        let mut parsed = Vec::with_capacity(keys.len());
        for &(col, key) in keys {
            parsed.push((t.parse_key(key).map_err(|e| (failed(e), col))?, col));
        }
        let mut gone: Vec<(TableKey, u32)> = Vec::with_capacity(parsed.len());
        for (k, col) in parsed {
            match t.delete(&k) {
                Ok(v) => gone.push((k, v)),
                Err(e) => {
                    for (k, v) in gone.into_iter().rev() {
                        let _ = t.add(k, v);
                    }
                    return Err((failed(e), col));
                }
            }
        }
        Ok(())
    }

    /// `table NAME delete KEY`.
    pub fn table_delete(&mut self, name: &str, key: &str) -> Result<u32, CmdError> {
        let t = self.table_mut(name)?;
        let k = t.parse_key(key).map_err(failed)?;
        t.delete(&k).map_err(|e: TableError| failed(e))
    }

    pub fn table_flush(&mut self, name: &str) -> Result<(), CmdError> {
        self.table_mut(name)?.flush();
        Ok(())
    }

    /// `table NAME list`, as ipfw writes it.
    pub fn table_list(&self, name: &str) -> Result<String, CmdError> {
        let t = self
            .table(name)
            .ok_or_else(|| failed(format!("no table {name}")))?;
        let mut s = format!("--- table({name}), type {} ---\n", t.ttype());
        for (k, v) in t.entries() {
            let _ = writeln!(s, "{} {v}", t.key_text(&k));
        }
        Ok(s)
    }

    // ---- compiling and listing ------------------------------------------------

    /// The compiled rules of the enabled sets, built again only after a change.
    pub fn program(&mut self) -> Result<Arc<Program>, CmdError> {
        if let Some(p) = &self.program {
            return Ok(p.clone());
        }
        let mut refs = Vec::with_capacity(self.tables.len());
        for (name, slot) in &mut self.tables {
            let compiled = slot
                .compiled
                .get_or_insert_with(|| Arc::new(slot.table.compile()))
                .clone();
            refs.push(TableRef {
                name: name.clone(),
                ttype: slot.table.ttype(),
                table: compiled,
            });
        }
        let live: Vec<(&Rule, u32)> = self
            .rules
            .iter()
            .filter(|(r, _)| self.enabled & (1 << r.set) != 0)
            .map(|(r, id)| (r, *id))
            .collect();
        let p = Arc::new(
            Program::compile(&live, self.cfg.default_allow, &refs)
                .map_err(|e: CompileError| failed(e))?,
        );
        self.program = Some(p.clone());
        Ok(p)
    }

    fn default_line(&self) -> String {
        format!(
            "{:05} {} ip from any to any",
            rule::DEFAULT_RULE,
            if self.cfg.default_allow {
                "allow"
            } else {
                "deny"
            }
        )
    }

    /// `ipfw list [NUM]`: the rules (all sets, the default rule last) in canonical form.
    pub fn list(&self, num: Option<u16>) -> String {
        let mut s = String::new();
        for (r, _) in &self.rules {
            if num.is_none_or(|n| n == r.num) {
                let _ = writeln!(s, "{r}");
            }
        }
        if num.is_none_or(|n| n == rule::DEFAULT_RULE) {
            s.push_str(&self.default_line());
            s.push('\n');
        }
        s
    }

    /// Counter sums over the workers' `counters` (owned [`Counters`](crate::Counters)
    /// or [`SharedCounters`](crate::SharedCounters), read while their workers count),
    /// less what `zero` took away.
    pub fn counter<C: CounterSource + ?Sized>(&self, rule_id: u32, counters: &[&C]) -> RuleCounter {
        let mut c = RuleCounter::default();
        for w in counters {
            let x = w.get(rule_id);
            c.packets += x.packets;
            c.bytes += x.bytes;
            c.last = c.last.max(x.last);
        }
        if let Some(b) = self.zero_base.get(&rule_id) {
            c.packets = c.packets.saturating_sub(b.packets);
            c.bytes = c.bytes.saturating_sub(b.bytes);
        }
        c
    }

    /// `ipfw show [NUM]`: each rule with its packet and byte counts.
    pub fn show<C: CounterSource + ?Sized>(&self, num: Option<u16>, counters: &[&C]) -> String {
        let mut s = String::new();
        let ids = self.rules.iter().map(|(r, id)| (r.to_string(), r.num, *id));
        for (text, n, id) in ids.chain(std::iter::once((
            self.default_line(),
            rule::DEFAULT_RULE,
            0,
        ))) {
            if num.is_none_or(|x| x == n) {
                let c = self.counter(id, counters);
                let (head, tail) = text.split_at(5);
                let _ = writeln!(s, "{head} {:>10} {:>12}{tail}", c.packets, c.bytes);
            }
        }
        s
    }

    /// `ipfw zero [NUM]`: the counters shown from now on start at zero. The workers'
    /// counters are not written (they have one writer each, their worker): their sums
    /// now are kept as a baseline that [`counter`](Self::counter) subtracts.
    pub fn zero<C: CounterSource + ?Sized>(
        &mut self,
        num: Option<u16>,
        counters: &[&C],
    ) -> Result<(), CmdError> {
        let mut ids: Vec<u32> = self
            .rules
            .iter()
            .filter(|(r, _)| num.is_none_or(|n| n == r.num))
            .map(|(_, id)| *id)
            .collect();
        if num.is_none_or(|n| n == rule::DEFAULT_RULE) {
            ids.push(0);
        }
        if ids.is_empty() {
            return Err(failed(format!("rule {} not found", num.unwrap_or(0))));
        }
        for id in ids {
            let mut base = RuleCounter::default();
            for w in counters {
                let x = w.get(id);
                base.packets += x.packets;
                base.bytes += x.bytes;
            }
            self.zero_base.insert(id, base);
        }
        Ok(())
    }
}

/// Why a name does not resolve.
#[derive(Debug)]
enum Missing {
    /// It does not exist (yet).
    Undefined(String),
    /// A table of another type.
    Mismatch(String),
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Undefined(m) | Missing::Mismatch(m) => f.write_str(m),
        }
    }
}

/// What rule `r` names, with the type of table each use needs.
fn rule_refs(r: &Rule) -> Vec<(Ref, Option<TableType>)> {
    let mut v: Vec<(Ref, Option<TableType>)> = Vec::new();
    match r.action {
        Action::Pipe(Arg::Num(n)) => v.push((Ref::Pipe(n), None)),
        Action::Queue(Arg::Num(n)) => v.push((Ref::Queue(n), None)),
        _ => {}
    }
    let table = |n: &str, t: TableType| (Ref::Table(n.to_string()), Some(t));
    for ep in [&r.src, &r.dst] {
        if let AddrSpec::Table(n, _) = &ep.addr {
            v.push(table(n, TableType::Addr));
        }
    }
    for o in r.opts.iter().flatten() {
        match &o.kind {
            OptKind::Via(IfPat::Table(n))
            | OptKind::Recv(IfPat::Table(n))
            | OptKind::Xmit(IfPat::Table(n)) => v.push(table(n, TableType::Iface)),
            OptKind::Lookup(_, n) => v.push(table(n, TableType::Number)),
            OptKind::Flow(n) => v.push(table(n, TableType::Flow(FlowFields::default()))),
            _ => {}
        }
    }
    v
}

fn rule_uses(r: &Rule, name: &str) -> bool {
    let addr = [&r.src, &r.dst]
        .iter()
        .any(|e| matches!(&e.addr, AddrSpec::Table(n, _) if n == name));
    addr || r.opts.iter().flatten().any(|o| match &o.kind {
        OptKind::Via(IfPat::Table(n))
        | OptKind::Recv(IfPat::Table(n))
        | OptKind::Xmit(IfPat::Table(n)) => n == name,
        OptKind::Lookup(_, n) | OptKind::Flow(n) => n == name,
        _ => false,
    })
}

//! `mpstack run --config FILE`: the control commands, one a line (an rc.conf and an
//! ipfw script in one), applied at start all or nothing, and on SIGHUP again as a
//! difference: the lines gone from the file are undone, the new ones applied; if
//! one fails, what the reload did is undone and the node runs as before.
//!
//! ```text
//! # comments start with '#'
//! ifconfig r1 inet 198.18.3.1/24 alias
//! route add 198.19.0.0/16 198.18.2.2
//! arp -s 198.18.1.9 02:00:00:00:00:09
//! sysctl net.inet.tcp.cc.algorithm=newreno
//! ipfw add 100 allow tcp from any to any 22
//! ```
//!
//! A file's lines run as one batch: the routes they add reach the data path in
//! one compilation of the FIB, the rules and table entries in one of the
//! firewall's program, when the last line has run (100,000 routes or table
//! entries load in about a second, not in minutes). Before the first, the node's
//! state is saved ([`net::stack::ConfigSnapshot`], [`net::ipfw::IpfwSnapshot`]); if a
//! line fails, that state is put back whole, so a refused file or reload leaves
//! every sysctl, MTU, address, up/down, route, rule, table, pipe and bridge member
//! exactly as before.
//!
//! A line taken out of the file on a reload is undone by its inverse: `route add` by `route delete`, an address by
//! `-alias`, `ipfw add N` by `ipfw delete N` (so rules in a config file carry their
//! numbers), a table entry or a table by their deletion, `arp -s`/`ndp -s` by `-d`,
//! `ifconfig IF down` by `ifconfig IF up`, `ifconfig IF -hook …` by `hook …`. The others (`sysctl`, `ifconfig mtu`,
//! `ifconfig up`, `route change`, `ipfw pipe … config`, `ipfw set …`) have none:
//! taken out of the file, what they set stays.
//!
//! A batch from the shell (`mpstack config apply FILE`, `mpstack ipfw /FILE`:
//! [`parse_batch`], then [`apply`]) runs the same way, with deletions besides.
//! [`apply`] and [`reload`] hold the node alone (`Stack::changes_alone`): other
//! changes (control commands, routes from zebra) wait, so putting the node back
//! undoes only what the lines did.
//!
//! What it owns: the file's lines and the difference of two. What it may call:
//! the commands ([`super::cmds`]).

use super::cmds::{self, Node};
use super::Conn;
use std::sync::atomic::AtomicBool;

/// One line of a config file: its number and its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub no: usize,
    pub words: Vec<String>,
}

impl Line {
    fn text(&self) -> String {
        self.words.join(" ")
    }
}

/// A config file, read and checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub lines: Vec<Line>,
}

impl Config {
    /// Whether a line configures the firewall (the node then runs one).
    pub fn has_ipfw(&self) -> bool {
        self.lines.iter().any(|l| l.words[0] == "ipfw")
    }
}

/// Reads `text`: the commands that change a node, each checked for its form;
/// errors name the line.
pub fn parse(text: &str) -> Result<Config, String> {
    parse_as(text, None, false)
}

/// Reads a batch's text (`mpstack config apply FILE`; with `prefix` `ipfw`,
/// `mpstack ipfw /FILE`, whose lines are ipfw commands without the word): a
/// config file's lines, and the deletions a config file has no use for (`route
/// delete`, `ipfw delete`, `ipfw table T delete|flush|destroy`, `ipfw flush`,
/// rules without a number). Errors name the line.
pub fn parse_batch(text: &str, prefix: Option<&str>) -> Result<Config, String> {
    parse_as(text, prefix, true)
}

fn parse_as(text: &str, prefix: Option<&str>, batch: bool) -> Result<Config, String> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let body = raw.split_once(" #").map_or(raw, |(b, _)| b).trim();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let words: Vec<String> = prefix
            .into_iter()
            .chain(body.split_whitespace())
            .map(str::to_string)
            .collect();
        check(&words, batch).map_err(|e| format!("line {no}: {e}"))?;
        lines.push(Line { no, words });
    }
    Ok(Config { lines })
}

/// Whether `w` is a command that changes the node, in a form a config file
/// takes (or, `batch`, a batch: deletions too).
fn check(w: &[String], batch: bool) -> Result<(), String> {
    let v: Vec<&str> = w.iter().map(String::as_str).collect();
    let listing = || {
        Err(format!(
            "'{}' changes nothing; a config file holds changes only",
            v.join(" ")
        ))
    };
    match v[..] {
        ["route", "add" | "change", ..] => Ok(()),
        ["route", "delete" | "del", _, ..] if batch => Ok(()),
        ["route", ..] => listing(),
        ["ifconfig", _, "addr"] => listing(),
        ["ifconfig", _, w, ..] if cmds::BRIDGE_WORDS.contains(&w) => Ok(()),
        ["ifconfig", _, "hook" | "-hook", _, ..] => Ok(()),
        ["ifconfig", _, "inet" | "inet6", _, ..]
        | ["ifconfig", _, "mtu", _]
        | ["ifconfig", _, "up" | "down"] => {
            if v[2].starts_with("inet") && v.len() > 4 && !matches!(v[4], "alias" | "add") {
                return Err(format!("'{}': a config file adds addresses", v.join(" ")));
            }
            Ok(())
        }
        ["ifconfig", ..] => listing(),
        ["arp" | "ndp", "-s", _, _] => Ok(()),
        ["arp" | "ndp", "-d", ..] if batch => Err(format!(
            "'{}': a batch takes no neighbour deletion (it could not be put back if a later line failed)",
            v.join(" ")
        )),
        ["arp" | "ndp", ..] => listing(),
        ["sysctl", ref rest @ ..] if !rest.is_empty() && rest.iter().all(|x| x.contains('=')) => {
            Ok(())
        }
        ["sysctl", ..] => listing(),
        ["ipfw", ref rest @ ..] => {
            let rest: Vec<&str> = rest.iter().copied().filter(|x| *x != "-q").collect();
            match rest[..] {
                ["add", n, ..] if n.parse::<u32>().is_ok() => Ok(()),
                ["add", _, ..] if batch => Ok(()),
                ["delete", _, ..]
                | ["flush"]
                | ["table", _, "delete" | "flush" | "destroy", ..]
                | ["pipe" | "queue", _, "delete"]
                    if batch =>
                {
                    Ok(())
                }
                ["add", ..] => Err(
                    "ipfw add: give the rule a number in a config file (ipfw add N …), so that a reload can take it out"
                        .into(),
                ),
                ["table", _, "create" | "add", ..]
                | ["pipe" | "queue", _, "config", ..]
                | ["set", ..] => Ok(()),
                _ => listing(),
            }
        }
        ["netstat", ..] => listing(),
        _ => Err(format!(
            "'{}': not a command (ifconfig, route, arp, ndp, ipfw, sysctl)",
            v[0]
        )),
    }
}

/// The command that undoes `l`, if it has one.
fn inverse(l: &Line) -> Option<Vec<String>> {
    let v: Vec<&str> = l.words.iter().map(String::as_str).collect();
    let owned = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match v[..] {
        ["route", "add", ref rest @ ..] => {
            let mut w = owned(&["route", "delete"]);
            w.extend(
                rest.iter()
                    .filter(|x| !matches!(**x, "-blackhole" | "-reject" | "-static"))
                    .map(|s| s.to_string()),
            );
            Some(w)
        }
        ["ifconfig", i, "down"] => Some(owned(&["ifconfig", i, "up"])),
        ["ifconfig", i, "-hook", ref rest @ ..] => {
            let mut w = owned(&["ifconfig", i, "hook"]);
            w.extend(rest.iter().map(|s| s.to_string()));
            Some(w)
        }
        ["ifconfig", br, w, ref rest @ ..] if cmds::BRIDGE_WORDS.contains(&w) => {
            // Members added are taken out, static addresses deleted, members taken
            // out put back; in the reverse order.
            let mut undo: Vec<[&str; 2]> = Vec::new();
            let mut ws = std::iter::once(w).chain(rest.iter().copied());
            while let Some(w) = ws.next() {
                match w {
                    "addm" => undo.extend(ws.next().map(|m| ["deletem", m])),
                    "deletem" => undo.extend(ws.next().map(|m| ["addm", m])),
                    "static" => {
                        let _member = ws.next();
                        undo.extend(ws.next().map(|mac| ["deladdr", mac]));
                    }
                    w if w == "deladdr"
                        || cmds::BRIDGE_FLAG_WORDS.contains(&w.trim_start_matches('-')) =>
                    {
                        ws.next();
                    }
                    _ => {}
                }
            }
            if undo.is_empty() {
                return None;
            }
            let mut v = owned(&["ifconfig", br]);
            for u in undo.iter().rev() {
                v.extend(owned(u));
            }
            Some(v)
        }
        ["ifconfig", i, fam @ ("inet" | "inet6"), a, ..] => {
            let a = a.split('/').next().unwrap_or(a);
            Some(owned(&["ifconfig", i, fam, a, "-alias"]))
        }
        ["arp", "-s", h, _] => Some(owned(&["arp", "-d", h])),
        ["ndp", "-s", h, _] => Some(owned(&["ndp", "-d", h])),
        ["ipfw", ref rest @ ..] => {
            let rest: Vec<&str> = rest.iter().copied().filter(|x| *x != "-q").collect();
            match rest[..] {
                ["add", n, ..] => Some(owned(&["ipfw", "delete", n])),
                ["table", t, "create", ..] => Some(owned(&["ipfw", "table", t, "destroy"])),
                // `add KEY VALUE KEY VALUE ...`: every key.
                ["table", t, "add", ref kv @ ..] if !kv.is_empty() => {
                    let mut w = owned(&["ipfw", "table", t, "delete"]);
                    w.extend(kv.iter().step_by(2).map(|k| k.to_string()));
                    Some(w)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Runs one command against the node.
fn run(node: &Node<'_>, words: &[String]) -> Result<(), String> {
    let mut out = Conn::buffer();
    let stop = AtomicBool::new(false);
    cmds::execute(node, words, &mut out, &stop).map_err(|f| f.msg.trim_end().to_string())
}

/// Whether what `l` changes is outside [`Saved`] and so undone by its inverse: a
/// neighbour entry, a bridge's members and address cache (whose AF_PACKET
/// members' promiscuous mode the commands hold and let go).
fn by_inverse(l: &Line) -> bool {
    matches!(l.words[0].as_str(), "arp" | "ndp")
        || (l.words[0] == "ifconfig"
            && l.words
                .get(2)
                .is_some_and(|w| cmds::BRIDGE_WORDS.contains(&w.as_str())))
}

/// Runs the inverse `inv` of a line gone from the file. One that fails (the route
/// was deleted by hand since) has nothing left to undo; but a table line's keys,
/// whose `delete` of many is all or none, are then deleted one by one, so that a
/// key deleted by hand does not keep the others.
fn undo_gone(node: &Node<'_>, inv: &[String]) {
    if run(node, inv).is_ok() {
        return;
    }
    let w: Vec<&str> = inv.iter().map(String::as_str).collect();
    if let ["ipfw", "table", t, "delete", ref keys @ ..] = w[..] {
        if keys.len() > 1 {
            for k in keys {
                let one = ["ipfw", "table", t, "delete", k].map(str::to_string);
                let _ = run(node, &one);
            }
        }
    }
}

/// Undoes those of `done` (last first) that [`Saved`] does not hold.
fn undo(node: &Node<'_>, done: &[&Line]) {
    for l in done.iter().rev().filter(|l| by_inverse(l)) {
        if let Some(inv) = inverse(l) {
            let _ = run(node, &inv);
        }
    }
}

/// The node as the commands may change it, taken before a file's lines run: the
/// stack's configuration (interfaces, MTUs, addresses, up/down, bridge members,
/// tunables, routes), the firewall's (rules, sets, tables, pipes, its tunables)
/// and whether it is on.
struct Saved {
    stack: net::stack::ConfigSnapshot,
    fw: Option<net::ipfw::IpfwSnapshot>,
    fw_on: bool,
}

impl Saved {
    fn take(node: &Node<'_>) -> Saved {
        Saved {
            stack: node.stack.config_snapshot(),
            fw: node.ipfw().map(|f| f.snapshot()),
            fw_on: node.fw.enabled(),
        }
    }

    /// Puts the node back as it was taken: a firewall turned on since is turned off
    /// again and emptied as it was made.
    fn put_back(&self, node: &Node<'_>) {
        let _ = node.fw.set_enabled(node.stack, self.fw_on);
        let _ = node.stack.config_restore(&self.stack);
        if let Some(f) = node.ipfw() {
            if let Some(snap) = self.fw.as_ref().or(node.fw.blank()) {
                let _ = f.restore(snap);
            }
        }
    }
}

/// Runs `f` with the FIB's and the firewall's compilations held: the lines it
/// runs reach the data path together, in one compilation of each, when it ends
/// (a file of 100,000 routes or table entries costs one, not one a line). An
/// error of the firewall's compilation then is the batch's.
fn batch<T>(node: &Node<'_>, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    node.stack.fib_batch(|| match node.ipfw() {
        Some(fw) => {
            let (r, published) = fw.batch(f);
            let v = r?;
            published.map_err(|e| format!("the firewall's rules: {e}"))?;
            Ok(v)
        }
        None => f(),
    })
}

/// Applies every line of `cfg` in order, in one batch; if one fails (or the
/// firewall's rules they make do not compile), the node is put back as it was
/// before the first and the error says which failed.
pub fn apply(node: &Node<'_>, cfg: &Config, file: &str) -> Result<usize, String> {
    // No other change runs until the lines are in or the node is put back.
    let _alone = node.stack.changes_alone();
    let saved = Saved::take(node);
    let mut done: Vec<&Line> = Vec::new();
    let r = batch(node, || {
        for l in &cfg.lines {
            run(node, &l.words).map_err(|e| format!("{file}:{}: {}: {e}", l.no, l.text()))?;
            done.push(l);
        }
        Ok(done.len())
    });
    if r.is_err() {
        undo(node, &done);
        saved.put_back(node);
    }
    r.map_err(|e| {
        if e.starts_with(file) {
            e
        } else {
            format!("{file}: {e}")
        }
    })
}

/// A config file of `routes` host routes and `entries` entries of an ipfw table
/// `big` (addresses counted up from 198.18.16.0, through 198.18.2.2), as the
/// benchmark and the tests load it.
pub fn generated(routes: usize, entries: usize) -> String {
    let base = u32::from(std::net::Ipv4Addr::new(198, 18, 16, 0));
    let a = |k: usize| std::net::Ipv4Addr::from(base.wrapping_add(k as u32));
    let mut s = String::with_capacity((routes + entries) * 48);
    for k in 0..routes {
        s += &format!("route add {}/32 198.18.2.2\n", a(k));
    }
    if entries > 0 {
        s += "ipfw table big create type addr\n";
    }
    for k in 0..entries {
        s += &format!("ipfw table big add {}/32 {}\n", a(k), k % 1000);
    }
    s
}

/// What a reload did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reload {
    /// Lines gone from the file and undone.
    pub undone: usize,
    /// Lines gone whose effect stays (they have no inverse).
    pub kept: usize,
    /// New lines applied.
    pub applied: usize,
}

/// Takes the node from `old` to `new`: the lines only `old` has are undone (last
/// first), then the lines only `new` has applied (in order), all in one batch. If
/// one fails, the node is put back exactly as `old` left it — every sysctl, MTU,
/// address, up/down, route, rule, table, pipe and bridge member as it was, not
/// only what the lines' inverses undo — and the error names the line.
pub fn reload(node: &Node<'_>, old: &Config, new: &Config, file: &str) -> Result<Reload, String> {
    // Lines match by their words, each old line at most once.
    let mut taken = vec![false; old.lines.len()];
    let mut added: Vec<&Line> = Vec::new();
    for l in &new.lines {
        match (0..old.lines.len()).find(|&i| !taken[i] && old.lines[i].words == l.words) {
            Some(i) => taken[i] = true,
            None => added.push(l),
        }
    }
    let gone: Vec<&Line> = old
        .lines
        .iter()
        .zip(&taken)
        .filter(|(_, t)| !**t)
        .map(|(l, _)| l)
        .collect();
    // No other change (a control command, a route from zebra) runs until the
    // new lines are in or the node is put back: putting it back must not take
    // someone else's change with it.
    let _alone = node.stack.changes_alone();
    let saved = Saved::take(node);
    let mut undone: Vec<&Line> = Vec::new();
    let mut done: Vec<&Line> = Vec::new();
    let r = batch(node, || {
        let mut r = Reload::default();
        for l in gone.iter().rev() {
            match inverse(l) {
                Some(inv) => {
                    undo_gone(node, &inv);
                    undone.push(l);
                    r.undone += 1;
                }
                None => r.kept += 1,
            }
        }
        for l in &added {
            run(node, &l.words).map_err(|e| format!("{file}:{}: {}: {e}", l.no, l.text()))?;
            done.push(l);
            r.applied += 1;
        }
        Ok(r)
    });
    if r.is_err() {
        undo(node, &done);
        saved.put_back(node);
        // Neighbour entries and bridge lines taken out are put back by running
        // them again, once their interfaces' addresses are back.
        for u in undone.iter().rev().filter(|l| by_inverse(l)) {
            let _ = run(node, &u.words);
        }
    }
    r.map_err(|e| {
        if e.starts_with(file) {
            e
        } else {
            format!("{file}: {e}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_and_checked() {
        let c = parse(
            "# a router\n\nroute add 198.19.0.0/16 198.18.2.2   # to the lab\n\
             ifconfig r1 inet 198.18.3.1/24 alias\nsysctl net.inet.tcp.msl=15000\n\
             ipfw -q add 100 allow ip from any to any\narp -s 198.18.1.9 02:00:00:00:00:09\n",
        )
        .unwrap();
        let nos: Vec<usize> = c.lines.iter().map(|l| l.no).collect();
        assert_eq!(nos, [3, 4, 5, 6, 7]);
        assert_eq!(
            c.lines[0].words,
            ["route", "add", "198.19.0.0/16", "198.18.2.2"]
        );
        assert!(c.has_ipfw());
        for (bad, why) in [
            ("netstat -rn", "changes nothing"),
            ("route show", "changes nothing"),
            (
                "ipfw add allow ip from any to any",
                "give the rule a number",
            ),
            ("ipfw show", "changes nothing"),
            ("sysctl net.inet.tcp.msl", "changes nothing"),
            ("ifconfig r1 inet 198.18.3.1 -alias", "adds addresses"),
            ("frobnicate", "not a command"),
        ] {
            let e = parse(&format!("route add default 198.18.1.1\n{bad}\n")).unwrap_err();
            assert!(e.starts_with("line 2: ") && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn inverses_undo_what_can_be_undone() {
        let inv = |t: &str| {
            let l = &parse(t).unwrap().lines[0];
            inverse(l).map(|w| w.join(" "))
        };
        assert_eq!(
            inv("route add 198.19.0.0/16 198.18.2.2").as_deref(),
            Some("route delete 198.19.0.0/16 198.18.2.2")
        );
        assert_eq!(
            inv("route add 198.20.0.0/16 -blackhole").as_deref(),
            Some("route delete 198.20.0.0/16")
        );
        assert_eq!(
            inv("ifconfig r1 inet6 2001:2:9::1/64").as_deref(),
            Some("ifconfig r1 inet6 2001:2:9::1 -alias")
        );
        assert_eq!(
            inv("ipfw -q add 300 deny ip from any to any").as_deref(),
            Some("ipfw delete 300")
        );
        assert_eq!(
            inv("ipfw table t1 add 198.18.0.0/24").as_deref(),
            Some("ipfw table t1 delete 198.18.0.0/24")
        );
        assert_eq!(
            inv("ipfw table t1 add 198.18.0.0/24 7 198.18.1.0/24 8 198.18.2.0/24").as_deref(),
            Some("ipfw table t1 delete 198.18.0.0/24 198.18.1.0/24 198.18.2.0/24")
        );
        assert_eq!(
            inv("arp -s 198.18.1.9 02:00:00:00:00:09").as_deref(),
            Some("arp -d 198.18.1.9")
        );
        assert_eq!(inv("sysctl net.inet.tcp.msl=15000"), None);
        assert_eq!(inv("ifconfig r1 mtu 1400"), None);
        assert_eq!(inv("ifconfig r1 down").as_deref(), Some("ifconfig r1 up"));
        assert_eq!(inv("ifconfig r1 up"), None);
        assert_eq!(
            inv("ifconfig bridge0 addm e1 addm e2 -learn e2 static e1 02:00:00:00:00:09")
                .as_deref(),
            Some("ifconfig bridge0 deladdr 02:00:00:00:00:09 deletem e2 deletem e1")
        );
        assert_eq!(inv("ifconfig bridge0 -learn e1"), None);
        assert_eq!(
            inv("ifconfig bridge0 addm e1 -stp e1 bpduguard e1 rootguard e1 autoedge e1")
                .as_deref(),
            Some("ifconfig bridge0 deletem e1")
        );
        assert_eq!(inv("ifconfig bridge0 bpduguard e1 -edge e1"), None);
        assert!(parse("ifconfig bridge0 addr").is_err());
    }

    use net::{IfConfig, Stack, StackConfig};

    /// A router r1 198.18.1.1/24, r2 198.18.2.1/24; bridge0 of e1 and e2 (e3
    /// free); a firewall with rule 200, table t1 and pipe 1; r2 down and rule 200
    /// twice by hand, as an operator's commands leave a node beside its file.
    fn rig() -> (Stack, cmds::Firewall) {
        let mut s = Stack::new(StackConfig {
            name: "r".into(),
            workers: 1,
            ..StackConfig::default()
        });
        for (name, a) in [
            ("r1", Some("198.18.1.1/24")),
            ("r2", Some("198.18.2.1/24")),
            ("e1", None),
            ("e2", None),
            ("e3", None),
        ] {
            let (d, _far) = dev::mem::wire(dev::mem::WireConfig::default());
            s.add_interface(
                Box::new(d),
                IfConfig {
                    name: Some(name.into()),
                    addrs: a.map(|a| a.parse().unwrap()).into_iter().collect(),
                    ..IfConfig::default()
                },
            )
            .unwrap();
        }
        s.add_bridge("bridge0", Default::default()).unwrap();
        let f = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
        f.attach(&s);
        (s, cmds::Firewall::running(f, false, false))
    }

    fn node<'a>(s: &'a Stack, fw: &'a cmds::Firewall) -> Node<'a> {
        Node {
            stack: s,
            fw,
            sysctl: std::sync::Mutex::new(()),
            fpm: None,
            packet: None,
            clock: None,
        }
    }

    fn out(n: &Node<'_>, cmd: &str) -> String {
        let words: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
        let mut c = Conn::buffer();
        cmds::execute(n, &words, &mut c, &AtomicBool::new(false))
            .unwrap_or_else(|e| panic!("{cmd}: {}", e.msg));
        c.into_output()
    }

    /// A listing, or the error it gives (a table not made yet).
    fn listing(n: &Node<'_>, cmd: &str) -> String {
        let words: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
        let mut c = Conn::buffer();
        match cmds::execute(n, &words, &mut c, &AtomicBool::new(false)) {
            Ok(()) => c.into_output(),
            Err(e) => format!("error: {}", e.msg),
        }
    }

    /// What an operator sees of the node: every listing the file's lines change.
    fn state(n: &Node<'_>) -> String {
        [
            "sysctl -a",
            "ifconfig -a",
            "netstat -rn",
            "ipfw show",
            "ipfw table t1 list",
            "ipfw pipe show",
            "ifconfig bridge0",
        ]
        .iter()
        .map(|c| format!("== {c}\n{}", listing(n, c)))
        .collect()
    }

    const BASE: &str = "route add 198.19.1.0/24 198.18.2.2\n\
        sysctl net.inet.tcp.msl=15000\n\
        ipfw add 100 allow ip from any to any\n\
        ipfw table t1 create type addr\n\
        ipfw table t1 add 198.18.5.0/24 3\n\
        ipfw pipe 1 config bw 1Mbit/s\n\
        ifconfig bridge0 addm e1 addm e2\n";

    /// `change` added to the base file, then a line that fails (a gateway on no
    /// connected network): the reload is refused and every listing is as before.
    fn refused_reload_leaves_all_as_it_was(change: &str) {
        let (s, fw) = rig();
        let n = node(&s, &fw);
        let old = parse(BASE).unwrap();
        apply(&n, &old, "node.conf").unwrap();
        out(&n, "ifconfig r2 down");
        out(&n, "ipfw add 200 count ip from any to any");
        out(&n, "ipfw add 200 allow ip from any to any");
        let before = state(&n);
        let text = format!("{BASE}{change}\nroute add 198.19.9.0/24 198.18.99.1\n");
        let new = parse(&text).unwrap();
        let e = reload(&n, &old, &new, "node.conf").unwrap_err();
        assert!(e.contains("198.18.99.1"), "{change}: {e}");
        assert_eq!(state(&n), before, "{change}");
        // And the file as it was still reloads cleanly.
        assert_eq!(
            reload(&n, &old, &old, "node.conf").unwrap(),
            Reload::default()
        );
    }

    #[test]
    fn a_refused_reload_keeps_the_sysctls() {
        refused_reload_leaves_all_as_it_was(
            "sysctl net.inet.tcp.msl=20000 net.inet.ip.directed-broadcast=1 net.inet.ip.dummynet.pipe_slot_limit=50",
        );
    }

    #[test]
    fn a_refused_reload_keeps_the_mtu() {
        refused_reload_leaves_all_as_it_was("ifconfig r1 mtu 1400");
    }

    #[test]
    fn a_refused_reload_keeps_the_addresses() {
        // The first IPv6 address brings a link-local one with it.
        refused_reload_leaves_all_as_it_was(
            "ifconfig r1 inet 198.18.3.1/24 alias\nifconfig e3 inet6 2001:2:9::1/64",
        );
    }

    #[test]
    fn a_refused_reload_keeps_the_routes() {
        refused_reload_leaves_all_as_it_was(
            "route add 198.19.2.0/24 198.18.1.2\nroute change 198.19.1.0/24 198.18.1.3",
        );
    }

    #[test]
    fn a_refused_reload_keeps_the_rules() {
        // Rule 200 is there twice by hand: `delete 200` would take both.
        refused_reload_leaves_all_as_it_was(
            "ipfw add 200 deny tcp from any to any 23\nipfw add 300 deny udp from any to any 53",
        );
    }

    #[test]
    fn a_refused_reload_keeps_the_tables() {
        // An entry there already with another value: deleting it is no undo.
        refused_reload_leaves_all_as_it_was(
            "ipfw table t1 add 198.18.6.0/24 4\nipfw table t1 add 198.18.5.0/24 9",
        );
    }

    #[test]
    fn a_refused_reload_keeps_the_pipes() {
        refused_reload_leaves_all_as_it_was(
            "ipfw pipe 1 config bw 2Mbit/s delay 5\nipfw pipe 2 config bw 3Mbit/s",
        );
    }

    #[test]
    fn a_refused_reload_keeps_the_bridge_members() {
        refused_reload_leaves_all_as_it_was("ifconfig bridge0 addm e3 -learn e1 deletem e2");
    }

    #[test]
    fn a_refused_reload_keeps_up_and_down() {
        // r2 was put down by hand; `up` has no inverse.
        refused_reload_leaves_all_as_it_was("ifconfig r2 up\nifconfig r1 down");
    }

    #[test]
    fn a_refused_start_config_leaves_the_node_as_it_was() {
        let (s, fw) = rig();
        let n = node(&s, &fw);
        let before = state(&n);
        let bad = format!("{BASE}ifconfig r1 mtu 1400\nroute add 198.19.9.0/24 198.18.99.1\n");
        assert!(apply(&n, &parse(&bad).unwrap(), "node.conf").is_err());
        assert_eq!(state(&n), before);
    }

    #[test]
    fn a_firewall_turned_on_by_a_refused_reload_is_off_again() {
        let mut s = Stack::new(StackConfig::default());
        let (d, _far) = dev::mem::wire(dev::mem::WireConfig::default());
        s.add_interface(Box::new(d), IfConfig::default()).unwrap();
        let fw = cmds::Firewall::off(true, false, Default::default());
        let n = node(&s, &fw);
        let new = parse(
            "sysctl net.inet.ip.fw.enable=1\nipfw add 100 deny ip from any to any\nroute add 198.19.9.0/24 198.18.99.1\n",
        )
        .unwrap();
        assert!(reload(&n, &Config::default(), &new, "c").is_err());
        assert!(!fw.enabled());
        assert_eq!(
            out(&n, "sysctl net.inet.ip.fw.enable"),
            "net.inet.ip.fw.enable: 0\n"
        );
        // Turned on later, it has only its default rule, as made.
        out(&n, "ipfw enable firewall");
        assert_eq!(out(&n, "ipfw list"), "65535 allow ip from any to any\n");
    }

    #[test]
    fn a_hundred_thousand_routes_and_table_entries_load_and_are_all_there() {
        let (s, fw) = rig();
        let n = node(&s, &fw);
        let text = generated(100_000, 100_000);
        apply(&n, &parse(&text).unwrap(), "big.conf").unwrap();
        let (v4, _) = s.route_counts();
        assert!(v4 >= 100_000 + 2, "{v4}");
        // Every route in the FIB the workers read, not only in the table.
        let fib = s.fib();
        let base = u32::from(std::net::Ipv4Addr::new(198, 18, 16, 0));
        for k in [0u32, 1, 54_321, 99_999] {
            let a = std::net::Ipv4Addr::from(base + k);
            let nh = fib.lookup4(a, || 0).expect("routed");
            assert_eq!(nh.gateway, Some("198.18.2.2".parse().unwrap()), "{a}");
        }
        let beyond = std::net::Ipv4Addr::from(base + 100_000);
        assert!(fib.lookup4(beyond, || 0).is_none(), "{beyond}");
        let list = out(&n, "ipfw table big list");
        assert_eq!(
            list.lines().count(),
            100_000 + 1,
            "a header and every entry"
        );
    }

    #[test]
    fn the_firewall_is_turned_on_and_off_at_run_time() {
        let mut s = Stack::new(StackConfig::default());
        let (d, _far) = dev::mem::wire(dev::mem::WireConfig::default());
        s.add_interface(Box::new(d), IfConfig::default()).unwrap();
        let fw = cmds::Firewall::off(false, false, Default::default());
        let n = node(&s, &fw);
        let hooks = || s.config().pfil.inet_in.len() + s.config().pfil.inet6_out.len();
        assert!(listing(&n, "ipfw show").contains("runs no firewall"));
        assert_eq!(
            out(&n, "sysctl net.inet.ip.fw.enable=1"),
            "net.inet.ip.fw.enable: 0 -> 1\n"
        );
        assert_eq!(hooks(), 2);
        // The default rule the node was started to use (--ipfw-default deny).
        assert_eq!(out(&n, "ipfw list"), "65535 deny ip from any to any\n");
        out(&n, "ipfw add 100 allow ip from any to any");
        out(&n, "ipfw pipe 1 config bw 1Mbit/s");
        assert!(out(&n, "ipfw pipe show").starts_with("00001: "));
        out(&n, "ipfw disable firewall");
        assert_eq!(hooks(), 0);
        assert_eq!(out(&n, "sysctl -n net.inet.ip.fw.enable"), "0\n");
        // Off, it keeps its rules; on again, it filters with them.
        out(&n, "ipfw -q enable firewall");
        assert_eq!(hooks(), 2);
        assert!(out(&n, "ipfw list").starts_with("00100 allow"));
        assert!(listing(&n, "ipfw enable nat").contains("only the firewall"));
    }

    #[test]
    fn directed_broadcast_is_a_sysctl() {
        let (s, fw) = rig();
        let n = node(&s, &fw);
        assert!(out(&n, "sysctl -a").contains("net.inet.ip.directed-broadcast: 0\n"));
        out(&n, "sysctl net.inet.ip.directed-broadcast=1");
        assert!(s.directed_broadcast());
        assert!(listing(&n, "sysctl net.inet.ip.directed-broadcast=2").contains("not 0 or 1"));
        assert!(s.directed_broadcast());
    }

    /// A table line of many keys taken out of the file: a reload deletes the
    /// keys still there, though one was deleted by hand since (a `delete` of
    /// many keys is all or none).
    #[test]
    fn a_reload_takes_out_what_is_left_of_a_table_line_of_many_keys() {
        let (s, fw) = rig();
        let n = node(&s, &fw);
        let old = parse(
            "ipfw table m create type addr\n\
             ipfw table m add 198.18.5.1 1 198.18.5.2 2 198.18.5.3 3\n",
        )
        .unwrap();
        apply(&n, &old, "node.conf").unwrap();
        out(&n, "ipfw table m delete 198.18.5.2");
        let new = parse("ipfw table m create type addr\n").unwrap();
        let r = reload(&n, &old, &new, "node.conf").unwrap();
        assert_eq!(r.undone, 1);
        assert_eq!(
            out(&n, "ipfw table m list"),
            "--- table(m), type addr ---\n"
        );
    }

    /// A client's request, as the control socket runs it.
    fn request(n: &Node<'_>, args: &[&str], batch: Option<&str>) -> Result<String, String> {
        let req = crate::control::Request {
            args: args.iter().map(|a| a.to_string()).collect(),
            batch: batch.map(str::to_string),
        };
        let mut c = Conn::buffer();
        crate::control::run_request(n, &req, &mut c, &AtomicBool::new(false))
            .map(|()| c.into_output())
            .map_err(|e| e.msg)
    }

    #[test]
    fn a_batch_takes_deletions_but_no_listing_and_no_neighbour_deletion() {
        let c = parse_batch(
            "# rules\nadd allow ip from any to any\ndelete 100\ntable t delete 198.18.0.1\n-q flush\n",
            Some("ipfw"),
        )
        .unwrap();
        assert_eq!(c.lines.len(), 4);
        assert_eq!(
            c.lines[0].words,
            ["ipfw", "add", "allow", "ip", "from", "any", "to", "any"]
        );
        assert_eq!(c.lines[0].no, 2);
        assert!(parse_batch("route delete 198.19.0.0/16\n", None).is_ok());
        assert!(
            parse("route delete 198.19.0.0/16\n").is_err(),
            "not in a config file"
        );
        let e = parse_batch("add 1 allow ip from any to any\nshow\n", Some("ipfw")).unwrap_err();
        assert!(
            e.starts_with("line 2: ") && e.contains("changes nothing"),
            "{e}"
        );
        let e = parse_batch("arp -d 198.18.1.9\n", None).unwrap_err();
        assert!(e.contains("could not be put back"), "{e}");
    }

    /// `mpstack ipfw /FILE` and `mpstack config apply FILE`: every line in one
    /// batch, or, when one fails, none (the node put back, the line named).
    #[test]
    fn a_batch_applies_all_its_lines_or_none() {
        let (s, fw) = rig();
        let n = node(&s, &fw);
        let mut ipfw = String::from("table big create type addr\n");
        for k in 0..2000u32 {
            let a = std::net::Ipv4Addr::from(0xc612_1000 + k);
            ipfw += &format!("table big add {a}/32 {k}\n");
        }
        ipfw += "add 300 deny ip from table(big) to any\n";
        let said = request(&n, &["ipfw", "/etc/big.rules"], Some(&ipfw)).unwrap();
        assert!(
            said.starts_with("ipfw: /etc/big.rules: 2002 line(s) applied in one batch"),
            "{said}"
        );
        assert_eq!(out(&n, "ipfw table big list").lines().count(), 2001);
        assert!(out(&n, "ipfw list").contains("00300 deny ip from table(big) to any"));
        // Routes, deletions, and a last line that fails: nothing of it stays.
        let before = state(&n);
        let mut cfg = String::new();
        for k in 0..2000u32 {
            let a = std::net::Ipv4Addr::from(0xc613_0000 + (k << 4));
            cfg += &format!("route add {a}/28 198.18.2.2\n");
        }
        cfg += "ipfw delete 300\nipfw table big flush\nsysctl net.inet.tcp.msl=20000\n\
                route add 198.19.200.0/24 198.18.99.1\n";
        let e = request(&n, &["config", "apply", "more.conf"], Some(&cfg)).unwrap_err();
        assert!(
            e.starts_with("config apply: more.conf:2004: route add 198.19.200.0/24"),
            "{e}"
        );
        assert_eq!(state(&n), before);
        assert_eq!(out(&n, "ipfw table big list").lines().count(), 2001);
        // Without the last line, all of it; -q says nothing.
        let good = cfg.replace("route add 198.19.200.0/24 198.18.99.1\n", "");
        assert_eq!(
            request(&n, &["config", "-q", "apply", "-"], Some(&good)),
            Ok(String::new())
        );
        assert!(s.route_get("198.19.7.1".parse().unwrap()).is_some());
        assert_eq!(out(&n, "ipfw table big list").lines().count(), 1);
        assert_eq!(out(&n, "sysctl -n net.inet.tcp.msl"), "20000\n");
        // A line of a form a batch does not take is refused before any runs.
        let e = request(
            &n,
            &["config", "apply", "x"],
            Some("route add 198.19.201.0/24 198.18.2.2\nnetstat -rn\n"),
        )
        .unwrap_err();
        assert!(e.contains("x: line 2: "), "{e}");
        let r = s.route_get("198.19.201.1".parse().unwrap());
        assert!(r.is_none(), "{r:?}");
    }

    /// A control command run while a reload applies waits for it, so a refused
    /// reload, putting the node back, does not take the command's change back.
    #[test]
    fn a_command_during_a_refused_reload_waits_for_it_and_stays() {
        let (s, fw) = rig();
        let n = node(&s, &fw);
        let old = parse(BASE).unwrap();
        apply(&n, &old, "node.conf").unwrap();
        // Many lines, so that the command comes while they run, then one that fails.
        let mut text = String::from(BASE);
        for k in 0..30_000u32 {
            let a = std::net::Ipv4Addr::from(0xc612_1000 + k);
            text += &format!("route add {a}/32 198.18.2.2\n");
        }
        text += "route add 198.19.9.0/24 198.18.99.1\n";
        let new = parse(&text).unwrap();
        let first = "198.18.16.0".parse().unwrap();
        std::thread::scope(|sc| {
            let cmd = sc.spawn(|| {
                // Once the reload's lines are going in, a command of the operator's.
                while s.route_get(first).is_none() {
                    std::thread::yield_now();
                }
                request(&n, &["route", "add", "198.19.50.0/24", "198.18.1.2"], None)
            });
            let e = reload(&n, &old, &new, "node.conf").unwrap_err();
            assert!(e.contains("198.18.99.1"), "{e}");
            cmd.join().unwrap().unwrap();
        });
        assert!(s.route_get(first).is_none(), "the reload was put back");
        let r = s.route_get("198.19.50.1".parse().unwrap());
        assert!(r.is_some(), "the command's route stays");
    }
}

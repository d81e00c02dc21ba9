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
//! A line is undone by its inverse: `route add` by `route delete`, an address by
//! `-alias`, `ipfw add N` by `ipfw delete N` (so rules in a config file carry their
//! numbers), a table entry or a table by their deletion, `arp -s`/`ndp -s` by `-d`,
//! `ifconfig IF down` by `ifconfig IF up`. The others (`sysctl`, `ifconfig mtu`,
//! `ifconfig up`, `route change`, `ipfw pipe … config`, `ipfw set …`) have none:
//! taken out of the file, what they set stays.
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
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let body = raw.split_once(" #").map_or(raw, |(b, _)| b).trim();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let words: Vec<String> = body.split_whitespace().map(str::to_string).collect();
        check(&words).map_err(|e| format!("line {no}: {e}"))?;
        lines.push(Line { no, words });
    }
    Ok(Config { lines })
}

/// Whether `w` is a command that changes the node, in a form a config file takes.
fn check(w: &[String]) -> Result<(), String> {
    let v: Vec<&str> = w.iter().map(String::as_str).collect();
    let listing = || {
        Err(format!(
            "'{}' changes nothing; a config file holds changes only",
            v.join(" ")
        ))
    };
    match v[..] {
        ["route", "add" | "change", ..] => Ok(()),
        ["route", ..] => listing(),
        ["ifconfig", _, "addr"] => listing(),
        ["ifconfig", _, w, ..] if cmds::BRIDGE_WORDS.contains(&w) => Ok(()),
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
        ["arp" | "ndp", ..] => listing(),
        ["sysctl", ref rest @ ..] if !rest.is_empty() && rest.iter().all(|x| x.contains('=')) => {
            Ok(())
        }
        ["sysctl", ..] => listing(),
        ["ipfw", ref rest @ ..] => {
            let rest: Vec<&str> = rest.iter().copied().filter(|x| *x != "-q").collect();
            match rest[..] {
                ["add", n, ..] if n.parse::<u32>().is_ok() => Ok(()),
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
                ["table", t, "add", k, ..] => Some(owned(&["ipfw", "table", t, "delete", k])),
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

/// Undoes `done` (last first), as far as each line can be undone.
fn undo(node: &Node<'_>, done: &[&Line]) {
    for l in done.iter().rev() {
        if let Some(inv) = inverse(l) {
            let _ = run(node, &inv);
        }
    }
}

/// Applies every line of `cfg` in order; if one fails, undoes those before it and
/// says which failed.
pub fn apply(node: &Node<'_>, cfg: &Config, file: &str) -> Result<usize, String> {
    let mut done: Vec<&Line> = Vec::new();
    for l in &cfg.lines {
        if let Err(e) = run(node, &l.words) {
            undo(node, &done);
            return Err(format!("{file}:{}: {}: {e}", l.no, l.text()));
        }
        done.push(l);
    }
    Ok(done.len())
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
/// first), then the lines only `new` has applied (in order). If one fails, what
/// this did is undone and the lines taken out put back: the node is as `old` left
/// it, and the error names the line.
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
    let mut r = Reload::default();
    let mut undone: Vec<&Line> = Vec::new();
    for l in gone.iter().rev() {
        match inverse(l) {
            Some(inv) => {
                // An inverse that fails (the route was deleted by hand since) has
                // nothing left to undo.
                let _ = run(node, &inv);
                undone.push(l);
                r.undone += 1;
            }
            None => r.kept += 1,
        }
    }
    let mut done: Vec<&Line> = Vec::new();
    for l in &added {
        if let Err(e) = run(node, &l.words) {
            undo(node, &done);
            for u in undone.iter().rev() {
                let _ = run(node, &u.words);
            }
            return Err(format!("{file}:{}: {}: {e}", l.no, l.text()));
        }
        done.push(l);
        r.applied += 1;
    }
    Ok(r)
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
}

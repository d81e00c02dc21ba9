//! The `net` crate's families call only downward: `pfil` < `link` < `ip` <
//! (`inet` | `inet6`) < `ip46` < `tunnel` < `tcp` < `stack`, and the shared modules at the
//! crate's root (`stats`, `hdr`, `runtime`, `park`) use no family at all. IPv4 and
//! IPv6 are siblings: neither names the other; what both use is `ip`'s, and what
//! spans both (`ip46`) is above them. A stage never names a stage
//! above it; what goes up (delivery to a transport, a reject's answer, an ICMP
//! error for TCP) goes through the worker in `stack`, which drives them all.
//!
//! This test reads the sources and fails on every reference that breaks the order,
//! naming the file and line, so that an import circle cannot come back unseen.
//! Unit-test files (`tests.rs`) are left out: a test may build what it needs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The families, lowest first; the families of one tier are siblings.
const FAMILIES: [&[&str]; 8] = [
    &["pfil"],
    &["link"],
    &["ip"],
    &["inet", "inet6"],
    &["ip46"],
    &["tunnel"],
    &["tcp"],
    &["stack"],
];

fn rank(family: &str) -> Option<usize> {
    FAMILIES.iter().position(|t| t.contains(&family))
}

/// `me` may name `other`: a family below it, or itself.
fn may_name(me: &str, other: &str) -> bool {
    me == other || rank(other) < rank(me)
}

/// The order, as the failure message prints it.
fn order() -> String {
    FAMILIES
        .iter()
        .map(|t| t.join(" | "))
        .collect::<Vec<_>>()
        .join(" < ")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// What the crate root re-exports: a name at the root → the family it comes from.
fn root_aliases(lib: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let Some((fam, items)) = rest.split_once("::") else {
            continue;
        };
        let fam = fam.trim();
        if rank(fam).is_none() {
            continue;
        }
        // `family::module`, `family::{a, b}`, `family::module::{A, B}`: every name
        // these bring to the root belongs to the family.
        let names: Vec<&str> = match items.find('{') {
            Some(i) => items[i + 1..]
                .trim_end_matches('}')
                .split(',')
                .map(str::trim)
                .collect(),
            None => vec![items.rsplit("::").next().unwrap_or(items).trim()],
        };
        for n in names.into_iter().filter(|n| !n.is_empty()) {
            m.insert(n.to_string(), fam.to_string());
        }
    }
    m
}

/// The family of a file (by its first folder), or `None` for a shared module.
fn family_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    // A family of one file (`tunnel.rs`) or of a folder (`inet/`).
    let first = first.strip_suffix(".rs").unwrap_or(first);
    rank(first).map(|_| first.to_string())
}

/// The families a line names through `crate::…` paths.
fn named(line: &str, aliases: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let heads: Vec<String> = if let Some(list) = rest.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            list[..end]
                .split(',')
                .map(|s| s.trim().split("::").next().unwrap_or("").to_string())
                .collect()
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            vec![rest[..end].to_string()]
        };
        for h in heads {
            if rank(&h).is_some() {
                out.push(h);
            } else if let Some(f) = aliases.get(&h) {
                out.push(f.clone());
            }
        }
    }
    out
}

#[test]
fn families_call_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let aliases = root_aliases(&lib);
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    assert!(
        files.len() > 20,
        "sources not found under {}",
        src.display()
    );
    let mut bad = Vec::new();
    for f in &files {
        if f.file_name()
            .is_some_and(|n| n == "tests.rs" || n == "lib.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read");
        let me = family_of(&src, f);
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for other in named(code, &aliases) {
                let ok = match &me {
                    // A shared module names no family.
                    None => false,
                    Some(me) => may_name(me, &other),
                };
                if !ok {
                    bad.push(format!(
                        "{}:{}: {} names {}: {}",
                        f.strip_prefix(&src).unwrap_or(f).display(),
                        n + 1,
                        me.as_deref().unwrap_or("a shared module"),
                        other,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} references break the order {} (shared modules below all):\n{}",
        bad.len(),
        order(),
        bad.join("\n")
    );
}

#[test]
fn the_reader_sees_paths_and_lists() {
    let mut a = BTreeMap::new();
    a.insert("iface".to_string(), "link".to_string());
    assert_eq!(named("use crate::inet::ip::IpInfo;", &a), ["inet"]);
    assert_eq!(
        named("use crate::{tcp, stack::worker};", &a),
        ["tcp", "stack"]
    );
    assert_eq!(named("crate::iface::IfIndex", &a), ["link"]);
    assert!(named("crate::stats::DropReason", &a).is_empty());
}

#[test]
fn siblings_do_not_name_each_other() {
    assert!(may_name("inet6", "ip"));
    assert!(may_name("inet", "inet"));
    assert!(!may_name("inet6", "inet"));
    assert!(!may_name("inet", "inet6"));
    assert!(may_name("ip46", "inet6"));
    assert!(!may_name("ip", "inet"));
}

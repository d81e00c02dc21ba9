//! Arbitrary text as ipfw commands (`add ...`, `table ...`, `set ...`, `delete ...`,
//! `pipe N config ...`, `queue N config ...`), one per line, into a `Ruleset`: no
//! panic; every rule that parses lists in a form that parses back to the same rule;
//! the whole `list` reloads to the same `list`.
#![no_main]

use fw::{parse_rule, Ruleset};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut rs = Ruleset::default();
    for (i, line) in text.lines().enumerate().take(64) {
        let _ = rs.execute::<fw::Counters>(line, i + 1, &[]);
        let body = line.trim_start().strip_prefix("add").unwrap_or(line);
        if let Ok(r) = parse_rule(body, 1) {
            let listed = r.to_string();
            let again = parse_rule(&listed, 1).unwrap_or_else(|e| panic!("{listed}: {e}"));
            assert_eq!(again, r, "{listed}");
        }
    }
    let _ = rs.program();
    let listed = rs.list(None);
    let mut again = Ruleset::default();
    // Tables, pipes and queues first: a rule may name only what exists.
    for name in rs.table_names() {
        if let Some(t) = rs.table(name) {
            let _ = again.table_create(name, t.ttype());
        }
    }
    for p in rs.dummynet_pipes() {
        again
            .execute::<fw::Counters>(&format!("pipe {p} config"), 1, &[])
            .unwrap_or_else(|e| panic!("pipe {p}: {e}"));
    }
    for (q, p) in rs.dummynet_queues() {
        again
            .execute::<fw::Counters>(&format!("queue {q} config pipe {p}"), 1, &[])
            .unwrap_or_else(|e| panic!("queue {q}: {e}"));
    }
    for l in listed.lines().filter(|l| !l.starts_with("65535 ")) {
        again
            .execute::<fw::Counters>(&format!("add {l}"), 1, &[])
            .unwrap_or_else(|e| panic!("{l}: {e}"));
    }
    for s in 0..32 {
        let _ = again.set_enable(s, rs.set_enabled(s));
    }
    assert_eq!(
        again
            .list(None)
            .lines()
            .filter(|l| !l.starts_with("65535 "))
            .collect::<Vec<_>>(),
        listed
            .lines()
            .filter(|l| !l.starts_with("65535 "))
            .collect::<Vec<_>>()
    );
});

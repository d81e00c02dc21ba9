#!/usr/bin/env python3
"""Writes BENCHMARKS.md's result tables from the benchmarks' --json output.

Each benchmark's latest run lives in bench-results/WHAT.jsonl, as
scripts/bench-run.sh writes it: a first line {"meta": {...}} (command, commit,
date, machine), then one JSON object per line as `mpstack bench WHAT --json`
prints them. In BENCHMARKS.md, the text between

    <!-- results: WHAT -->
    <!-- end results -->

is replaced by tables made from that file: the objects grouped by the keys they
carry (a benchmark prints rows, ratios and skipped peers with different keys),
one table per group, then the command, the commit and the machine. Everything
outside the markers (the method) is left as written.

It also writes README.md's "Performance at a glance" table, between

    <!-- glance -->
    <!-- end glance -->

from the same files: the like-for-like rows listed in GLANCE below, each with the
command, commit and date of the run it comes from.

    scripts/bench-report.py            # rewrite BENCHMARKS.md and README.md's table
    scripts/bench-report.py --check    # exit 1 if either is not what the files make
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench-results")
PAGE = os.path.join(ROOT, "BENCHMARKS.md")
README = os.path.join(ROOT, "README.md")
GLANCE_BLOCK = re.compile(r"(<!-- glance -->\n)(.*?)(<!-- end glance -->)", re.S)
BLOCK = re.compile(r"(<!-- results: ([a-z0-9-]+) -->\n)(.*?)(<!-- end results -->)", re.S)


def load(what):
    path = os.path.join(RESULTS, what + ".jsonl")
    meta, rows = None, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")
            if "meta" in obj and meta is None:
                meta = obj["meta"]
            elif isinstance(obj, dict):
                rows.append(obj)
    if meta is None:
        sys.exit(f"{path}: no meta line (write it with scripts/bench-run.sh)")
    return meta, rows


def cell(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 100:
            return f"{v:.1f}"
        if abs(v) >= 10:
            return f"{v:.2f}"
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    if v is None:
        return ""
    if isinstance(v, dict):
        return ", ".join(f"{k} {cell(x)}" for k, x in v.items())
    v = str(v)
    if "/.cargo/registry/" in v or v.startswith("$CARGO_HOME/registry/"):
        # A file of a crate's sources: the crate and the file, not the home directory.
        v = "crate " + "/".join(v.split("/")[-3:])
    return v.replace("|", "\\|").replace("\n", " ")


def normalize(r):
    """A ratio object (`ratio_A_to_B` beside `A_unit` and `B_unit`, as the benchmarks
    print them) as a row of a ratio table: ratio, value, ours, peer, unit."""
    keys = [k for k in r if k.startswith("ratio_")]
    if len(keys) != 1:
        return r
    k = keys[0]
    a, _, b = k[len("ratio_"):].partition("_to_")
    out = {"ratio": f"{a} / {b}".replace("_", "-"), "value": r[k]}
    unit = None
    for x, v in r.items():
        if x in ("bench", k):
            continue
        if b and x.startswith(b + "_"):
            out["peer"], unit = v, x[len(b) + 1:]
        elif x.startswith(a + "_"):
            out["ours"], unit = v, x[len(a) + 1:]
        else:
            out[x] = v
    if unit:
        out["unit"] = unit.replace("_", " ")
    return out


def tables(rows):
    """One table per set of keys: those holding ratios first, then the others in the
    order each set first appears."""
    groups = {}
    for r in map(normalize, rows):
        keys = tuple(k for k in r if k != "bench")
        groups.setdefault(keys, []).append(r)
    # The ratios (the like-for-like figures) first, then the rows they come from.
    order = sorted(groups.items(), key=lambda kv: not any("ratio" in k for k in kv[0]))
    out = []
    for keys, rs in order:
        if not keys:
            continue
        # A column with one value in every row of a table of three or more (the
        # route table's path, the frame size) is said once, under the table.
        same = [k for k in keys if len(rs) >= 3 and all(r.get(k) == rs[0].get(k) for r in rs)
                and not k.startswith("ratio")]
        cols = [k for k in keys if k not in same] or list(keys)
        out.append("| " + " | ".join(k.replace("_", " ") for k in cols) + " |")
        out.append("|" + "|".join("---" for _ in cols) + "|")
        for r in rs:
            out.append("| " + " | ".join(cell(r.get(k)) for k in cols) + " |")
        if same and cols != list(keys):
            out.append("")
            out.append("In every row: " + "; ".join(
                f"{k.replace('_', ' ')} {cell(rs[0].get(k))}" for k in same) + ".")
        out.append("")
    return "\n".join(out)


def render(what):
    meta, rows = load(what)
    body = tables(rows)
    foot = (
        f"Command: `{meta.get('command', '?')}`; commit {meta.get('commit', '?')}; "
        f"{meta.get('date', '?')}; {meta.get('machine', '?')}. "
        f"Data: [bench-results/{what}.jsonl](bench-results/{what}.jsonl)."
    )
    return body + "\n" + foot + "\n"


def find(rows, **kv):
    """The first row carrying every key of kv with that value."""
    for r in rows:
        if all(r.get(k) == v for k, v in kv.items()):
            return r
    return None


def num(v, unit=""):
    if v >= 100:
        s = f"{v:,.0f}"
    elif v >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.2f}"
    return s + (" " + unit if unit else "")


def tcp_ratio(ours, peer, peer_label):
    def f(rows):
        key = "ratio_" + ours.replace("-", "_") + "_to_" + peer.replace("-", "_")
        r = next((x for x in rows if key in x), None)
        if r is None:
            return None
        o = r[ours.replace("-", "_") + "_gbit_per_s"]
        p = r[peer.replace("-", "_") + "_gbit_per_s"]
        return (f"{num(o, 'Gbit/s')} (`{ours}`)", f"{peer_label}: {num(p)}", f"{r[key]:.2f}×")
    return f


def pair(ours, peer, key, show, label):
    """A like-for-like row from two rows of one run: `ours` and `peer` select them
    (as `find` takes), `key` is the figure compared, `show` formats ours (and,
    without its unit, the peer's)."""
    def f(rows):
        o, p = find(rows, **ours), find(rows, **peer)
        if not o or not p or key not in o or key not in p:
            return None
        return (show(o[key], True), f"{label}: {show(p[key], False)}", f"{o[key] / p[key]:.2f}×")
    return f


def per_s(v, unit):
    return f"{v:,.0f}/s"


tcp_conns = pair(dict(what="conns_per_s", impl="mpstack"), dict(what="conns_per_s", impl="linux-loopback"),
                 "conns_per_s", per_s, "Linux loopback")
router_full = pair(dict(case="v4-full", workers=1), dict(case="design", workers=1),
                   "mpps_per_core", lambda v, u: num(v, "Mpps" if u else ""), "the design loop")
def mfps(v, unit):
    return num(v / 1e6, "Mfps" if unit else "")


rfc2544_64 = pair(dict(test="throughput", case="mpstack-router", frame_size=64),
                  dict(test="throughput", case="linux-router", frame_size=64),
                  "throughput_fps", mfps, "Linux kernel router")
rfc2544_one_core = pair(dict(test="one_core", case="mpstack-router"), dict(test="one_core", case="linux-router"),
                        "forwarded_fps", mfps, "Linux kernel router")
netchannel_2w = pair(dict(row="netchannel", workers=2), dict(row="udp-socket", workers=2),
                     "mpps", lambda v, u: num(v, "Mpps" if u else ""), "a UDP socket")


def fw_100(rows):
    r = find(rows, case="A100", variant="eval")
    if not r:
        return None
    return (f"{r['ours_ns_per_pkt']:,.0f} ns", f"a naive interpreter: {r['naive_ns_per_pkt']:,.0f}",
            f"{r['naive_ns_per_pkt'] / r['ours_ns_per_pkt']:.1f}× faster")


def quic_1(rows):
    r = next((x for x in rows if "ratio_mpstack_to_linux_loopback" in x), None)
    if not r:
        return None
    return (num(r["mpstack_gbit_per_s"], "Gbit/s"), f"quinn on Linux loopback: {num(r['linux_loopback_gbit_per_s'])}",
            f"{r['ratio_mpstack_to_linux_loopback']:.2f}×")


# README's like-for-like rows: what, the benchmark's file, how to read it.
GLANCE = [
    ("TCP, one flow, one thread, MTU 1500, no offload", "tcp", tcp_ratio("mpstack-polled", "smoltcp", "smoltcp 0.14")),
    ("TCP, one flow, worker threads, MTU 1500, no offload", "tcp", tcp_ratio("mpstack", "linux-loopback", "Linux loopback")),
    ("TCP connections per second (open, 64 B each way, close)", "tcp", tcp_conns),
    ("64-byte IPv4 forwarding, full BGP table (1.07 M routes), per core", "router", router_full),
    ("ipfw, 100 one-test rules, ns per packet", "fw", fw_100),
    ("RFC 2544 no-drop rate, 64 B, router over AF_PACKET/veth", "rfc2544", rfc2544_64),
    ("64 B forwarded over AF_PACKET/veth, tester and router on one core (equal CPU)", "rfc2544", rfc2544_one_core),
    ("64-byte packets to one application thread, 2 workers", "netchannel", netchannel_2w),
    ("QUIC (quinn 0.11), one stream", "quic", quic_1),
]


def glance():
    out = ["| what | mpstack | peer, same run | ratio | command (commit, date) |",
           "|---|---:|---:|---:|---|"]
    for label, what, f in GLANCE:
        path = os.path.join(RESULTS, what + ".jsonl")
        if not os.path.exists(path):
            sys.exit(f"README's table needs bench-results/{what}.jsonl (run scripts/bench-run.sh {what})")
        meta, rows = load(what)
        got = f(rows)
        if got is None:
            skipped = next((r["skipped"] for r in rows if "skipped" in r), None)
            why = f"skipped: {skipped}" if skipped else "not in the run"
            got = (why, "", "")
        ours, peer, ratio = got
        out.append(f"| {label} | {ours} | {peer} | {ratio} | "
                   f"`{meta.get('command', '?')}` ({meta.get('commit', '?')}, {meta.get('date', '?')}) |")
    out.append("")
    out.append(best_tcp())
    return "\n".join(out) + "\n"


def best_tcp():
    """The best TCP configuration of the tcp run, labelled as such."""
    meta, rows = load("tcp")
    big = next((x for x in rows if "ratio_mpstack_polled_big_zc_to_mpstack_polled_big" in x), None)
    if big is None:
        return "Best configurations: not in the tcp run."
    return (
        "Best configurations, labelled as such (not like for like: smoltcp has no "
        "segmentation offload): TCP with 512 KiB segments (BIG TCP) polled in one thread, "
        f"{num(big['mpstack_polled_big_gbit_per_s'], 'Gbit/s')} (`mpstack-polled-big`), and "
        f"{num(big['mpstack_polled_big_zc_gbit_per_s'], 'Gbit/s')} with the zero-copy calls "
        f"(`mpstack-polled-big-zc`, "
        f"{big['ratio_mpstack_polled_big_zc_to_mpstack_polled_big']:.2f}× its copying row in the same run; "
        f"`{meta.get('command', '?')}`, {meta.get('commit', '?')})."
    )


def main():
    check = "--check" in sys.argv[1:]
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    missing = []

    def sub(m):
        what = m.group(2)
        if not os.path.exists(os.path.join(RESULTS, what + ".jsonl")):
            missing.append(what)
            return m.group(0)
        return m.group(1) + render(what) + m.group(4)

    new = BLOCK.sub(sub, page)
    if missing:
        sys.exit("no results for: " + ", ".join(missing) + " (run scripts/bench-run.sh)")
    with open(README, encoding="utf-8") as f:
        readme = f.read()
    if not GLANCE_BLOCK.search(readme):
        sys.exit("README.md has no <!-- glance --> block")
    table = glance()
    new_readme = GLANCE_BLOCK.sub(lambda m: m.group(1) + table + m.group(3), readme)
    if check:
        if new != page:
            sys.exit("BENCHMARKS.md differs from what bench-results/ makes: run scripts/bench-report.py")
        if new_readme != readme:
            sys.exit("README.md's performance table differs from what bench-results/ makes: run scripts/bench-report.py")
        return
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(new)
    with open(README, "w", encoding="utf-8") as f:
        f.write(new_readme)


if __name__ == "__main__":
    main()

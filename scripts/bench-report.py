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

    scripts/bench-report.py            # rewrite BENCHMARKS.md
    scripts/bench-report.py --check    # exit 1 if BENCHMARKS.md is not what the files make
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench-results")
PAGE = os.path.join(ROOT, "BENCHMARKS.md")
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
    return str(v).replace("|", "\\|").replace("\n", " ")


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
        out.append("| " + " | ".join(k.replace("_", " ") for k in keys) + " |")
        out.append("|" + "|".join("---" for _ in keys) + "|")
        for r in rs:
            out.append("| " + " | ".join(cell(r.get(k)) for k in keys) + " |")
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
    if check:
        if new != page:
            sys.exit("BENCHMARKS.md differs from what bench-results/ makes: run scripts/bench-report.py")
        return
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(new)


if __name__ == "__main__":
    main()

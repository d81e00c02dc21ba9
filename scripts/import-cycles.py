#!/usr/bin/env python3
"""Import circles between the modules of a crate (issue 47, item 7): module A naming
something of module B (`use crate::b::...`, `super::b::...`, or such a path in code)
while B, directly or through others, names something of A.

The modules are the crate's files (`a.rs` and `a/mod.rs` are module `a`, `a/b.rs`
is `a::b`). A path is resolved to the deepest module it names (`crate::tcp::layer::
TcpCx` is `tcp::layer`). A module and its ancestors are not a circle: a child using
its parent's items and the parent re-exporting the child's is how Rust modules are
built. Any other dependency is one between the two siblings under the modules' lowest
common ancestor (`stack::worker::input` naming `stack::netchannel::take` is
`stack::worker -> stack::netchannel`), and a circle is a strongly connected set of
such siblings. Test code is not looked at (as scripts/check-sizes.py: files named
`tests.rs` or `*_tests.rs`, files under `tests/`, `benches/`, `fuzz/`, items under
`#[cfg(test)]` and the files of `#[cfg(test)] mod NAME;`).

The order of the families at the crate's top (`pfil` < `link` < ... < `stack`) is
crates/net/tests/layering.rs's to check; this script looks at every level, a
family's modules among themselves included.

The dependencies inside the circles of today are listed in scripts/cycle-allow.txt,
one a line, by crate:

    net: inet -> stack

(`#` starts a comment). The list only shrinks: a dependency inside a circle that is
not listed fails (a new circle, or a circle grown by one more import), and a listed
one that is gone or no longer inside a circle fails until its line is removed.

Usage: python3 scripts/import-cycles.py [-v]   (-v: where each dependency is named;
exit status 1 on a failure)
"""

import importlib.util
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOW = os.path.join("scripts", "cycle-allow.txt")
CRATES = {"net": os.path.join("crates", "net", "src")}
SKIP_DIRS = {"tests", "benches", "fuzz", "target", ".git"}
CFG_TEST = re.compile(r"#\[cfg\(\s*(?:all\(\s*)?test\b")


def _lexer():
    """The tokenizer of scripts/check-sizes.py (strings, chars and comments skipped)."""
    path = os.path.join(ROOT, "scripts", "check-sizes.py")
    spec = importlib.util.spec_from_file_location("check_sizes", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SIZES = _lexer()


def module_of(rel):
    """The module path (a tuple) of a file relative to the crate's src."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests(toks):
    """The tokens without the items under `#[cfg(test)]`, and the names of the
    `#[cfg(test)] mod NAME;` declarations."""
    out, test_mods, i = [], [], 0
    while i < len(toks):
        kind, text, _ = toks[i]
        if kind == "attr" and CFG_TEST.match(text) and not text.startswith("#!"):
            j = i + 1
            while j < len(toks) and toks[j][0] == "attr":
                j += 1
            k = j
            while k < len(toks) and toks[k][1] in ("pub", "crate", "(", ")", "super", "in"):
                k += 1
            if k + 2 < len(toks) and toks[k][1] == "mod" and toks[k + 2][1] == ";":
                test_mods.append(toks[k + 1][1])
            # The item (or field, or statement) the attribute is on: up to its `;`,
            # its closing brace or a `,` at its level, or the end of what holds it.
            braces = parens = 0
            while j < len(toks):
                t = toks[j][1] if toks[j][0] == "p" else None
                if t in (")", "]", "}") and braces == 0 and parens == 0:
                    break
                j += 1
                if t in ("(", "["):
                    parens += 1
                elif t in (")", "]"):
                    parens -= 1
                elif t == "{":
                    braces += 1
                elif t == "}":
                    braces -= 1
                    if braces == 0 and parens == 0:
                        break
                elif t in (";", ",") and braces == 0 and parens == 0:
                    break
            i = j
            continue
        out.append(toks[i])
        i += 1
    return out, test_mods


def path_at(toks, i):
    """The `a::b::c` path starting at token `i` (identifiers), and the index after it."""
    parts = [toks[i][1]]
    i += 1
    while (
        i + 2 < len(toks)
        and toks[i][1] == ":"
        and toks[i + 1][1] == ":"
        and toks[i + 2][0] == "id"
    ):
        parts.append(toks[i + 2][1])
        i += 3
    return parts, i


def use_paths(toks, i, prefix):
    """The paths of a `use` tree starting at token `i` (after `use` or a `{`), each
    as a list of identifiers; returns (paths, index after the tree)."""
    paths = []
    parts = list(prefix)
    while i < len(toks):
        kind, text, _ = toks[i]
        if kind == "id" and text == "self":
            # `use a::b::{self, c}`: `a::b` itself.
            if not parts:
                parts.append(text)
            i += 1
        elif kind == "id" and text != "as":
            parts.append(text)
            i += 1
        elif text == ":" and i + 1 < len(toks) and toks[i + 1][1] == ":":
            i += 2
        elif text == "{":
            while True:
                sub, i = use_paths(toks, i + 1, parts)
                paths.extend(sub)
                if i >= len(toks) or toks[i][1] != ",":
                    break
            i += 1  # the `}`
            return paths, i
        elif text == "as":
            i += 2  # `as NAME`
        elif text == "*":
            i += 1
        else:
            break
    if parts != list(prefix):
        paths.append(parts)
    return paths, i


def references(toks):
    """(line, path) for every `crate::`, `super::` or `self::` path of the tokens, in
    `use` declarations and in code."""
    out, i = [], 0
    while i < len(toks):
        kind, text, line = toks[i]
        if kind == "id" and text == "use":
            paths, i = use_paths(toks, i + 1, [])
            out.extend((line, p) for p in paths if p and p[0] in ("crate", "super", "self"))
            continue
        if kind == "id" and text in ("crate", "super", "self"):
            prev = toks[i - 1][1] if i else ""
            if prev not in (":", "$"):
                parts, j = path_at(toks, i)
                if len(parts) > 1:
                    out.append((line, parts))
                i = j
                continue
        i += 1
    return out


def resolve(here, parts, modules):
    """The deepest module of `modules` that path `parts`, written in module `here`,
    names; None for a path that leaves the crate."""
    base = list(here)
    rest = list(parts)
    if rest[0] == "crate":
        base, rest = [], rest[1:]
    else:
        # `self` is the module itself; each `super` its parent.
        if rest[0] == "self":
            rest = rest[1:]
        while rest and rest[0] == "super":
            if not base:
                return None
            base.pop()
            rest = rest[1:]
    cur = tuple(base)
    for p in rest:
        nxt = cur + (p,)
        if nxt not in modules:
            break
        cur = nxt
    return cur


def scan_crate(src_dir):
    """{(a, b): [(file, line, path)]}: the sibling dependencies of the crate."""
    files = []
    for dirpath, dirnames, filenames in os.walk(src_dir):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for f in sorted(filenames):
            if f.endswith(".rs"):
                files.append(os.path.relpath(os.path.join(dirpath, f), src_dir))
    parsed, test_files = {}, set()
    for rel in files:
        if SIZES.is_test_file(rel):
            continue
        with open(os.path.join(src_dir, rel), encoding="utf-8") as fh:
            toks, test_mods = strip_tests(list(SIZES.tokens(fh.read())))
        parsed[rel] = toks
        d = SIZES.child_dir(rel)
        for name in test_mods:
            test_files.add(os.path.join(d, name + ".rs"))
            test_files.add(os.path.join(d, name, "mod.rs"))
    parsed = {r: t for r, t in parsed.items() if r not in test_files}
    modules = {module_of(r) for r in parsed}
    deps = {}
    for rel, toks in sorted(parsed.items()):
        here = module_of(rel)
        for line, parts in references(toks):
            there = resolve(here, parts, modules)
            if there is None or there == here:
                continue
            n = 0
            while n < min(len(here), len(there)) and here[n] == there[n]:
                n += 1
            if n == len(here) or n == len(there):
                continue  # an ancestor and its descendant
            a, b = "::".join(here[: n + 1]), "::".join(there[: n + 1])
            deps.setdefault((a, b), []).append((rel, line, "::".join(parts)))
    return deps


def circles(deps):
    """The strongly connected sets (of two or more modules) of the dependencies."""
    graph = {}
    for a, b in deps:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def read_allow():
    allow, errors = {}, []
    path = os.path.join(ROOT, ALLOW)
    if not os.path.exists(path):
        return allow, errors
    pat = re.compile(r"^([A-Za-z0-9_-]+):\s*(\S+)\s*->\s*(\S+)$")
    with open(path, encoding="utf-8") as fh:
        for no, raw in enumerate(fh, 1):
            text = raw.split("#", 1)[0].strip()
            if not text:
                continue
            m = pat.match(text)
            if not m:
                errors.append(f"{ALLOW}:{no}: expected `CRATE: A -> B`, got {text!r}")
                continue
            key = (m.group(1), m.group(2), m.group(3))
            if key in allow:
                errors.append(f"{ALLOW}:{no}: {text} is listed twice")
            allow[key] = no
    return allow, errors


def main():
    verbose = sys.argv[1:] == ["-v"]
    if sys.argv[1:] and not verbose:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    allow, errors = read_allow()
    inside = {}
    for crate, src in sorted(CRATES.items()):
        deps = scan_crate(os.path.join(ROOT, src))
        for comp in circles(deps):
            members = set(comp)
            print(f"note: {crate}: circle of {len(comp)}: {', '.join(comp)}")
            for (a, b), where in sorted(deps.items()):
                if a in members and b in members:
                    inside[(crate, a, b)] = where
                    if verbose:
                        for rel, line, p in where:
                            print(f"    {a} -> {b}: {src}/{rel}:{line} {p}")
    for key, where in sorted(inside.items()):
        if key not in allow:
            rel, line, p = where[0]
            src = CRATES[key[0]]
            errors.append(
                f"{key[0]}: {key[1]} -> {key[2]} closes an import circle"
                f" ({src}/{rel}:{line} names {p}; {len(where)} place(s)):"
                f" move what both use to a module both import, or invert the dependency"
                f" (only what was circular before is listed in {ALLOW})"
            )
    for key in sorted(allow):
        if key not in inside:
            errors.append(
                f"{key[0]}: {key[1]} -> {key[2]} is no longer inside an import circle:"
                f" remove it from {ALLOW}"
            )
    if errors:
        for e in errors:
            print("error: " + e, file=sys.stderr)
        print(f"import-cycles: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    print(
        f"import-cycles: ok ({len(inside)} dependency(ies) inside circles, all in {ALLOW})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

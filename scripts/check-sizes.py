#!/usr/bin/env python3
"""Size limits of the Rust sources (issue 47, item 8): no function over 150 lines and
no file over 1,000 lines outside tests.

A function is measured from the line of its `fn` keyword to its closing brace, the
braces matched by a small lexer that skips strings, raw strings, byte strings, char
literals and comments. A file is measured in lines, without its `#[cfg(test)] mod`
blocks. Test code is not measured: files named `tests.rs` or `*_tests.rs`, files under
`tests/`, `benches/` or `fuzz/` directories, `#[cfg(test)] mod NAME { ... }` blocks and
the files of `#[cfg(test)] mod NAME;` declarations.

What is over a limit today is listed in scripts/size-allow.txt, one item a line with its
size when it was recorded:

    crates/x/src/big.rs 1234
    crates/x/src/big.rs::long_fn 321

(`#` starts a comment). The list only shrinks: an item over its limit and not listed
fails, a listed item that grew beyond its recorded size fails, and a listed item that is
now within the limits, or gone, fails until its line is removed. Two functions of the
same name in one file are one item, the longer one measured.

Usage: python3 scripts/check-sizes.py   (exit status 1 on a failure)
"""

import os
import re
import sys

FN_LIMIT = 150
FILE_LIMIT = 1000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOW = os.path.join("scripts", "size-allow.txt")
SCANNED = ["crates"]
SKIP_DIRS = {"tests", "benches", "fuzz", "target", ".git"}

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CFG_TEST = re.compile(r"#\[cfg\(\s*(?:all\(\s*)?test\b")


def tokens(src):
    """Yields (kind, text, line) for the code of `src`: kind is "id" for an identifier
    or keyword, "p" for one punctuation character, "attr" for a whole outer attribute
    `#[...]` (its text), never anything inside a string, char literal or comment."""
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
        elif (m := re.compile(r'(?:b|c)?r(#*)"').match(src, i)) and (
            i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j + len(end)
            line += src.count("\n", i, j)
            i = j
        elif c == '"' or (src.startswith(('b"', 'c"'), i) and not _in_ident(src, i)):
            i += 1 if c == '"' else 2
            start = i
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            line += src.count("\n", start, i)
            i += 1
        elif c == "'" or (src.startswith("b'", i) and not _in_ident(src, i)):
            k = i + (1 if c == "'" else 2)
            if k < n and src[k] == "\\":
                # An escaped char literal: '\n', '\'', '\u{7f}'.
                j = k + 2
                while j < n and src[j] != "'":
                    j += 1
                i = j + 1
            elif k + 1 < n and src[k + 1] == "'":
                i = k + 2
            else:
                # A lifetime or label ('a, 'static): the quote alone.
                yield ("p", "'", line)
                i += 1
        elif src.startswith("#[", i) or src.startswith("#![", i):
            # The attribute's text, with its brackets matched (strings inside skipped).
            start, start_line, depth = i, line, 0
            i = src.index("[", i)
            while i < n:
                ch = src[i]
                if ch == '"':
                    i += 1
                    while i < n and src[i] != '"':
                        i += 2 if src[i] == "\\" else 1
                elif ch == "[":
                    depth += 1
                elif ch == "]":
                    depth -= 1
                    if depth == 0:
                        i += 1
                        break
                elif ch == "\n":
                    line += 1
                i += 1
            yield ("attr", src[start:i], start_line)
        elif c.isalpha() or c == "_":
            m = IDENT.match(src, i)
            yield ("id", m.group(0), line)
            i = m.end()
        else:
            yield ("p", c, line)
            i += 1


def _in_ident(src, i):
    return i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")


def measure(src):
    """(functions, file_lines, test_mods): functions as {name: lines} (the longest of a
    name), file_lines without `#[cfg(test)] mod` blocks, test_mods the names of
    `#[cfg(test)] mod NAME;` declarations (test files elsewhere)."""
    toks = list(tokens(src))
    fns, test_mods = {}, []
    skipped = 0  # lines inside #[cfg(test)] mod blocks
    i, cfg_test = 0, False
    # Open braces: the stack holds (kind, name, start line); kind "fn", "test" or None.
    stack = []
    pending = None  # ("fn", name, line) or ("test", None, line) waiting for its `{`
    in_test = 0
    while i < len(toks):
        kind, text, line = toks[i]
        if kind == "attr":
            if CFG_TEST.match(text) and not text.startswith("#!"):
                cfg_test = True
            i += 1
            continue
        if kind == "id" and text == "mod" and cfg_test and i + 1 < len(toks):
            name = toks[i + 1][1]
            if i + 2 < len(toks) and toks[i + 2][1] == ";":
                test_mods.append(name)
            else:
                pending = ("test", name, line)
            cfg_test = False
            i += 2
            continue
        if kind == "id" and text == "fn" and i + 1 < len(toks) and toks[i + 1][0] == "id":
            if pending is None or pending[0] != "test":
                pending = ("fn", toks[i + 1][1], line)
            i += 2
            continue
        if kind == "p":
            if text in ";}" or text == "{":
                cfg_test = False
            if text == ";" and pending and pending[0] == "fn" and _sig_depth(stack) == 0:
                # A declaration without a body (a trait's method).
                pending = None
            elif text in "([":
                stack.append(("paren", None, line))
            elif text in ")]":
                if stack and stack[-1][0] == "paren":
                    stack.pop()
            elif text == "{":
                if pending and _sig_depth(stack) == 0:
                    stack.append(pending)
                    if pending[0] == "test":
                        in_test += 1
                    pending = None
                else:
                    stack.append((None, None, line))
            elif text == "}":
                while stack and stack[-1][0] == "paren":
                    stack.pop()
                if stack:
                    k, name, start = stack.pop()
                    if k == "fn" and not in_test:
                        fns[name] = max(fns.get(name, 0), line - start + 1)
                    elif k == "test":
                        in_test -= 1
                        if not in_test:
                            skipped += line - start + 1
        elif kind == "id":
            cfg_test = cfg_test and text in ("pub", "crate", "super", "in", "self")
        i += 1
    lines = src.count("\n") + (0 if src.endswith("\n") or not src else 1)
    return fns, lines - skipped, test_mods


def _sig_depth(stack):
    """The parentheses open since the last brace (a signature's `(...)` or `[..; N]`)."""
    d = 0
    for k, _, _ in reversed(stack):
        if k != "paren":
            break
        d += 1
    return d


def is_test_file(rel):
    parts = rel.split("/")
    base = parts[-1]
    return (
        base == "tests.rs"
        or base.endswith("_tests.rs")
        or any(p in SKIP_DIRS for p in parts[:-1])
    )


def child_dir(rel):
    """The directory a file's `mod NAME;` files are in."""
    d, base = os.path.split(rel)
    if base in ("mod.rs", "lib.rs", "main.rs"):
        return d
    return os.path.join(d, base[:-3])


def scan():
    """{key: lines} for every measured item over its limit, keys as the allow-list's."""
    files = []
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for f in sorted(filenames):
                if f.endswith(".rs"):
                    files.append(os.path.relpath(os.path.join(dirpath, f), ROOT))
    measured, test_files = {}, set()
    for rel in files:
        if is_test_file(rel):
            continue
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            measured[rel] = measure(fh.read())
        for name in measured[rel][2]:
            d = child_dir(rel)
            test_files.add(os.path.join(d, name + ".rs"))
            test_files.add(os.path.join(d, name, "mod.rs"))
    over, sizes = {}, {}
    for rel, (fns, lines, _) in measured.items():
        if rel in test_files:
            continue
        sizes[rel] = lines
        if lines > FILE_LIMIT:
            over[rel] = lines
        for name, n in fns.items():
            sizes[rel + "::" + name] = n
            if n > FN_LIMIT:
                over[rel + "::" + name] = n
    return over, sizes


def read_allow():
    allow, errors = {}, []
    path = os.path.join(ROOT, ALLOW)
    if not os.path.exists(path):
        return allow, errors
    with open(path, encoding="utf-8") as fh:
        for no, raw in enumerate(fh, 1):
            text = raw.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split()
            if len(parts) != 2 or not parts[1].isdigit():
                errors.append(f"{ALLOW}:{no}: expected `PATH LINES` or `PATH::FN LINES`, got {text!r}")
                continue
            if parts[0] in allow:
                errors.append(f"{ALLOW}:{no}: {parts[0]} is listed twice")
            allow[parts[0]] = int(parts[1])
    return allow, errors


def main():
    if len(sys.argv) > 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    over, sizes = scan()
    allow, errors = read_allow()
    notes = []
    for key, n in sorted(over.items()):
        limit = FN_LIMIT if "::" in key else FILE_LIMIT
        what = "function" if "::" in key else "file"
        if key not in allow:
            errors.append(
                f"{key}: {what} of {n} lines, over the limit of {limit}: split it"
                f" (only what was over before is listed in {ALLOW})"
            )
        elif n > allow[key]:
            errors.append(
                f"{key}: {what} grew to {n} lines, beyond the {allow[key]} recorded in {ALLOW}"
                f" (the list only shrinks): split it"
            )
        elif n < allow[key]:
            notes.append(f"{key}: {n} lines, {allow[key]} recorded: lower it in {ALLOW}")
    for key, recorded in sorted(allow.items()):
        if key in over:
            continue
        limit = FN_LIMIT if "::" in key else FILE_LIMIT
        if key in sizes:
            errors.append(
                f"{key}: {sizes[key]} lines, within the limit of {limit} now:"
                f" remove it from {ALLOW}"
            )
        else:
            errors.append(f"{key}: no such file or function any more: remove it from {ALLOW}")
    for n in notes:
        print("note: " + n)
    if errors:
        for e in errors:
            print("error: " + e, file=sys.stderr)
        print(
            f"check-sizes: {len(errors)} problem(s); limits: {FN_LIMIT} lines a function,"
            f" {FILE_LIMIT} a file, outside tests",
            file=sys.stderr,
        )
        return 1
    print(
        f"check-sizes: ok ({len(over)} item(s) over the limits, all in {ALLOW}"
        f" at or below their recorded size)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Check the licences of every package in the resolved Cargo dependency graph.

Runs `cargo metadata --format-version 1 --locked` (without `--locked` when there is no
Cargo.lock yet) and fails with exit status 1, listing the offenders, when

* a third-party package (any package in the metadata's `packages` that is not a workspace
  member) has a licence expression that cannot be satisfied using only the permissive
  allow-list below, or has no SPDX expression at all (only a `license-file`), or
* a workspace member's licence is not exactly "MIT OR Apache-2.0".

SPDX expressions are parsed with OR, AND, WITH and parentheses; the legacy "/" separator
counts as OR. An OR is satisfied if any branch is, an AND only if all branches are. A
"WITH" term is allowed only if the whole term (licence plus exception) is on the list.
"ID+" ("this version or later") is allowed when ID is.

Python 3.11 standard library only.

Usage:
    scripts/check-licences.py                  # check the workspace containing this script
    scripts/check-licences.py --metadata FILE  # check a saved `cargo metadata` JSON instead
    scripts/check-licences.py --self-test      # run the parser's built-in tests
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ALLOWED = {
    "MIT",
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "0BSD",
    "BSL-1.0",
    "CC0-1.0",
    "Unlicense",
    "Unicode-3.0",
    "Unicode-DFS-2016",
}
# SPDX identifiers match case-insensitively.
_ALLOWED_FOLDED = {a.casefold() for a in ALLOWED}

WORKSPACE_LICENCE = "MIT OR Apache-2.0"

_TOKEN_RE = re.compile(r"\s*(?:(\()|(\))|(/)|([A-Za-z0-9.+:\-]+))")


class SpdxError(ValueError):
    pass


def tokenize(expr: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    expr = expr.rstrip()
    while pos < len(expr):
        m = _TOKEN_RE.match(expr, pos)
        if not m or m.end() == pos:
            raise SpdxError(f"unexpected character {expr[pos:].lstrip()[:1]!r} at offset {pos}")
        lparen, rparen, slash, word = m.groups()
        if lparen:
            tokens.append("(")
        elif rparen:
            tokens.append(")")
        elif slash:
            tokens.append("OR")  # legacy "MIT/Apache-2.0"
        else:
            upper = word.upper()
            tokens.append(upper if upper in ("AND", "OR", "WITH") else word)
        pos = m.end()
    return tokens


# AST: ("lic", "MIT") | ("with", "Apache-2.0", "LLVM-exception") | ("and", [..]) | ("or", [..])
def parse(expr: str):
    tokens = tokenize(expr)
    if not tokens:
        raise SpdxError("empty expression")
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        tok = peek()
        if tok is None:
            raise SpdxError("unexpected end of expression")
        pos += 1
        return tok

    def ident(what: str) -> str:
        tok = take()
        if tok in ("(", ")", "AND", "OR", "WITH"):
            raise SpdxError(f"expected {what}, found {tok!r}")
        return tok

    def or_expr():
        branches = [and_expr()]
        while peek() == "OR":
            take()
            branches.append(and_expr())
        return branches[0] if len(branches) == 1 else ("or", branches)

    def and_expr():
        parts = [with_expr()]
        while peek() == "AND":
            take()
            parts.append(with_expr())
        return parts[0] if len(parts) == 1 else ("and", parts)

    def with_expr():
        if peek() == "(":
            take()
            node = or_expr()
            if take() != ")":
                raise SpdxError("expected ')'")
            return node
        lic = ident("a licence identifier")
        if peek() == "WITH":
            take()
            return ("with", lic, ident("an exception identifier"))
        return ("lic", lic)

    node = or_expr()
    if pos != len(tokens):
        raise SpdxError(f"unexpected {tokens[pos]!r}")
    return node


def _term_allowed(term: str) -> bool:
    if term.casefold() in _ALLOWED_FOLDED:
        return True
    # "ID+" means "this version or any later one": we may pick this version.
    return term.endswith("+") and term[:-1].casefold() in _ALLOWED_FOLDED


def satisfiable(node) -> bool:
    kind = node[0]
    if kind == "lic":
        return _term_allowed(node[1])
    if kind == "with":
        return _term_allowed(f"{node[1]} WITH {node[2]}")
    if kind == "and":
        return all(satisfiable(n) for n in node[1])
    if kind == "or":
        return any(satisfiable(n) for n in node[1])
    raise AssertionError(node)


def check_expression(expr: str | None) -> str | None:
    """Return None if `expr` is acceptable, else a reason."""
    if expr is None or not expr.strip():
        return "no SPDX licence expression"
    try:
        node = parse(expr)
    except SpdxError as e:
        return f"unparsable licence expression: {e}"
    return None if satisfiable(node) else "not satisfiable with the allow-list"


def load_metadata(root: Path) -> dict:
    cmd = ["cargo", "metadata", "--format-version", "1"]
    if (root / "Cargo.lock").exists():
        cmd.append("--locked")
    cmd += ["--manifest-path", str(root / "Cargo.toml")]
    proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"licences: `{' '.join(cmd)}` failed (exit {proc.returncode})", file=sys.stderr)
        sys.exit(1)
    return json.loads(proc.stdout)


def check(metadata: dict) -> int:
    members = set(metadata.get("workspace_members", []))
    offenders: list[str] = []
    n_deps = n_members = 0
    for pkg in sorted(metadata["packages"], key=lambda p: (p["name"], p["version"])):
        lic = pkg.get("license")
        label = f"{pkg['name']} {pkg['version']}"
        if pkg["id"] in members:
            n_members += 1
            if lic != WORKSPACE_LICENCE:
                offenders.append(f"{label} (workspace member): licence {lic!r}, expected {WORKSPACE_LICENCE!r}")
            continue
        n_deps += 1
        reason = check_expression(lic)
        if reason is not None:
            detail = f"licence {lic!r}" if lic else f"license-file {pkg.get('license_file')!r}"
            offenders.append(f"{label}: {detail}: {reason}")
    if offenders:
        print(f"licences: {len(offenders)} offender(s):", file=sys.stderr)
        for o in offenders:
            print(f"  {o}", file=sys.stderr)
        print(f"allowed: {', '.join(sorted(ALLOWED))}", file=sys.stderr)
        return 1
    print(f"licences: {n_deps} packages ok ({n_members} workspace members {WORKSPACE_LICENCE})")
    return 0


def self_test() -> int:
    cases = {
        "MIT": True,
        "mit": True,
        "MIT OR Apache-2.0": True,
        "MIT/Apache-2.0": True,
        "Apache-2.0 / MIT": True,
        "GPL-3.0": False,
        "GPL-3.0-or-later": False,
        "GPL-3.0 OR MIT": True,
        "MIT AND GPL-3.0": False,
        "MIT AND (Apache-2.0 OR BSD-3-Clause)": True,
        "(MIT OR Apache-2.0) AND Unicode-DFS-2016": True,
        "(MIT OR Apache-2.0) AND Unicode-3.0": True,
        "MIT OR GPL-2.0 AND LGPL-2.1": True,  # AND binds tighter than OR
        "GPL-2.0 OR MPL-2.0 AND MIT": False,
        "Apache-2.0 WITH LLVM-exception": True,
        "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT": True,
        "GPL-2.0 WITH Classpath-exception-2.0": False,
        "MPL-2.0": False,
        "Unlicense/MIT": True,
        "Zlib OR Apache-2.0 OR MIT": True,
        "0BSD OR MIT OR Apache-2.0": True,
        "BSL-1.0": True,
        "CC0-1.0 OR MIT-0": True,
        "ISC AND (Apache-2.0 OR ISC) AND OpenSSL": False,
        "LicenseRef-ring": False,
        "Apache-2.0+": True,
    }
    bad_syntax = ["", "MIT OR", "(MIT", "MIT)", "MIT Apache-2.0", "AND MIT", "MIT, Apache-2.0", "MIT WITH"]
    failures = 0
    for expr, want in cases.items():
        got = check_expression(expr) is None
        if got != want:
            failures += 1
            print(f"FAIL {expr!r}: allowed={got}, want {want}", file=sys.stderr)
    for expr in bad_syntax:
        reason = check_expression(expr)
        if reason is None or ("unparsable" not in reason and "no SPDX" not in reason):
            failures += 1
            print(f"FAIL {expr!r}: expected a parse error, got {reason!r}", file=sys.stderr)
    total = len(cases) + len(bad_syntax)
    print(f"self-test: {total - failures}/{total} ok")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metadata", type=Path, help="read this saved `cargo metadata` JSON instead of running cargo")
    ap.add_argument("--self-test", action="store_true", help="run the SPDX parser's built-in tests")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.metadata:
        metadata = json.loads(args.metadata.read_text())
    else:
        metadata = load_metadata(Path(__file__).resolve().parent.parent)
    return check(metadata)


if __name__ == "__main__":
    sys.exit(main())

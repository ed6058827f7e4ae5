#!/usr/bin/env python3
"""Fails when a production source file grows past the size one reader can hold.

A file of production code under `crates/*/src/` (Rust and the Redis Lua library) may hold
at most LIMIT lines of non-test code. Files drift past that one small addition at a time,
and a file that does several things at once is where cycles, duplicates and stale
comments start: past the limit, split it along its concerns.

What counts as non-test code:
- a Rust file's lines before its first top-level `#[cfg(test)]` item (the unit-test
  module is by convention the file's tail);
- every line of a Lua file;
- nothing under a crate's `src/contract/`: the contract suites are tests that live in
  `src/` only so every adapter's tests can run them (compiled behind the `contract`
  feature, never in a production build).

Usage: scripts/check-file-size.py [--limit N] [ROOT]   (ROOT defaults to the repository)
Exit status 1 names every file over the limit, with its count.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_LIMIT = 500


def non_test_lines(path: Path) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".rs":
        for index, line in enumerate(lines):
            if line.startswith("#[cfg(test)]"):
                return index
    return len(lines)


def production_files(root: Path):
    for crate_src in sorted(root.glob("crates/*/src")):
        for path in sorted(crate_src.rglob("*")):
            if path.suffix not in (".rs", ".lua") or not path.is_file():
                continue
            if "contract" in path.relative_to(crate_src).parts[:1]:
                continue
            yield path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    parser.add_argument("root", nargs="?", default=Path(__file__).resolve().parent.parent, type=Path)
    args = parser.parse_args()

    checked = 0
    over = []
    for path in production_files(args.root):
        checked += 1
        count = non_test_lines(path)
        if count > args.limit:
            over.append((count, path.relative_to(args.root)))
    if over:
        print(f"error: production files over {args.limit} lines of non-test code:", file=sys.stderr)
        for count, path in sorted(over, reverse=True):
            print(f"  {path}: {count}", file=sys.stderr)
        print("Split each along its concerns (a module per concern, the parent re-exporting).", file=sys.stderr)
        return 1
    print(f"ok: {checked} production files, none over {args.limit} lines of non-test code")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fails when the architecture map or a design note names a repository path that does not exist.

The map (`docs/ARCHITECTURE.md`) and the design notes (`docs/design/*.md`) tell a reader
which file to open for each part of the system. Code moves faster than prose, and a doc
that points at a file which was renamed or split sends the reader nowhere while still
looking authoritative. This check makes that drift fail the test run (`scripts/test.sh`)
instead of waiting for a reader to notice.

What it checks, in every checked file (fenced code blocks included):

- every repository path written in backticks: a word starting with one of the
  repository's top-level entries (`crates/`, `scripts/`, `deploy/`, `docs/`,
  `examples/`, `README.md`, `Dockerfile`, ...). Inside a backtick span with spaces (a
  command) each such word is checked. A `*` is a glob, and `<name>` is a placeholder
  for one path component; either must match at least one existing path. A trailing
  `:LINE` is ignored. Paths written the short way, relative to a crate's `src/`
  (`inbound/accept.rs`), are not repository paths and are left alone;
- every relative Markdown link `[text](target)`: the target, resolved from the linking
  file's folder, must exist, and a `#anchor` must name a heading of the target (or of
  the same file for a bare `#anchor`), slugged the way GitHub does.

Usage: scripts/check-doc-paths.py [FILE.md ...]   (default: the map and the design notes)
Exit code: 0 when every path exists, 1 otherwise (each missing one is printed as
`file:line: what`).
"""

from __future__ import annotations

import glob
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Top-level entries a repository path can start with. Build output (`target/`) is not a
# repository path: it exists only after a build.
PATH_PREFIXES = ("crates/", "scripts/", "deploy/", "docs/", "examples/")
TOP_FILES = ("README.md", "Dockerfile", "Cargo.toml", "Cargo.lock", "LICENSE",
             "rust-toolchain.toml", "rustfmt.toml")

# A repository path inside a word: a top-level entry, then path characters (a `*` glob and
# `<name>` placeholders included). Whatever surrounds it (`$(cat `, `)@host`, quotes) is
# not part of the path.
REPO_PATH_RE = re.compile(
    r"(?<![\w./-])((?:" + "|".join(re.escape(p) for p in PATH_PREFIXES) + r")[\w./*<>-]*"
    r"|(?:" + "|".join(re.escape(f) for f in TOP_FILES) + r")(?![\w.-]))"
)
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
PLACEHOLDER_RE = re.compile(r"<[^<>/]+>")
TRAILING_LINE_RE = re.compile(r":\d+(?:-\d+)?$")


def default_files() -> list[Path]:
    return [ROOT / "docs" / "ARCHITECTURE.md", *sorted((ROOT / "docs" / "design").glob("*.md"))]


def repo_paths(word: str) -> list[str]:
    """The repository paths a word names, without a trailing `.`/`:` or `:LINE` suffix."""
    return [TRAILING_LINE_RE.sub("", m.rstrip(".:")) for m in REPO_PATH_RE.findall(word)]


def path_exists(path: str) -> bool:
    pattern = PLACEHOLDER_RE.sub("*", path)
    if "*" in pattern or "?" in pattern:
        return bool(glob.glob(str(ROOT / pattern)))
    return (ROOT / path).exists()


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces as `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        seen: dict[str, int] = {}
        anchors: set[str] = set()
        in_fence = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if FENCE_RE.match(line):
                in_fence = not in_fence
                continue
            match = None if in_fence else HEADING_RE.match(line)
            if not match:
                continue
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
        cache[path] = anchors
    return cache[path]


def check_link(doc: Path, target: str, cache: dict[Path, set[str]]) -> str | None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
        return None
    file_part, _, anchor = target.partition("#")
    resolved = doc if not file_part else (doc.parent / file_part).resolve()
    if not resolved.exists():
        return f"link target {target} does not exist"
    if ROOT not in resolved.parents and resolved != ROOT:
        return f"link target {target} leaves the repository"
    if anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved, cache):
        return f"link {target}: no heading with the anchor #{anchor} in {resolved.relative_to(ROOT)}"
    return None


def check_file(doc: Path, cache: dict[Path, set[str]]) -> tuple[list[str], int]:
    problems: list[str] = []
    checked = 0
    shown = doc.relative_to(ROOT) if ROOT in doc.parents else doc
    in_fence = False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{shown}:{number}"
        if FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            words = line.split()
        else:
            words = [w for _, span in CODE_SPAN_RE.findall(line) for w in span.split()]
            for target in LINK_RE.findall(line):
                checked += 1
                problem = check_link(doc, target, cache)
                if problem:
                    problems.append(f"{where}: {problem}")
        for path in (p for word in words for p in repo_paths(word)):
            checked += 1
            if not path_exists(path):
                problems.append(f"{where}: {path} does not exist")
    return problems, checked


def main() -> int:
    files = [Path(a).resolve() for a in sys.argv[1:]] or default_files()
    cache: dict[Path, set[str]] = {}
    problems: list[str] = []
    checked = 0
    for doc in files:
        if not doc.exists():
            problems.append(f"{doc}: the file to check does not exist")
            continue
        found, count = check_file(doc, cache)
        problems.extend(found)
        checked += count
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} path(s) named in the docs do not exist")
        return 1
    print(f"ok: {checked} paths named in {len(files)} doc(s) exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())

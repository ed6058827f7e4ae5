#!/usr/bin/env python3
"""Finds import cycles between the source files of every crate in the workspace.

A file imports another when it names an item the other file defines: through a `use`
(any visibility, globs included) or a path written in the code (`crate::a::b`,
`super::x`, `child::f()`). Names are resolved through re-exports, so a facade that
re-exports a child's item is not the item's home. A `mod x;` declaration alone is not an
import. Each crate's `src/` is one graph; the strongly connected components of more than
one file are cycles, printed with the names that make each edge, and the exit code is 1
when there is any (0 otherwise).

With `--layers NAME` (repeatable) the crate `crates/NAME` is also checked one level up:
its top-level modules (a folder or a file under `src/`) must import each other in one
direction only, so its folders are layers a reader can take one at a time.

Usage: scripts/module-cycles.py [--layers NAME]... [CRATES_DIR]   (default: crates/)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ITEM_RE = re.compile(
    r"\b(?:struct|enum|union|trait|fn|type|const|static)\s+(?:r#)?([A-Za-z_]\w*)"
    r"|\bmacro_rules!\s*([A-Za-z_]\w*)"
)
MOD_DECL_RE = re.compile(r"\bmod\s+([A-Za-z_]\w*)\s*;")
INLINE_MOD_RE = re.compile(r"\bmod\s+([A-Za-z_]\w*)\s*\{")
USE_RE = re.compile(r"\buse\s+([^;]+);")
PATH_RE = re.compile(r"(?<![\w:])((?:[A-Za-z_]\w*)(?:\s*::\s*(?:[A-Za-z_]\w*|\{))+)")


def strip_code(text: str) -> str:
    """Blanks comments, string and char literals, keeping offsets and newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = len(re.match(r"r(#*)\"", text[i:]).group(1))
            end = text.find('"' + "#" * hashes, i + 2 + hashes)
            end = n if end < 0 else end + 1 + hashes
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\(x..|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def expand_use_tree(tree: str) -> list[tuple[list[str], str | None]]:
    """`a::{b, c::d as e, f::*}` -> [(['a','b'], None), (['a','c','d'], 'e'), (['a','f','*'], None)]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    results: list[tuple[list[str], str | None]] = []

    def walk(prefix: list[str], s: str) -> None:
        s = s.strip()
        if not s:
            return
        if s.startswith("::"):
            s = s[2:].strip()
        brace = s.find("{")
        if brace >= 0 and (s.find(" as ") < 0 or s.find(" as ") > brace):
            head = [p.strip() for p in s[:brace].split("::") if p.strip()]
            inner = s[brace + 1 : s.rfind("}")]
            depth, start = 0, 0
            for k, ch in enumerate(inner):
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == "," and depth == 0:
                    walk(prefix + head, inner[start:k])
                    start = k + 1
            walk(prefix + head, inner[start:])
            return
        alias = None
        m = re.match(r"(.*?)\s+as\s+(\w+)$", s)
        if m:
            s, alias = m.group(1), m.group(2)
        parts = [p.strip() for p in s.split("::") if p.strip()]
        results.append((prefix + parts, alias))

    walk([], tree)
    return results


@dataclass
class Module:
    path: tuple[str, ...]
    file: Path
    children: dict[str, "Module"] = field(default_factory=dict)
    items: set[str] = field(default_factory=set)
    imports: dict[str, list[str]] = field(default_factory=dict)  # name -> absolute-ish path
    globs: list[list[str]] = field(default_factory=list)
    parent: "Module | None" = None
    span: tuple[int, int] = (0, 0)


class Crate:
    def __init__(self, root_file: Path):
        self.root_file = root_file
        self.code: dict[Path, str] = {}
        self.root = self.load(root_file, (), None, root_file.parent)

    def load(self, file: Path, path: tuple[str, ...], parent: Module | None, child_dir: Path) -> Module:
        code = strip_code(file.read_text())
        self.code[file] = code
        module = Module(path, file, parent=parent, span=(0, len(code)))
        self.fill(module, code, 0, len(code), child_dir)
        return module

    def fill(self, module: Module, code: str, start: int, end: int, child_dir: Path) -> None:
        # inline modules first, so their spans can be cut out of this module's own text
        inner_spans = []
        pos = start
        while True:
            m = INLINE_MOD_RE.search(code, pos, end)
            if not m:
                break
            close = matching_brace(code, m.end() - 1)
            child = Module(module.path + (m.group(1),), module.file, parent=module, span=(m.end(), close))
            module.children[m.group(1)] = child
            self.fill(child, code, m.end(), close, child_dir / m.group(1))
            inner_spans.append((m.start(), close + 1))
            pos = close + 1
        own = "".join(
            code[a:b] if True else ""
            for a, b in self.gaps(start, end, inner_spans)
        )
        for m in MOD_DECL_RE.finditer(own):
            name = m.group(1)
            for candidate in (child_dir / f"{name}.rs", child_dir / name / "mod.rs"):
                if candidate.exists():
                    sub_dir = candidate.parent if candidate.name == "mod.rs" else child_dir / name
                    module.children[name] = self.load(candidate, module.path + (name,), module, sub_dir)
                    break
        for m in ITEM_RE.finditer(own):
            module.items.add(m.group(1) or m.group(2))
        for m in USE_RE.finditer(own):
            for parts, alias in expand_use_tree(m.group(1)):
                if parts and parts[-1] == "*":
                    module.globs.append(parts[:-1])
                elif parts:
                    name = alias or (parts[-2] if parts[-1] == "self" and len(parts) > 1 else parts[-1])
                    if name != "_":
                        module.imports[name] = parts if parts[-1] != "self" else parts[:-1]

    @staticmethod
    def gaps(start: int, end: int, spans: list[tuple[int, int]]):
        pos = start
        for a, b in spans:
            yield pos, a
            pos = b
        yield pos, end

    def modules(self):
        stack = [self.root]
        while stack:
            m = stack.pop()
            yield m
            stack.extend(m.children.values())

    # -- resolution -------------------------------------------------------------------

    def start_module(self, scope: Module, first: str) -> tuple[Module | None, bool]:
        """The module a path's first segment names, and whether the segment was consumed."""
        if first == "crate":
            return self.root, True
        if first == "self":
            return scope, True
        if first == "super":
            return scope.parent, True
        return scope, False

    def resolve(self, scope: Module, parts: list[str], depth: int = 0) -> Module | None:
        """The module whose file defines what `parts` names from `scope` (None: not ours)."""
        if depth > 20 or not parts:
            return None
        module, consumed = self.start_module(scope, parts[0])
        rest = parts[1:] if consumed else parts
        if module is None:
            return None
        while rest and rest[0] == "super":
            module = module.parent
            rest = rest[1:]
            if module is None:
                return None
        if not consumed:
            # a relative path: a child module, an item or an import of this scope (or an
            # outer module's, for names in scope through a parent's glob this is not needed)
            first = rest[0]
            if first not in module.children and first not in module.items and first not in module.imports:
                return None
        return self.walk(module, rest, depth)

    def walk(self, module: Module, rest: list[str], depth: int) -> Module | None:
        while rest:
            name = rest[0]
            if name in module.children:
                module = module.children[name]
                rest = rest[1:]
                continue
            if name in module.items:
                return module
            if name in module.imports:
                target = self.resolve(module, module.imports[name], depth + 1)
                if target is None:
                    return None
                if len(rest) == 1:
                    return target
                return self.walk(target, rest[1:], depth + 1) if target is not module else module
            for glob in module.globs:
                base = self.resolve(module, glob, depth + 1)
                if base is not None and base is not module:
                    found = self.walk(base, [name], depth + 1)
                    if found is not None:
                        return self.walk(found, rest[1:], depth + 1) if len(rest) > 1 else found
            return None
        return module

    # -- edges ------------------------------------------------------------------------

    def scope_at(self, file: Path, offset: int) -> Module:
        best = None
        for m in self.modules():
            if m.file == file and m.span[0] <= offset <= m.span[1]:
                if best is None or len(m.path) > len(best.path):
                    best = m
        return best

    def edges(self) -> dict[Path, dict[Path, set[str]]]:
        graph: dict[Path, dict[Path, set[str]]] = {f: {} for f in self.code}
        for file, code in self.code.items():
            for m in USE_RE.finditer(code):
                scope = self.scope_at(file, m.start())
                for parts, _ in expand_use_tree(m.group(1)):
                    parts = parts[:-1] if parts and parts[-1] in ("*", "self") else parts
                    self.add_edge(graph, file, scope, parts)
            for m in PATH_RE.finditer(code):
                if code[max(0, m.start() - 4) : m.start()].strip().endswith("use"):
                    continue
                parts = [p.strip() for p in m.group(1).split("::")]
                parts = [p for p in parts if p and p != "{"]
                scope = self.scope_at(file, m.start())
                self.add_edge(graph, file, scope, parts)
        return graph

    def add_edge(self, graph, file: Path, scope: Module, parts: list[str]) -> None:
        if not parts:
            return
        target = self.resolve(scope, parts)
        if target is not None and target.file != file:
            graph[file].setdefault(target.file, set()).add("::".join(parts))


def strongly_connected(graph: dict[Path, dict[Path, set[str]]]) -> list[list[Path]]:
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def visit(v: Path) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def top_module(crate_src: Path, file: Path) -> Path:
    """The top-level module a file belongs to: `src/x.rs` or the folder `src/x/`."""
    first = file.relative_to(crate_src).parts[0]
    return crate_src / first.removesuffix(".rs")


def layer_graph(crate_src: Path, graph: dict[Path, dict[Path, set[str]]]):
    layers: dict[Path, dict[Path, set[str]]] = {}
    for file, targets in graph.items():
        a = top_module(crate_src, file)
        layers.setdefault(a, {})
        for target, names in targets.items():
            b = top_module(crate_src, target)
            if a != b:
                where = f"{file.relative_to(crate_src)} -> {target.relative_to(crate_src)}"
                layers[a].setdefault(b, set()).update(f"{where}: {n}" for n in names)
    return layers


def main() -> int:
    args = sys.argv[1:]
    layered = set()
    while args and args[0] == "--layers":
        layered.add(args[1])
        args = args[2:]
    crates_dir = Path(args[0] if args else "crates")
    total = 0
    for crate_dir in sorted(p for p in crates_dir.iterdir() if (p / "Cargo.toml").exists()):
        for root_name in ("lib.rs", "main.rs"):
            root_file = crate_dir / "src" / root_name
            if not root_file.exists():
                continue
            crate = Crate(root_file)
            graph = crate.edges()
            for component in strongly_connected(graph):
                total += 1
                members = set(component)
                print(f"cycle in {crate_dir.name} ({root_name}), {len(component)} files:")
                for file in component:
                    for target, names in sorted(graph[file].items()):
                        if target in members:
                            shown = ", ".join(sorted(names)[:3])
                            print(f"  {file} -> {target}  ({shown})")
            if crate_dir.name not in layered:
                continue
            layers = layer_graph(crate_dir / "src", graph)
            for component in strongly_connected(layers):
                total += 1
                members = set(component)
                names = ", ".join(m.name for m in component)
                print(f"layer cycle in {crate_dir.name} between its top-level modules {names}:")
                for module in component:
                    for target, edges in sorted(layers[module].items()):
                        if target in members:
                            for edge in sorted(edges)[:3]:
                                print(f"  {edge}")
    if total:
        print(f"{total} import cycle(s)")
        return 1
    print("no import cycle between files" + (", nor between the layers of " + ", ".join(sorted(layered)) if layered else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

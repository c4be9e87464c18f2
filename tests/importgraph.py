"""ragmem's import graph, read from the source (nothing is imported): every ``import`` of ragmem by
ragmem, module-level or inside a function, as an edge ``module -> module``.

``flows/`` and ``tasks/`` are the packages ``ragmem.flows`` and ``ragmem.tasks`` (as installed).
An import under ``if TYPE_CHECKING:`` runs nothing and is no edge. ``from ragmem.x import y`` is an
edge to ``ragmem.x.y`` when that is a module, else to ``ragmem.x``; the package ``__init__`` that
Python runs on the way is not counted as an edge of its own (a subpackage's own imports are).
"""

from __future__ import annotations

import ast
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"ragmem": ("ragmem",), "flows": ("ragmem", "flows"), "tasks": ("ragmem", "tasks")}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    inside_function: bool
    commented: bool  # a comment on the import's line or on the line above it says why it is there


@functools.lru_cache(maxsize=1)
def _module_files() -> tuple[tuple[str, Path], ...]:
    """Module name -> file, for ragmem/, flows/ and tasks/ (not the scripts that built the shipped data)."""
    out = {}
    for folder, prefix in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "datasets" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((*prefix, *parts))] = path
    return tuple(out.items())


def _own(name: str) -> str | None:
    head = name.split(".")[0]
    if head == "ragmem":
        return name
    if head in ("flows", "tasks"):
        return "ragmem." + name
    return None


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosed(node: ast.AST, parents: dict, kinds: tuple) -> ast.AST | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, kinds):
            return node
    return None


def _type_checking(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def module_files() -> dict[str, Path]:
    """Module name -> file (read once per process: every layer test asks)."""
    return dict(_module_files())


@functools.lru_cache(maxsize=1)
def _edges() -> tuple[Edge, ...]:
    files = module_files()
    found = []
    for module, path in sorted(files.items()):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        parents = _parents(tree)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [_own(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                base = _own(base) if base else None
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names] if base else []
            else:
                continue
            if _type_checking(node, parents):
                continue
            inside = _enclosed(node, parents, (ast.FunctionDef, ast.AsyncFunctionDef)) is not None
            line = lines[node.lineno - 1]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            commented = "#" in line or above.startswith("#")
            for target in targets:
                if target is None:
                    continue
                while target not in files and "." in target:
                    target = target.rpartition(".")[0]
                if target != module and target in files:
                    found.append(Edge(module, target, node.lineno, inside, commented))
    return tuple(found)


def edges() -> list[Edge]:
    """Every edge (read once per process: every layer test asks)."""
    return list(_edges())


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
                found.append(sorted(component))

    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def third_party(path: Path, module_level_only: bool = True) -> set[str]:
    """The top-level names of the packages outside ragmem that a file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = _parents(tree)
    out = set()
    for node in ast.walk(tree):
        if module_level_only and _enclosed(node, parents, (ast.FunctionDef, ast.AsyncFunctionDef)) is not None:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        out |= {n.split(".")[0] for n in names if _own(n) is None and n.split(".")[0] not in sys.stdlib_module_names}
    return out

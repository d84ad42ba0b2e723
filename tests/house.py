"""Count the house: modules, import circles and the largest modules of ``sbqueue/``.

Run ``python3 tests/house.py`` to print the counts that decision 037 records; the unit test
``tests/unit/test_layers.py`` holds the limits (no circle, no module over ``MAX_LINES``).
Every import counts, those under ``TYPE_CHECKING`` and inside functions too: a circle of
type-only imports is still a circle a reader walks.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sbqueue"
MAX_LINES = 500


def module_name(path: Path) -> str:
    """``sbqueue/engine/receive/plan.py`` -> ``sbqueue.engine.receive.attempt.plan``."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every Python module of the package by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _targets(node: ast.AST, here: str, known: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        anchor = here.split(".")
        if known[here].name != "__init__.py":
            anchor = anchor[:-1]
        anchor = anchor[:len(anchor) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    found = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in known:
            found.add(sub)  # ``from package import module``
        elif base in known:
            found.add(base)
    return found


def imports() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its text)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            edges |= _targets(node, name, known)
        edges.discard(name)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph with each engine subpackage folded into one node
    (``sbqueue.engine.receive.ops`` counts as ``sbqueue.engine.receive``)."""
    def room(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:3]) if parts[:2] == ["sbqueue", "engine"] and len(parts) > 3 \
            else name
    folded: dict[str, set[str]] = {}
    for name, edges in graph.items():
        folded.setdefault(room(name), set()).update(room(e) for e in edges)
    for name, edges in folded.items():
        edges.discard(name)
    return folded


def sizes() -> list[tuple[int, str]]:
    """(lines, module) for every module, the largest first."""
    return sorted(((len(p.read_text().splitlines()), n) for n, p in modules().items()),
                  reverse=True)


def main() -> None:
    graph = imports()
    found = circles(graph)
    largest = sizes()
    over = [(lines, name) for lines, name in largest if lines > MAX_LINES]
    print(f"modules: {len(graph)}")
    print(f"import circles: {len(found)}")
    for circle in found:
        print(f"  {len(circle)}: {', '.join(circle)}")
    rooms = circles(package_imports(graph))
    print(f"circles between engine subpackages and modules: {len(rooms)}")
    for circle in rooms:
        print(f"  {len(circle)}: {', '.join(circle)}")
    print(f"modules over {MAX_LINES} lines: {len(over)}")
    print("largest:")
    for lines, name in largest[:10]:
        print(f"  {lines:5d}  {name}")


if __name__ == "__main__":
    main()

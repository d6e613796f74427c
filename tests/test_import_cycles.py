"""No import circle in the house: among the project's own modules, no module reaches
itself through its imports. Every import counts, wherever it is written (at the top, in a
function, under ``TYPE_CHECKING``): a circle hidden in a function or a type-only import is
still two modules that cannot be understood, or moved, one without the other.

Read with ``ast`` from the source, so it needs neither Django nor the modules' imports to
run. ``.importlinter`` holds the layers between apps; this holds the circles inside them
too. Run as a script (``python tests/test_import_cycles.py``) it prints every circle."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("markus", "mailbox", "attention", "notifications", "agentbus")
SKIPPED = ("migrations",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if not any(part in SKIPPED for part in path.relative_to(ROOT).parts):
                found[module_name(path)] = path
    return found


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name ``from <node.module>`` names, as seen from ``module``."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``module`` imports: ``from a import b`` is ``a.b`` when that is a
    module, else ``a``. A package's ``__init__`` reached only as the parent of a module
    is not counted (Python runs it, but it is not what the importer reads from)."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path, node)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    arrows = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return "; ".join(arrows)


def test_the_finder_sees_a_circle_and_a_line():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_of_the_house_imports_itself_through_others():
    graph = import_graph()
    assert len(graph) > 100  # the house was read
    found = circles(graph)
    assert found == [], "import circles:\n" + "\n".join(describe(graph, c) for c in found)


if __name__ == "__main__":
    graph = import_graph()
    for component in circles(graph):
        print(f"{len(component)} modules: {describe(graph, component)}")
    sys.exit(1 if circles(graph) else 0)

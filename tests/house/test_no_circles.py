"""No circle of imports in rig/ (docs/dev/architecture.md, "The layer rule"): read from the sources
with ast, every import statement counts, at the top of a module, inside a function, or under
``if TYPE_CHECKING:``, for a circle the type checker alone walks is still two modules that know
each other. A circle found is named, module by module, with the line of each import."""

from __future__ import annotations

import ast
import shutil
from collections import deque
from pathlib import Path

from helpers import ROOT


def _modules(root: Path) -> dict[str, Path]:
    """Every module of ``root/rig`` by its dotted name (a package by its own name)."""
    out = {}
    for path in sorted((root / "rig").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(root: Path) -> dict[str, dict[str, int]]:
    """Each module of rig/ -> the modules of rig/ it imports, with the line of the first import of
    each. ``from P import n`` imports the module ``P.n`` where there is one, else ``P``; a relative
    import is read from the importing module's package. The import of a package's ``__init__`` that
    comes with one of its modules is not counted: it is no statement of the importer's."""
    modules = _modules(root)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            else:
                continue
            for target in targets:
                found = known(target) if target.split(".")[0] == "rig" else None
                if found and found != name:
                    edges.setdefault(found, node.lineno)
        graph[name] = edges
    return graph


def _components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return sorted(found)


def circles(graph: dict[str, dict[str, int]]) -> list[str]:
    """One circle per group of modules that import each other, named: its shortest way from the
    group's first module back to it, each import with its line."""
    named = []
    for component in _components(graph):
        first, inside = component[0], set(component)
        came_from: dict[str, str] = {}
        queue = deque([first])
        while queue:  # breadth first: the shortest way back to the first module
            v = queue.popleft()
            if first in graph[v]:  # v != first: no module imports itself here
                path = [v]
                while path[-1] != first:
                    path.append(came_from[path[-1]])
                path = [*reversed(path), first]
                break
            for w in sorted(graph[v]):
                if w in inside and w != first and w not in came_from:
                    came_from[w] = v
                    queue.append(w)
        steps = [f"{a} (l.{graph[a][b]})" for a, b in zip(path, path[1:])]
        named.append(" -> ".join([*steps, path[-1]]))
    return named


def test_no_module_of_rig_imports_itself_back():
    graph = imports(ROOT)
    assert len(graph) > 100 and graph["rig.cli"], "the reader found no modules or no imports"
    found = circles(graph)
    assert not found, "import circles in rig/ (each module imports the next; break one at its seam):\n" + "\n".join(
        found
    )


def test_a_circle_for_the_type_checker_alone_is_caught_and_named(tmp_path):
    """The circle bench <-> bench_pa closed through an import under ``if TYPE_CHECKING:``: put
    back in a copy of the tree, it is found, and named with its lines."""
    shutil.copytree(ROOT / "rig", tmp_path / "rig", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    pa = tmp_path / "rig" / "workflows" / "bench_pa.py"
    text = pa.read_text()
    line = len(text.splitlines()) + 2
    pa.write_text(text + "if TYPE_CHECKING:\n    from rig.workflows.bench import Plan  # deliberate: a circle\n")
    assert circles(imports(tmp_path)) == [
        f"rig.workflows.bench (l.{imports(tmp_path)['rig.workflows.bench']['rig.workflows.bench_pa']}) -> "
        f"rig.workflows.bench_pa (l.{line}) -> rig.workflows.bench"
    ]


def test_a_longer_circle_through_a_function_and_a_relative_import_is_named(tmp_path):
    """A circle of three, one import inside a function, one relative: named from its first module."""
    pkg = tmp_path / "rig" / "x"
    pkg.mkdir(parents=True)
    (tmp_path / "rig" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from rig.x import b\n")
    (pkg / "b.py").write_text("def f():\n    from rig.x.c import g\n")
    (pkg / "c.py").write_text("from . import a\n")
    (pkg / "d.py").write_text("from rig.x import a, b, c\n")  # imports the circle, is no part of it
    assert circles(imports(tmp_path)) == ["rig.x.a (l.1) -> rig.x.b (l.2) -> rig.x.c (l.1) -> rig.x.a"]

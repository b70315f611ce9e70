"""docs/dev/architecture.md held to the code: every module, function or class it names exists, every
path it cites is there, and every package of rig/ is on the page."""

from __future__ import annotations

import ast
import importlib.util
import re

from helpers import ROOT

PAGE = ROOT / "docs" / "dev" / "architecture.md"
FILE_SUFFIXES = {"py", "pbtxt", "json", "md", "log", "c", "toml", "txt", "csv"}
WHEEL_PATHS = {"rig/_models": "models", "rig/_workloads": "workloads"}  # pyproject's package-dir


def _names(tree: ast.Module) -> set[str]:
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def _index() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Every module of rig/ (dotted name -> its top-level names, submodules included) and every
    class (name -> its members)."""
    modules: dict[str, set[str]] = {}
    classes: dict[str, set[str]] = {}
    for path in (ROOT / "rig").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        modules.setdefault(name, set()).update(_names(tree))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                members = classes.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        members.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        members.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        members.update(t.id for t in item.targets if isinstance(t, ast.Name))
    for name in list(modules):  # a package's submodules are its names too
        parent, _, last = name.rpartition(".")
        if parent in modules:
            modules[parent].add(last)
    return modules, classes


def _tokens() -> list[str]:
    return re.findall(r"`([^`\n]+)`", PAGE.read_text())


def _unresolved(token: str, modules, classes) -> str | None:
    parts = token.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return None
    for k in range(len(parts), 0, -1):  # the longest prefix that names a module of rig
        prefix = ".".join(parts[:k])
        found = [m for m in modules if m == prefix or m.endswith("." + prefix)]
        if found:
            rest = parts[k:]
            if not rest:
                return None
            for m in found:
                if rest[0] in modules[m] and (len(rest) == 1 or rest[0] not in classes or rest[1] in classes[rest[0]]):
                    return None
            return f"`{token}`: {found[0]} has no {'.'.join(rest)}"
    if parts[0] in classes:
        return None if parts[1] in classes[parts[0]] else f"`{token}`: class {parts[0]} has no {parts[1]}"
    if parts[0][:1].islower() and importlib.util.find_spec(parts[0]) is not None:
        return None  # the standard library's, or a dependency's
    return f"`{token}`: no module of rig/ is called {parts[0]}"


def test_every_dotted_name_on_the_page_is_in_the_code():
    modules, classes = _index()
    dotted = {t for t in _tokens() if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", t)}
    assert dotted, "the page names no module.attribute: the pattern no longer reads it"
    wrong = sorted(filter(None, (_unresolved(t, modules, classes) for t in dotted)))
    assert not wrong, "docs/dev/architecture.md names what the code does not have:\n" + "\n".join(wrong)


def test_every_path_on_the_page_exists():
    paths = {t.rstrip("/") for t in _tokens() if re.fullmatch(r"rig/[\w./]*", t)}
    assert len(paths) > 10
    missing = sorted(p for p in paths if not (ROOT / WHEEL_PATHS.get(p, p)).exists())
    assert not missing, f"docs/dev/architecture.md cites paths that are gone: {missing}"


def test_every_package_is_on_the_page():
    text = PAGE.read_text()
    packages = sorted(p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "rig").rglob("__init__.py"))
    left_out = [p for p in packages if p != "rig" and f"{p}/" not in text and f"{p.rsplit('/', 1)[1]}/" not in text]
    assert not left_out, f"docs/dev/architecture.md leaves out these packages of rig/: {left_out}"


def test_a_name_gone_from_the_code_is_caught():
    modules, classes = _index()
    assert _unresolved("protocol.typed_row", modules, classes)
    assert _unresolved("messages.no_such_thing", modules, classes)
    assert _unresolved("CycleDraft.no_such_method", modules, classes)
    assert _unresolved("messages.decode", modules, classes) is None
    assert _unresolved("orchestrator.rows.blank_row", modules, classes) is None


def test_every_package_says_what_it_holds():
    """Each package of rig/ opens with a docstring that says what it holds."""
    empty = [
        str(init.relative_to(ROOT))
        for init in sorted((ROOT / "rig").rglob("__init__.py"))
        if len((ast.get_docstring(ast.parse(init.read_text())) or "").split()) < 8
    ]
    assert not empty, f"packages without a docstring that says what they hold: {empty}"

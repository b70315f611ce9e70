"""docs/dev/where-things-go.md held to the code, as the architecture page is: every path it names is
there, every ``rig.`` name it gives is in the code, every command of the registry has its row (and
the row names where its parser is added), every topic of the analysis and every package of the
runtimes is on it, and what it says of a scenario's models holds for the catalog."""

from __future__ import annotations

import ast
import re

from helpers import ROOT

PAGE = ROOT / "docs" / "dev" / "where-things-go.md"
ROOT_FILES = (".importlinter", "pyproject.toml", "README.md", "mkdocs.yml")
TOP_FOLDERS = ("rig", "models", "tests", "docs", "benchmarks", "workloads", "analysis")
WHEEL_PACKAGES = {"rig._models": "models", "rig._workloads": "workloads"}  # pyproject's package-dir


def _tokens() -> list[str]:
    return re.findall(r"`([^`\n]+)`", PAGE.read_text())


def _top_names(body: list[ast.stmt]) -> dict[str, ast.AST | None]:
    """The names a module or class body defines (a class: its node, to look inside)."""
    out: dict[str, ast.AST | None] = {}
    for node in body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = None
        elif isinstance(node, ast.Assign):
            out.update({n.id: None for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)})
    return out


def _classes() -> dict[str, ast.ClassDef]:
    """Every class of rig/ by name (a name imported into a package is found where it is defined)."""
    out = {}
    for path in (ROOT / "rig").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, node)
    return out


def unresolved(dotted: str, classes: dict[str, ast.ClassDef]) -> str | None:
    """Why ``rig.a.b.Name.member`` is not in the code, or None where it is."""
    if dotted in WHEEL_PACKAGES:
        return None if (ROOT / WHEEL_PACKAGES[dotted]).is_dir() else f"`{dotted}`: no {WHEEL_PACKAGES[dotted]}/"
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):  # the longest prefix that is a module of rig/
        base = ROOT.joinpath(*parts[:k])
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if path.is_file():
            break
    else:
        return f"`{dotted}`: no module of rig/"
    names = _top_names(ast.parse(path.read_text()).body)
    if base.is_dir():  # a package's modules are its names too
        names.update({p.stem: None for p in base.glob("*.py")} | {p.name: None for p in base.iterdir() if p.is_dir()})
    rest = parts[k:]
    for i, name in enumerate(rest):
        if name not in names:
            return f"`{dotted}`: {'.'.join(parts[: k + i])} has no {name}"
        node = names[name] or classes.get(name)
        if i + 1 < len(rest):
            if not isinstance(node, ast.ClassDef):
                return f"`{dotted}`: {name} is no class to look inside"
            names = _top_names(node.body)
    return None


def test_every_path_on_the_page_exists():
    paths = [t for t in _tokens() if t in ROOT_FILES or re.fullmatch(rf"({'|'.join(TOP_FOLDERS)})/[\w./<>*-]*", t)]
    assert len(paths) > 20, "the page names few paths: the pattern no longer reads them"
    missing = []
    for t in paths:
        fixed = re.split(r"[<*]", t)[0]  # `models/scenarios/<name>/`: its fixed part; `rig/analysis/*.py`: the folder
        if not (ROOT / fixed.rstrip("/")).exists():
            missing.append(t)
    assert not missing, f"docs/dev/where-things-go.md names paths that are gone: {missing}"


def test_every_name_of_the_rig_on_the_page_is_in_the_code():
    classes = _classes()
    dotted = sorted({t for t in _tokens() if re.fullmatch(r"rig(\.\w+)+", t)})
    assert len(dotted) > 30, "the page names few rig.* names: the pattern no longer reads them"
    wrong = [w for w in (unresolved(t, classes) for t in dotted) if w]
    assert not wrong, "docs/dev/where-things-go.md names what the code does not have:\n" + "\n".join(wrong)


def test_a_name_gone_from_the_code_is_caught():
    classes = _classes()
    assert unresolved("rig.cli.registry", classes) is None
    assert unresolved("rig.store.Store.open", classes) is None  # a class a package imports
    assert unresolved("rig.contract.option_table.RunOptions", classes) is None
    assert unresolved("rig.cli.no_such_function", classes)
    assert unresolved("rig.contract.runtime.BuiltRuntime.no_such_field", classes)
    assert unresolved("rig.no_such_package.thing", classes)


def test_every_command_of_the_registry_has_its_row():
    """A row per command, naming where its parser is added: its module for a command added by
    ``_add_module``, else the function of rig/cli.py that adds it; one left out of ``--help`` says so."""
    from rig.cli import registry

    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `rig (\w+)`.*$", PAGE.read_text(), re.M)}
    wrong = []
    for name, add, listed in registry():
        row = rows.get(name)
        if row is None:
            wrong.append(f"rig {name}: no row")
            continue
        parser_cell = row.split(" | ")[1]
        maker = add.__qualname__.split(".")[0]  # rig.cli's function that adds it, or that made what adds it
        if maker == "_add_module":
            module = add.__closure__[0].cell_contents
            if f"`rig/commands/{module}.py`" not in parser_cell:
                wrong.append(f"rig {name}: its row does not name rig/commands/{module}.py")
        elif f"`rig.cli.{maker}`" not in parser_cell:
            wrong.append(f"rig {name}: its row does not name rig.cli.{maker}, which adds its parser")
        if not listed and "not listed" not in row:
            wrong.append(f"rig {name}: `rig --help` does not list it, and its row does not say so")
    extra = sorted(set(rows) - {name for name, _, _ in registry()})
    assert not wrong and not extra, f"the commands' table is out of step with rig.cli.registry: {wrong} {extra}"


def test_every_analysis_topic_and_runtimes_package_is_on_the_page():
    text = PAGE.read_text()
    packages = sorted(
        p.parent.relative_to(ROOT).as_posix() + "/"
        for base in ("analysis", "runtimes")
        for p in (ROOT / "rig" / base).glob("*/__init__.py")
    )
    assert "rig/analysis/conformance/" in packages and "rig/runtimes/from_source/" in packages
    left_out = [p for p in packages if f"`{p}`" not in text]
    assert not left_out, f"docs/dev/where-things-go.md leaves out: {left_out}"
    contracts = re.findall(r"^\[importlinter:contract:([\w-]+)\]", (ROOT / ".importlinter").read_text(), re.M)
    assert "analysis-topics" in contracts and "sides" in contracts  # the contracts the page names


def test_a_scenarios_own_models_are_where_the_page_says():
    from rig.scenarios.catalog import SCENARIOS

    assert "`models/scenarios/<name>/`" in PAGE.read_text()
    own = [s for s in SCENARIOS.values() if s.repository]
    assert own
    wrong = [s.name for s in own if s.repository != s.name or not (ROOT / "models" / "scenarios" / s.name).is_dir()]
    assert not wrong, f"scenarios whose models are not in models/scenarios/<name>/: {wrong}"


def test_the_page_is_linked_from_the_architecture_page_the_readme_and_the_site():
    assert "(where-things-go.md)" in (ROOT / "docs" / "dev" / "architecture.md").read_text()
    assert "(docs/dev/where-things-go.md)" in (ROOT / "README.md").read_text()
    assert "dev/where-things-go.md" in (ROOT / "mkdocs.yml").read_text()

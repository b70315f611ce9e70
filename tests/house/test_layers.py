"""The layer rule (.importlinter, docs/dev/architecture.md) holds on this tree, and a deliberate
violation breaks it: import-linter over the real package, then over a copy of it in which the
store imports a command."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    if not LINT.exists():
        pytest.skip(f"lint-imports is not installed next to {sys.executable} (pip install -e '.[test]')")
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"})


def test_the_tree_keeps_every_contract():
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout
    assert "0 broken" in proc.stdout


def test_a_command_imported_from_the_store_breaks_the_rule(tmp_path):
    shutil.copytree(ROOT / "rig", tmp_path / "rig", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    store = tmp_path / "rig" / "store.py"
    if not store.exists():  # the store as a package
        store = tmp_path / "rig" / "store" / "__init__.py"
    text = store.read_text()
    line = len(text.splitlines()) + 1
    store.write_text(text + "from rig.commands import compact  # deliberate: a command imported from the store\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    out = " ".join(proc.stdout.split())
    assert "the store owns compaction: it never imports a command or a workflow BROKEN" in out
    # the line it names is the one added (the chain may name others of the store's too)
    assert re.search(rf"rig\.store -> rig\.commands\.compact \([^)]*\bl\.{line}\b", out), proc.stdout[-3000:]


def test_a_worker_module_importing_the_parent_breaks_the_rule(tmp_path):
    """An import that climbs from the worker's side to the parent's is caught twice: by the layers
    and by the contract that keeps the worker from the parent, the results and the commands."""
    shutil.copytree(ROOT / "rig", tmp_path / "rig", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    cycle = tmp_path / "rig" / "worker" / "cycle.py"
    cycle.write_text(cycle.read_text() + "from rig.parent import config  # deliberate: the worker climbs\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    out = " ".join(proc.stdout.split())
    assert "never imports the parent, the results or the commands BROKEN" in out
    assert re.search(r"cli BROKEN", out), out[-3000:]
    assert "rig.worker.cycle -> rig.parent.config" in out


def test_the_root_holds_only_the_entry_points():
    """Every other module lives in the package of its side (common, contract, worker, parent, ...),
    and every package is in a layer of .importlinter."""
    assert sorted(p.name for p in (ROOT / "rig").glob("*.py")) == ["__init__.py", "__main__.py", "cli.py"]
    packages = sorted(p.name for p in (ROOT / "rig").iterdir() if (p / "__init__.py").exists())
    layers = (ROOT / ".importlinter").read_text().split("[importlinter:contract:layers]")[1].split("\n\n")[0]
    in_layers = set(re.findall(r"rig\.(\w+)", layers.split("layers =", 1)[1]))
    assert set(packages) <= in_layers, f"packages in no layer: {sorted(set(packages) - in_layers)}"


def test_no_import_cycle_in_the_rig():
    """No module of rig/ imports, directly or through others, a module that imports it back
    (a package and its own modules included). An import for the type checker alone
    (``if typing.TYPE_CHECKING:``) runs never, and is no cycle."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("rig", exclude_type_checking_imports=True)
    cycles = sorted({tuple(sorted((m, n))) for m in graph.modules for n in graph.find_modules_directly_imported_by(m)
                     if graph.chain_exists(importer=n, imported=m)})
    assert cycles == [], cycles


def test_a_parent_module_importing_the_worker_breaks_the_rule_and_names_the_line(tmp_path):
    """The parent knows the worker only through rig.contract: an import of rig.worker added to a
    parent module breaks the contract, and import-linter names the line."""
    shutil.copytree(ROOT / "rig", tmp_path / "rig", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    config = tmp_path / "rig" / "parent" / "config.py"
    text = config.read_text()
    line = len(text.splitlines()) + 1
    config.write_text(text + "from rig.worker import outputs  # deliberate: the parent reaches into the worker\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    out = " ".join(proc.stdout.split())
    assert "know the worker only through rig.contract" in out and "rig.worker BROKEN" in out, out[-3000:]
    assert re.search(rf"rig\.parent\.config -> rig\.worker\.outputs \(l\.{line}\)", out), out[-3000:]


def test_only_the_entry_point_imports_the_worker():
    """Beside import-linter, read from the sources: no module of the parent's side names rig.worker
    in an import statement; rig.cli, the entry point, is the one that starts a worker."""
    import ast

    found = []
    for side in ("parent", "commands", "analysis", "store"):
        for path in (ROOT / "rig" / side).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                found += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if n.split(".")[:2] == ["rig", "worker"]]
    assert not found, found
    cli = (ROOT / "rig" / "cli.py").read_text()
    assert "from rig.worker import main as worker" in cli

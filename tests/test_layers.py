"""The layer rule (.importlinter, docs/dev/architecture.md) holds on this tree, and a deliberate
violation breaks it: import-linter over the real package, then over a copy of it in which the
store imports a command."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
    assert "the store owns compaction: it never imports a command BROKEN" in out
    # the line it names is the one added (the chain may name others of the store's too)
    assert re.search(rf"rig\.store -> rig\.commands\.compact \([^)]*\bl\.{line}\b", out), proc.stdout[-3000:]

"""rig/analysis/ by topic (docs/dev/architecture.md, "Analysis by topic"): one subpackage each for the
conformance table, the report and capacity, beside the shared helpers. Held here and by
.importlinter's analysis-topics contract: the topics import the shared helpers, the report may read
the other two, conformance and capacity never know each other, no helper knows a topic, there is no
circle (not even one for the type checker alone), and no module reaches for another's ``_private``
name in analysis: a name shared between files is public."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

LINT = Path(sys.executable).with_name("lint-imports")
ANALYSIS = ROOT / "rig" / "analysis"
TOPICS = ("conformance", "report", "capacity")
READ = ("rig", "tests", "benchmarks", "analysis")  # where an importer of rig.analysis may be


def _module_of(dotted: str, root: Path) -> Path | None:
    """The file of a module of rig/ (a package's __init__.py), or None where the name is none."""
    path = root.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _reaches(path: Path, root: Path = ROOT) -> list[str]:
    """Where a file takes a ``_private`` name of rig.analysis (imported, or read off a module it
    imported), or, being of rig/analysis, of any module of rig."""
    mine = path.is_relative_to(root / "rig" / "analysis")
    tree = ast.parse(path.read_text(), str(path))
    modules: dict[str, str] = {}  # a local name -> the rig.analysis module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module.startswith("rig"):
            for a in node.names:
                if _private(a.name) and (mine or node.module.startswith("rig.analysis")):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: from {node.module} import {a.name}")
                full = f"{node.module}.{a.name}"
                if full.startswith("rig.analysis") and _module_of(full, root):
                    modules[a.asname or a.name] = full
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("rig.analysis") and a.asname:
                    modules[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and _private(node.attr)):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {modules[node.value.id]}.{node.attr}")
    return found


def test_no_private_name_of_analysis_is_taken_across_modules():
    found = [hit for top in READ for p in sorted((ROOT / top).rglob("*.py")) if "__pycache__" not in p.parts
             for hit in _reaches(p)]
    assert not found, "a name shared between modules is public: drop its underscore\n" + "\n".join(found)


def test_a_private_name_taken_is_caught(tmp_path):
    for module in ("rig/analysis/stats.py", "rig/analysis/report/__init__.py", "rig/analysis/report/parts.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    outside = tmp_path / "tests" / "probe.py"
    outside.parent.mkdir()
    outside.write_text("from rig.analysis.report.parts import _secret\nfrom rig.analysis import stats\n"
                       "stats._finite([])\nfrom rig.store import _own\n")
    hits = _reaches(outside, tmp_path)
    assert len(hits) == 2 and "import _secret" in hits[0] and "rig.analysis.stats._finite" in hits[1], hits
    inside = tmp_path / "rig" / "analysis" / "report" / "probe.py"  # in analysis, any rig module's private
    inside.write_text("from rig.store import _own\n")
    assert _reaches(inside, tmp_path) == ["rig/analysis/report/probe.py:1: from rig.store import _own"]


def test_each_topic_is_a_package_and_the_flat_families_are_gone():
    for topic in TOPICS:
        assert (ANALYSIS / topic / "__init__.py").is_file(), topic
    family = re.compile(r"(conformance|report|capacity)(_\w+)?\.py")
    flat = sorted(p.name for p in ANALYSIS.glob("*.py") if family.fullmatch(p.name))
    assert not flat, f"a topic's module outside its subpackage: {flat}"


def test_no_circle_in_analysis_even_for_the_type_checker():
    """The conformance cells live in a module of their own (conformance/cells.py), so that the table
    and the changes between cores both import them and neither imports the other: no circle, even
    counting imports made for the type checker alone."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("rig", exclude_type_checking_imports=False)
    mods = {m for m in graph.modules if m.startswith("rig.analysis")}
    cycles = sorted({tuple(sorted((m, n))) for m in mods for n in graph.find_modules_directly_imported_by(m)
                     if n in mods and graph.chain_exists(importer=n, imported=m)})
    assert cycles == [], cycles


def _lint(root: Path) -> subprocess.CompletedProcess:
    if not LINT.exists():
        pytest.skip(f"lint-imports is not installed next to {sys.executable} (pip install -e '.[test]')")
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"})


def test_a_topic_importing_a_sibling_breaks_the_contract(tmp_path):
    """conformance and capacity are independent: an import of one from the other breaks the
    analysis-topics contract, which names the line."""
    shutil.copytree(ROOT / "rig", tmp_path / "rig", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    order = tmp_path / "rig" / "analysis" / "conformance" / "order.py"
    text = order.read_text()
    line = len(text.splitlines()) + 1
    order.write_text(text + "from rig.analysis.capacity import tags  # deliberate: a topic knows its sibling\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    out = " ".join(proc.stdout.split())
    assert "analysis by topic" in out and "topic BROKEN" in out, out[-3000:]
    chain = rf"rig\.analysis\.conformance\.order -> rig\.analysis\.capacity\.tags \(l\.{line}\)"
    assert re.search(chain, out), out[-3000:]

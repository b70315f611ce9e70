"""rig.repro.script: the parts join into one script that imports no rig and holds the rig's binding
as it is; the template (no cell) refuses to run."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from test_repro_cell import NO_RIG_IMPORT

from rig.repro import main as repro_main
from rig.repro import script as repro_script


def test_the_template_script_refuses_to_run_without_a_cell(capsys):
    assert repro_main.main([]) == 2 and "no cell" in capsys.readouterr().err


def test_the_parts_join_into_one_script_each_name_once():
    """Every part imports the standard library, numpy and the parts before it alone; joined, no name is defined
    twice."""
    text = repro_script.template()
    assert text.count("CELL: dict[str, Any] = {}") == 1 and not NO_RIG_IMPORT.search(text)
    for part in repro_script.PARTS:
        tree = ast.parse(repro_script.path_of(part).read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        rig = {m for m in mods if m.split(".")[0] == "rig"}
        assert rig <= set(repro_script.PARTS[: repro_script.PARTS.index(part)]), part
        assert {m.split(".")[0] for m in mods - rig} <= set(sys.stdlib_module_names) | {"numpy", "__future__"}, part


def test_the_script_holds_the_rigs_binding_as_it_is():
    """One binding: every module of rig/capi/ is a part of the script, and the script holds each file as it is, from
    its first statement after the imports to its end; the worker's engine runs the same package, and no part of
    the script's own repeats the binding's lines."""
    from rig import capi

    folder = Path(capi.__file__).parent
    modules = {f"rig.capi.{p.stem}" for p in folder.glob("*.py") if p.name != "__init__.py"}
    assert modules == {"rig.capi.core", "rig.capi.server"} and modules <= set(repro_script.PARTS)
    text = repro_script.template()
    for module in sorted(modules):
        path = repro_script.path_of(module)
        assert path.parent == folder
        source = path.read_text()
        tree = ast.parse(source)
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert all(n.end_lineno is not None and n.end_lineno < m.lineno for n in imports
                   for m in tree.body if not isinstance(m, (ast.Import, ast.ImportFrom, ast.Expr)))
        body = "".join(source.splitlines(keepends=True)[max(n.end_lineno or 0 for n in imports) :]).lstrip("\n")
        assert len(body) > 2000 and body in text, module  # everything after the imports, comments and all
    from rig.worker.engines.capi import engine, response

    assert engine.Server.__module__ == "rig.capi.server" and issubclass(engine.CapiEngine, engine.Server)
    assert response.as_array.__module__ == "rig.capi.server"
    binding = {line.strip() for m in modules for line in repro_script.path_of(m).read_text().splitlines()}
    for part in (p for p in repro_script.PARTS if p not in modules):
        own = [line.strip() for line in repro_script.path_of(part).read_text().splitlines()]
        runs = [k for k in range(len(own) - 5) if all(x in binding and len(x) > 3 for x in own[k : k + 6])]
        assert not runs, f"{part} repeats six lines of the binding from line {runs[0] + 1}"

"""The binding to Triton's C API (``rig/capi/``, docs/dev/architecture.md) imports nothing of the rig:
its contract in .importlinter forbids every other package of rig/ (a package added later too), and
read from the sources, its modules import the standard library, numpy and ``rig.capi`` alone
(``rig repro`` copies them into a script that stands alone)."""

from __future__ import annotations

import ast
import re
import sys

from helpers import ROOT


def test_the_contract_forbids_every_other_package():
    text = (ROOT / ".importlinter").read_text()
    contract = text.split("[importlinter:contract:capi-standalone]")[1].split("\n\n")[0]
    assert "type = forbidden" in contract
    sources, forbidden = contract.split("source_modules =")[1].split("forbidden_modules =")
    assert re.findall(r"rig\.[\w.]+", sources) == ["rig.capi"]
    others = {f"rig.{p.name}" for p in (ROOT / "rig").iterdir() if (p / "__init__.py").exists()} - {"rig.capi"}
    others |= {f"rig.{p.stem}" for p in (ROOT / "rig").glob("*.py") if not p.name.startswith("__")}
    missing = others - set(re.findall(r"rig\.[\w.]+", forbidden))
    assert not missing, f"the binding's contract does not forbid {sorted(missing)}"


def test_its_modules_import_the_standard_library_and_numpy_alone():
    found = []
    for path in sorted((ROOT / "rig" / "capi").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                top = name.split(".")[0]
                if not (name.startswith("rig.capi") or top in sys.stdlib_module_names or top in ("numpy", "__future__")):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not found, found

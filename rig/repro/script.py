"""The script ``rig repro`` writes as ``repro.py``: its parts (``rig.repro.head``, the rig's
binding ``rig.capi.core`` and ``rig.capi.server`` as they are, then ``rig.repro``'s ``server``,
``load``, ``evidence``, ``env``, ``scenes``, ``main``) joined into one file that stands alone,
with the cell written into ``CELL``.

Each part is a module of its own (ruff, mypy and the tests read it) that imports the standard
library, numpy and ctypes, and the parts before it by their ``rig`` names. Joined, the first
part's docstring heads the file, every other import is gathered once at its top (the ``rig``
ones left out: there every part's names are one module's), and the parts' bodies follow in order,
each as its file has it (the binding's too: a reproducer runs the rig's own binding).
"""

from __future__ import annotations

import ast
import pprint
from pathlib import Path
from typing import Any

from rig.common.errors import RigError

PARTS = (
    "rig.repro.head",
    "rig.capi.core",
    "rig.capi.server",
    "rig.repro.server",
    "rig.repro.load",
    "rig.repro.evidence",
    "rig.repro.env",
    "rig.repro.scenes",
    "rig.repro.main",
)
FOLDER = Path(__file__).parent
RIG = FOLDER.parent  # the rig package's folder
CELL_LINE = "CELL: dict[str, Any] = {}\n"


def path_of(part: str) -> Path:
    """The file of a part (a module of the rig)."""
    return RIG.joinpath(*part.split(".")[1:]).with_suffix(".py")


def split(part: str) -> tuple[str | None, list[ast.stmt], str]:
    """A part's docstring, its imports (the statements before its first other one) and its body's
    text: the file's from its first other statement (and the comment lines that head it) to its end."""
    text = path_of(part).read_text()
    tree = ast.parse(text)
    body = list(tree.body)
    doc = ast.get_docstring(tree, clean=False)
    if doc is not None:
        body = body[1:]
    imports: list[ast.stmt] = []
    while body and isinstance(body[0], (ast.Import, ast.ImportFrom)):
        imports.append(body.pop(0))
    if not body:
        return doc, imports, ""
    lines = text.splitlines(keepends=True)
    start = body[0].lineno - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):  # a comment that heads the first statement
        start -= 1
    return doc, imports, "".join(lines[start:]).strip("\n") + "\n"


def _names(part_body: str) -> set[str]:
    out: set[str] = set()
    for node in ast.parse(part_body).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def _import_lines(imports: list[ast.stmt]) -> list[str]:
    """The parts' imports, each once: ``import X`` lines, then ``from X import ...`` merged per module."""
    plain: set[str] = set()
    froms: dict[str, set[str]] = {}
    for node in imports:
        if isinstance(node, ast.Import):
            plain |= {a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names}
            froms.setdefault(node.module, set()).update(names)
    third = {"numpy"}
    out = [f"import {m}" for m in sorted(plain) if m.split(" ")[0].split(".")[0] not in third]
    for module in sorted(m for m in froms if m.split(".")[0] not in third):
        line = f"from {module} import {', '.join(sorted(froms[module], key=lambda n: (not n.isupper(), n)))}"
        if len(line) > 110:
            inner = "".join(f"    {n},\n" for n in sorted(froms[module], key=lambda n: (not n.isupper(), n)))
            line = f"from {module} import (\n{inner})"
        out.append(line)
    out += ["", *[f"import {m}" for m in sorted(plain) if m.split(" ")[0].split(".")[0] in third]]
    return out


def template() -> str:
    """The parts joined: one module, no ``rig`` import, ``CELL`` empty."""
    doc: str | None = None
    imports: list[ast.stmt] = []
    bodies: list[str] = []
    seen: dict[str, str] = {}
    for part in PARTS:
        name = part.removeprefix("rig.repro.")  # the binding's parts by their module's name
        part_doc, part_imports, body = split(part)
        doc = doc or part_doc
        for node in part_imports:
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module == "__future__" or (module or "").split(".")[0] == "rig":
                continue
            imports.append(node)
        for n in _names(body):
            if n in seen:
                raise RigError(f"repro parts {seen[n]} and {name} both define {n}: one script cannot hold both")
            seen[n] = name
        bodies.append(f"# {'-' * 64} {name}\n\n{body}")
    head = [f'"""{doc}"""', "", "from __future__ import annotations", "", *_import_lines(imports)]
    return "\n".join(head) + "\n\n" + "\n\n".join(bodies)


def text(cell: dict[str, Any]) -> str:
    """The script with ``cell`` written into ``CELL``."""
    script = template()
    if CELL_LINE not in script:
        raise RigError(f"{FOLDER}/head.py has no line {CELL_LINE.strip()!r} for the cell; reinstall the rig")
    literal = pprint.pformat(cell, width=110, sort_dicts=False)
    return script.replace(CELL_LINE, f"CELL: dict[str, Any] = {literal}\n", 1)

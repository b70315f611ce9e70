"""Where the rig's models are: the templates (``numpy``, ``cupy``) and each scenario's own, under
``models/`` of a checkout or ``rig/_models`` of an install. Here, below both the parent (which
renders the templates) and the scenarios (which copy their models), so neither reaches up."""

from __future__ import annotations

from pathlib import Path

from rig.common.errors import RigError


def templates_dir() -> Path:
    """``models/`` of a checkout, or the same files installed with the rig."""
    here = Path(__file__).resolve().parents[1]  # the rig package
    for candidate in (here.parent / "models", here / "_models"):
        if (candidate / "numpy" / "config.pbtxt.tmpl").exists():
            return candidate
    raise RigError("the rig's model templates are missing; reinstall the rig (pip install .)")

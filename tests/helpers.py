"""Plain helpers of the tests: the rig run as users run it (a subprocess), and rows as the store
keeps them.

Imported normally (``from helpers import rig``); the fixtures live in conftest.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def _env(extra: dict | None = None) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.update(extra or {})
    return e


def rig(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the rig to completion, as a user would."""
    return subprocess.run([sys.executable, "-m", "rig", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(env), cwd=str(ROOT))


def spawn(*args: str, **popen) -> subprocess.Popen:
    """Start the rig in the background (output discarded unless ``stdout`` is given)."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen([sys.executable, "-m", "rig", *args], env=_env(), cwd=str(ROOT), **popen)


def cycles(results: Path) -> pd.DataFrame:
    return pd.read_parquet(results / "cycles")


def cycle_row(cycle: int = 1, run_id: str = "r1", **kw):
    """A stored cycle's row, as the store keeps it: a clean capi cycle of the numpy model (every
    figure unset) unless ``kw`` says otherwise."""
    import dataclasses

    from rig.protocol import CycleRow

    base = {f.name: None for f in dataclasses.fields(CycleRow)}
    base.pop("schema_version")
    base.update(run_id=run_id, cycle=cycle, engine="capi", model="numpy", retain="none", outcome="clean",
                restart="fresh-process", stop_strategy="stop", started_at="2026-01-01T00:00:00+00:00")
    base.update(kw)
    return CycleRow(**base)

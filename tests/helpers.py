"""Plain helpers of the end-to-end tests: the rig run as users run it (a subprocess).

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

"""Shared helpers: the rig run as users run it (a subprocess), on the real embedded core."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent


def rig(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "rig", *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=str(ROOT))


def cycles(results: Path) -> pd.DataFrame:
    return pd.read_parquet(results / "cycles")


@pytest.fixture(scope="session")
def runtime():
    """The embedded default runtime (installed on first use, as the rig does)."""
    from rig import runtime as rt

    return rt.resolve(None, log=print)

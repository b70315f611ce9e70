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


def _env(extra: dict | None = None, inherit: bool = True) -> dict:
    e = dict(os.environ) if inherit else {}
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.update(extra or {})
    return e


def _argv(args: tuple[str, ...], script: bool) -> list[str]:
    # the console script, as installed users run it; else ``python -m rig`` (which puts the
    # working folder first on its module path: pass ``script=True`` where that matters)
    return [str(Path(sys.executable).parent / "rig"), *args] if script else [sys.executable, "-m", "rig", *args]


def rig(*args: str, timeout: float = 300, env: dict | None = None, cwd: Path | str | None = None,
        inherit_env: bool = True, script: bool = False, within: list[str] | None = None
        ) -> subprocess.CompletedProcess:
    """Run the rig to completion, as a user would: ``env`` adds to this process's environment
    (or, with ``inherit_env=False``, is all of it but the rig's PYTHONPATH); ``within`` is a
    command the rig's command line is appended to (``["unshare", "-m", "sh", "-c", 'mount ...
    && "$@"', "sh"]``)."""
    return subprocess.run([*(within or []), *_argv(args, script)], capture_output=True, text=True,
                          timeout=timeout, env=_env(env, inherit_env), cwd=str(cwd or ROOT))


def spawn(*args: str, env: dict | None = None, cwd: Path | str | None = None, inherit_env: bool = True,
          **popen) -> subprocess.Popen:
    """Start the rig in the background (output discarded unless ``stdout`` is given); ``env`` as
    for ``rig``."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen(_argv(args, False), env=_env(env, inherit_env), cwd=str(cwd or ROOT), **popen)


def cycles(results: Path) -> pd.DataFrame:
    return pd.read_parquet(results / "cycles")


def cycle_row(cycle: int = 1, run_id: str = "r1", **kw):
    """A stored cycle's row, as the store keeps it: a clean capi cycle of the numpy model (every
    figure unset) unless ``kw`` says otherwise."""
    import dataclasses

    from rig.contract.rows import CycleRow

    base = {f.name: None for f in dataclasses.fields(CycleRow)}
    base.pop("schema_version")
    base.update(run_id=run_id, cycle=cycle, engine="capi", model="numpy", retain="none", outcome="clean",
                restart="fresh-process", stop_strategy="stop", started_at="2026-01-01T00:00:00+00:00")
    base.update(kw)
    return CycleRow(**base)


def browser(height: int = 2200):
    """Headless Chromium through selenium (a test is skipped, saying why, where either is missing)."""
    import shutil

    import pytest

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no chromium and chromedriver here (.ci/run installs Debian's chromium, chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e .[test])")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size=1280,{height}"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)

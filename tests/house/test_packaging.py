"""The wheel users install holds every file the rig reads at run time, with no name clashes."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

pytestmark = pytest.mark.slow  # pip builds a wheel


def test_wheel_contents(tmp_path, repo_root):
    ROOT = repo_root
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    wheel = next(tmp_path.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("rig/worker/engines/capi/_fastpath.c", "rig/worker/hook/evidence.py", "rig/worker/hook/crash.c", "rig/_models/numpy/config.pbtxt.tmpl",
                   "rig/_models/numpy/1/model.py", "rig/_models/cupy/config.pbtxt.tmpl", "rig/_models/cupy/1/model.py",
                   "rig/_workloads/steady.py", "rig/_workloads/checked.py", "rig/_workloads/nightly.toml",
                   "rig/analysis/plots.py", "rig/analysis/sweeps.py", "rig/parent/repository.py", "rig/worker/load/users.py",
                   "rig/worker/engines/official/engine.py", "rig/store/where.py", "rig/parent/orchestrator/run.py",
                   "rig/_models/scenarios/sender-kept/chat_stream/config.pbtxt",
                   "rig/_models/scenarios/sender-kept/chat_stream/1/model.py"):
        assert needed in names, needed
    # every module of the source tree travels (a package missing from pyproject's list would not)
    sources = {str(f.relative_to(ROOT)) for f in (ROOT / "rig").rglob("*.py") if "__pycache__" not in f.parts}
    assert sorted(sources - names) == []
    # a package folder named like a module would shadow it once installed
    modules = {n[:-3] for n in names if n.startswith("rig/") and n.endswith(".py") and n.count("/") == 1}
    packages = {n.rsplit("/", 1)[0] for n in names if n.startswith("rig/") and n.count("/") == 2}
    assert not modules & packages

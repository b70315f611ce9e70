"""`rig runtime build VERSION --python OTHER` after `rig runtime build VERSION`: the core built
before is reused and only the Python backend and its stub are built for the other interpreter; the
build says so, under the runtime's own name, and its manifest records what it reused.

A real build (a few minutes on 2 cores): the core is the one .ci/run builds (2.67.0, in the rig's
cache), copied with only this interpreter's stub into a fresh cache, where the stub for another
Python is then built. It found a bug: the build's step loop rebound the runtime's name, and the
build ended with "rig: error: No such file or directory (.../runtimes/built-build core/runtime.json)".
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, rig

pytestmark = pytest.mark.slow

VERSION = "2.67.0"
BUNDLES = Path(os.environ.get("RIG_TRITON_SOURCES") or ROOT.parent / "shared" / "triton-src")
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"


ASK = ("import sys, sysconfig, os; v = f'{sys.version_info[0]}.{sys.version_info[1]}'; "
       "print(v if os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')) else '')")


def _another_python() -> tuple[str, str] | None:
    """A CPython other than this one, with its headers (the stub compiles against them): pyenv's, the
    sandbox's 3.12 first (.ci/run builds its stub into the compiler cache, so here it compiles from
    the cache: the build is the reuse, not the compiler's time)."""
    found = glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[1-9]*/bin/python3.1[1-9]"))
    for exe in sorted(found, key=lambda e: ("python3.12" not in e, [-ord(ch) for ch in e])):
        p = subprocess.run([exe, "-c", ASK], capture_output=True, text=True, check=False)
        tag = p.stdout.strip()
        if tag and tag != HERE:
            return exe, tag
    return None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def core_only(tmp_path_factory):
    """A fresh cache holding the built core with this interpreter's stub alone."""
    from rig.common.errors import RigError
    from rig.runtimes.from_source import builder, preflight

    real = builder.built_root(VERSION)
    if not builder.is_built(real, HERE):
        pytest.skip(f"Triton {VERSION} is not built here for Python {HERE} (.ci/run builds it: rig runtime build "
                    f"{VERSION} --sources {BUNDLES})")
    if not (BUNDLES / "core.bundle").exists():
        pytest.skip(f"no git bundles at {BUNDLES} (set RIG_TRITON_SOURCES)")
    other = _another_python()
    if other is None:
        pytest.skip(f"no CPython but {HERE} with its headers here (pyenv install 3.12)")
    try:
        preflight.check(other[0])
    except RigError as e:
        pytest.skip(f"a stub cannot be built here: {e}")
    home = tmp_path_factory.mktemp("rig-home")
    dest = home / "runtimes" / f"built-{VERSION}"
    dest.mkdir(parents=True)
    for part in ("lib", f"py{HERE}"):
        shutil.copytree(real / part, dest / part, symlinks=True)
    shutil.copy2(real / "TRITON_VERSION", dest / "TRITON_VERSION")
    m = builder.manifest(real)
    m["pythons"] = {HERE: m["pythons"][HERE]}
    (dest / "runtime.json").write_text(json.dumps(m, indent=1))
    tools = builder.runtimes_dir().parent / "build-tools"
    if tools.exists():  # cmake and ninja as fetched before
        (home / "build-tools").symlink_to(tools)
    env = {"RIG_HOME": str(home)}
    ccache = Path(os.environ.get("CCACHE_DIR") or builder.runtimes_dir().parent / "ccache")
    if ccache.is_dir():  # what the real builds compiled serves this one (the compile is what is timed least here)
        env["CCACHE_DIR"] = str(ccache)
    return home, env, other, m


def test_a_stub_for_another_python_reuses_the_core_and_says_so(core_only):
    home, env, (python, tag), before = core_only
    core = home / "runtimes" / f"built-{VERSION}" / "lib" / "libtritonserver.so"
    core_sha = _sha256(core)
    p = rig("runtime", "build", VERSION, "--python", python, "--sources", str(BUNDLES),
            env=env, timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "rig: error" not in p.stderr and "No such file" not in p.stderr, p.stderr
    root = home / "runtimes" / f"built-{VERSION}"
    # the announcement and the last line name the runtime, not a step
    assert f"building Triton {VERSION} (r26.03) for CPU, backend stub for Python {tag}" in p.stdout
    assert "the core is reused from" in p.stdout
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith(f"built-{VERSION}: Triton {VERSION} in {root} ("), last
    assert "the core reused from its build of" in last
    assert f"backend stubs for Python {', '.join(sorted([HERE, tag]))}" in last
    assert not list((home / "runtimes").glob("built-*build*"))  # no runtime named after a step
    m = json.loads((root / "runtime.json").read_text())
    reused = m["reused"]["core"]
    assert reused["steps"] == ["configure core", "build core"]
    assert reused["built_at"] == before["built_at"] and reused["for_pythons"] == [HERE]
    assert reused["commit"] == before["commits"]["core"] == m["commits"]["core"]
    assert set(m["pythons"]) == {HERE, tag} and m["pythons"][tag] == python
    assert m["triton_version"] == VERSION and m["label"] == VERSION
    # the core is the one built before, byte for byte; both stubs are there
    assert _sha256(root / "lib" / "libtritonserver.so") == core_sha
    for py in (HERE, tag):
        assert (root / f"py{py}" / "backends" / "python" / "triton_python_backend_stub").exists(), py
    # the core's steps are the earlier build's times, the backend's this one's
    assert m["step_seconds"]["build core"] == before["step_seconds"]["build core"]
    assert not (home / "builds" / VERSION).exists()  # the work tree removed
    # and a second time: a cache hit for that Python
    p = rig("runtime", "build", VERSION, "--python", python, "--sources", str(BUNDLES),
            env=env, timeout=300)
    assert p.returncode == 0 and "cache hit" in p.stdout, p.stdout + p.stderr

"""The GPU kit (benchmarks/gpu_kit.sh, benchmarks/gpu_check.sh --kit; docs/measurements/gpu.md):
the archive is made from this tree, is at most 60 MiB and holds what the issue names; its dry run
(GPU_CHECK_MODEL=numpy GPU_CHECK_QUICK=1), the self-test first (each check skipped), runs to the end offline (`unshare -n`, loopback down)
under a fresh CPython 3.12 venv that holds only the GPU machine's packages. Skipped, with the
reason, where unshare, a CPython 3.12 or PyPI is missing. About 2 minutes here (2 cores)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from helpers import ROOT

KIT = ROOT / "benchmarks" / "gpu_kit.sh"
CHECK = ROOT / "benchmarks" / "gpu_check.sh"
MACHINE = ["numpy>=2", "pandas", "pyarrow", "psutil", "rich", "scipy", "matplotlib", "nvidia-ml-py"]


def test_the_kit_scripts_are_executable_strict_bash():
    for script in (KIT, CHECK):
        assert os.access(script, os.X_OK), script
        assert script.read_text().startswith("#!/usr/bin/env bash\n")
        r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def _python312() -> str | None:
    """pyenv's CPython 3.12, else python3.12 on PATH where it runs (a pyenv shim may not)."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for py in [*pyenv[-1:], shutil.which("python3.12")]:
        if py and subprocess.run([py, "-c", "import venv"], capture_output=True).returncode == 0:
            return py
    return None


@pytest.mark.slow
def test_the_kit_is_small_holds_its_parts_and_its_dry_run_ends_offline(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here: the dry run is checked without a network namespace nowhere")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -n is refused here (it needs root or user namespaces)")
    py312 = _python312()
    if py312 is None:
        pytest.skip("no CPython 3.12 here (python3.12 on PATH or pyenv's): the kit is for 3.12")
    venv = tmp_path / "gpuvenv"
    subprocess.run([py312, "-m", "venv", str(venv)], check=True)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *MACHINE],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"the GPU machine's packages could not be installed from PyPI: {r.stderr.strip()[-300:]}")

    r = subprocess.run([str(KIT), str(tmp_path / "kit")], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHON": sys.executable})
    if r.returncode != 0 and "pip" in r.stderr and ("resolve" in r.stderr or "download" in r.stderr):
        pytest.skip(f"PyPI is not reachable to make the kit: {r.stderr.strip()[-300:]}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (archive,) = (tmp_path / "kit").glob("rig-gpu-kit-*.tar.xz")
    assert archive.stat().st_size <= 60 * 2**20
    assert re.search(r"archive: .*\([\d.]+ MiB, limit 60 MiB\)", r.stdout)
    with tarfile.open(archive) as tf:
        names = tf.getnames()
    top = names[0].split("/")[0]
    rel = [n[len(top) + 1:] for n in names if n.startswith(top + "/")]
    assert "rig/pyproject.toml" in rel and "rig/benchmarks/gpu_check_figures.py" in rel
    assert "rig/benchmarks/gpu_selftest.py" in rel, "the kit's first step: a kit made before it was committed lacks it"
    wheels = {n.split("/")[1].split("-")[0].lower() for n in rel if n.startswith("wheels/") and n.endswith(".whl")}
    assert {"locust", "gevent", "hdrhistogram", "ruptures", "junitparser", "setuptools"} <= wheels
    assert not wheels & {"numpy", "pandas", "pyarrow", "scipy", "matplotlib", "psutil", "rich"}
    rt = "rig-home/runtimes/embedded-0.7.0/wheel/"
    assert any(re.fullmatch(rt + r"nvidia_pytriton\.libs/libtritonserver-\w+\.so", n) for n in rel)
    assert rt + "pytriton/tritonserver/backends/python/libtriton_python.so" in rel
    stubs = {n.split("/")[-2] for n in rel if n.endswith("/triton_python_backend_stub")}
    assert stubs == {"3.12"}
    assert not [n for n in rel if "/bin/tritonserver" in n or "libpython3" in n]
    assert "rig-home/stub-site-py3.12/.complete" in rel
    assert any(n.startswith("rig-home/stub-site-py3.12/numpy-1.") for n in rel)

    run = tmp_path / "run"
    run.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "RIG_HOME")}
    cmd = (f"source {venv}/bin/activate && GPU_CHECK_MODEL=numpy GPU_CHECK_QUICK=1 "
           f"bash {CHECK} --kit {archive} OUT")
    r = subprocess.run(["unshare", "-n", "bash", "-c", cmd], cwd=run, capture_output=True, text=True,
                       timeout=480, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    # the self-test first, before any step: one line per check, each skipped here (no CuPy, no GPU)
    said = r.stdout.splitlines()
    checks = [ln for ln in said if ln.startswith("self-test ")]
    assert [ln.split(":")[0] for ln in checks] == [f"self-test {c}" for c in ("capsules", "kernel", "ipc", "order")]
    assert all(ln.split(": ", 2)[1] == "skipped" for ln in checks), checks
    assert said.index(checks[-1]) < min(i for i, ln in enumerate(said) if ln.startswith("== doctor"))
    md = (run / "OUT" / "gpu.md").read_text()
    assert re.search(r"\| capsules \| skipped \| CuPy is not installed", md), md
    assert "; self-test: 4 skipped" in md
    assert "| soak-cpu-inputs | passed | 0 |" in md and "| bench-numpy | passed | 0 |" in md
    assert re.search(r"\| retained-response \| numpy \| .* \| exit_timeout 1 \|", md), md
    assert "| soak-gpu-inputs | skipped |" in md
    assert re.search(r"\d passed, 0 failed, 1 skipped", md), md
    assert "the stubs' numpy 1.26" in md
    # the venv it ran under is left as it was: nothing of the rig or the kit installed into it
    listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=freeze"], capture_output=True,
                            text=True).stdout.lower()
    assert "locust" not in listed and "triton-soak-rig" not in listed

"""Every documented install resolves: .ci/resolve-installs.py runs pip's resolver as a dry run on the
host's install, the device image's, the official engine's and the NGC images' of the nightly's
pair, under the Python each runs (slow: it needs PyPI, and skips saying so without it), and a
combination known to conflict (the official engine with CuPy 14) is reported as one, with pip's
reason. The fast tests hold the script to what it checks: its NGC combinations are the version
table's pair and the Dockerfile's install, every extra it names exists, the docs' table gives each
command, .ci/run calls it, and its reading of pip's output (a conflict, a silent index, a missing
extra, a pair that imports badly though pip installs it) is right on pip's own words."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib

import pytest

from helpers import ROOT

SCRIPT = ROOT / ".ci" / "resolve-installs.py"
DOCS = ROOT / "docs" / "guide" / "runtimes.md"


@pytest.fixture(scope="module")
def ri():
    spec = importlib.util.spec_from_file_location("resolve_installs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _extras_named(arg: str) -> list[str]:
    m = re.fullmatch(r"\.\[([^\]]+)\]", arg)
    return m.group(1).split(",") if m else []


def test_the_combinations_cover_each_place_the_rig_runs(ri):
    from rig.contract import ngc

    combos = ri.combos()
    places = [c.place for c in combos]
    assert len(set(places)) == len(places)
    host = [c for c in combos if c.python == "host"]
    assert [c.args for c in host] == [("-e", "."), ("-e", ".[test,docs]")]  # the README's quick start, .ci/run's
    (device,) = [c for c in combos if c.place.startswith("device image")]
    assert device.python == "3.12" and device.args == (".[gpu-cuda13]",)
    assert set(device.constraints) == {"numpy==2.5.2", "cupy-cuda13x==14.2.0"}  # the device image's pip list
    for tag in (ngc.BASELINE_TAG, ngc.CANDIDATE_TAG):  # the nightly's pair, as the table gives it
        row = ngc.by_tag(tag)
        (c,) = [c for c in combos if c.place.startswith(f"NGC {tag} ")]
        assert c.python == row.python == "3.12"
        assert c.args == (".[ngc]", row.cupy)
        assert c.holds == (f"tritonserver=={row.triton_version}",) and "numpy<2" in c.constraints
        # PyPI's bindings where it has the version, else a stand-in that declares what core declares
        assert (c.stand_in is None) == (row.triton_version in ri.PYPI_BINDINGS)
    assert ngc.by_tag(ri.CUDA12_TAG).cuda_major == 12  # one CUDA 12 row beside the pair


def test_every_extra_a_combination_names_exists(ri):
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for c in ri.combos():
        for arg in c.args:
            for name in _extras_named(arg):
                assert name in extras, (c.place, name)
    for keep in ("test", "docs", "official"):
        assert keep in extras


def test_the_ngc_combinations_install_what_the_dockerfile_installs(ri):
    text = (ROOT / "Dockerfile").read_text()
    assert 'python3 -m pip install --constraint /tmp/image-pins.txt ".[ngc]" "$cupy"' in text
    for c in ri.combos():
        if c.place.startswith("NGC "):
            tag = c.place.split()[1]
            r = subprocess.run(["sh", str(ROOT / "deploy" / "docker" / "cupy-package.sh")], capture_output=True,
                               text=True, env={"PATH": os.environ["PATH"], "CUDA_HOME": "/nonexistent", "NGC_TAG": tag})
            assert c.args == (".[ngc]", r.stdout.strip()), (c.place, r.stderr)


def test_the_docs_table_gives_each_combinations_command_and_ci_runs_the_check(ri):
    docs = DOCS.read_text()
    for c in ri.combos():
        assert f"`{c.command}`" in docs, c.command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    (line,) = [i for i, text in enumerate(ci) if "resolve-installs.py" in text]
    host_install = next(i for i, text in enumerate(ci) if 'pip install' in text and '.[test]' in text)
    assert line > host_install


# pip 23.2's own words, from a dry run of `.[official]` with `cupy-cuda13x>=14` (Python 3.12).
CONFLICT_OUTPUT = """\
ERROR: Cannot install cupy-cuda13x==14.0.0, cupy-cuda13x==14.2.0 and triton-soak-rig[official]==0.1.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    triton-soak-rig[official] 0.1.0 depends on numpy
    triton-soak-rig[official] 0.1.0 depends on numpy<2; extra == "official"
    cupy-cuda13x 14.2.0 depends on numpy<2.6 and >=2.0
    triton-soak-rig[official] 0.1.0 depends on numpy
    triton-soak-rig[official] 0.1.0 depends on numpy<2; extra == "official"
    cupy-cuda13x 14.0.0 depends on numpy<2.6 and >=2.0

To fix this you could try to:
1. loosen the range of package versions you've specified
2. remove package versions to allow pip attempt to solve the dependency conflict

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts
"""


def _report(**versions: str) -> dict:
    return {"install": [{"metadata": {"name": k.replace("_", "-"), "version": v}} for k, v in versions.items()]}


def test_a_conflict_is_reported_with_pips_reason_once_per_line(ri):
    combo = ri.Combo("x", "3.12", (".[official]", "cupy-cuda13x>=14"))
    r = ri.judge(combo, 1, CONFLICT_OUTPUT, None)
    assert r.status == "conflict"
    assert r.detail.count("cupy-cuda13x 14.2.0 depends on numpy<2.6 and >=2.0") == 1
    assert 'depends on numpy<2; extra == "official"' in r.detail
    assert r.line().startswith("conflict  x: pip install '.[official]' 'cupy-cuda13x>=14' -> ")


def test_a_silent_index_skips_and_other_failures_are_errors(ri):
    combo = ri.Combo("x", "host", ("-e", "."))
    silent = ("WARNING: Retrying (Retry(total=1, connect=None, read=None, redirect=None, status=None)) after "
              "connection broken by 'NewConnectionError(...)': /simple/numpy/\n"
              "ERROR: Could not find a version that satisfies the requirement numpy (from versions: none)\n"
              "ERROR: No matching distribution found for numpy\n")
    assert ri.judge(combo, 1, silent, None).status == "skipped"
    assert ri.judge(combo, 2, "ERROR: no such option: --dry-run\n", None).status == "error"
    missing = "ERROR: No matching distribution found for cupy-cuda13x==99\n"
    assert ri.judge(combo, 1, missing, None).status == "conflict"


def test_a_missing_extra_a_runtime_clash_or_an_unexpected_version_is_a_conflict(ri):
    combo = ri.Combo("x", "3.12", (".[gpu-cuda14]",), expect=(("numpy", "1."),))
    out = "WARNING: triton-soak-rig 0.1.0 does not provide the extra 'gpu-cuda14'\n"
    r = ri.judge(combo, 0, out, _report(numpy="1.26.4"))
    assert (r.status, r.detail) == ("conflict", "pyproject.toml has no extra gpu-cuda14")
    r = ri.judge(combo, 0, "", _report(numpy="1.26.4", pyarrow="26.0.1"))
    assert r.status == "conflict" and "pyarrow 26.0.1 with numpy 1.26.4" in r.detail
    r = ri.judge(combo, 0, "", _report(numpy="2.5.2", pyarrow="26.0.1"))
    assert r.status == "conflict" and r.detail == "numpy 2.5.2, not 1.*"
    r = ri.judge(combo, 0, "", _report(numpy="1.26.4", pyarrow="25.0.1", cupy_cuda13x="13.6.0", scipy="1.17.1"))
    assert (r.status, r.detail) == ("resolves", "cupy-cuda13x 13.6.0, numpy 1.26.4, pyarrow 25.0.1")


def test_the_stand_in_bindings_are_a_wheel_pip_resolves_offline(ri, tmp_path):
    """The wheel that stands in for an image's bindings where PyPI has none of their version: pip
    reads it as tritonserver of that version, with the Requires-Dist it was given (no index asked)."""
    ri.stand_in_wheel(tmp_path, "2.67.0", ri.NGC_BINDINGS_REQUIRE)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index",
                        "--no-deps", "--find-links", str(tmp_path), "--report", str(tmp_path / "r.json"),
                        "tritonserver==2.67.0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    (item,) = json.loads((tmp_path / "r.json").read_text())["install"]
    assert (item["metadata"]["version"], item["metadata"]["requires_dist"]) == ("2.67.0", ["numpy<2"])


@pytest.mark.slow
def test_every_documented_install_resolves(ri):
    if os.environ.get("RIG_INSTALLS_RESOLVED") == "1":
        pytest.skip("the check ran and passed in this CI run already (.ci/run, before the tests)")
    """The check itself, as .ci/run runs it: one line per combination, none a conflict."""
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=1800)
    if "PyPI unreachable" in r.stdout:
        pytest.skip(r.stdout.splitlines()[0])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if re.match(r"^(resolves|conflict|skipped|error) ", line)]
    assert len(lines) == len(ri.combos()), r.stdout
    assert not [line for line in lines if not line.startswith(("resolves", "skipped"))], r.stdout
    resolved = [line for line in lines if line.startswith("resolves")]
    assert resolved, r.stdout
    # where CuPy and numpy meet, the versions the docs promise
    by_place = {c.place: line for c in ri.combos() for line in lines if f" {c.place}: " in line}
    for place, line in by_place.items():
        if line.startswith("resolves") and place.startswith("NGC "):
            assert re.search(r"numpy 1\.26\.\d+", line) and re.search(r"cupy-cuda1[23]x 13\.", line), line
        if line.startswith("resolves") and place.startswith("device image"):
            assert "numpy 2.5.2" in line and "cupy-cuda13x 14.2.0" in line, line


@pytest.mark.slow
def test_the_check_reports_the_official_engine_with_cupy_14_as_a_conflict(ri):
    """Positive control: the combination the issue found (the official extra's numpy<2 against CuPy
    14's numpy>=2) is a conflict, with pip's reason naming numpy."""
    if ri.index_unreachable():
        pytest.skip(f"PyPI unreachable: {ri.index_unreachable()}")
    python = ri.python312()
    if python is None:
        pytest.skip("no CPython 3.12 here (set RIG_SANDBOX_PYTHON)")
    r = ri.check(ri.Combo("official with CuPy 14", "3.12", (".[official]", "cupy-cuda13x>=14")), python)
    if r.status == "skipped":
        pytest.skip(r.detail)
    assert r.status == "conflict", r.line()
    assert "numpy<2" in r.detail and ">=2.0" in r.detail, r.detail


def test_without_pypi_every_line_skips_saying_why_and_ci_goes_on():
    r = subprocess.run([sys.executable, str(SCRIPT), "--only", "NGC"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple"})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("skipped") and "PyPI unreachable: http://127.0.0.1:9/simple"
                                   in line for line in lines), r.stdout


def test_a_conflict_or_a_broken_check_fails_the_run_and_a_skip_does_not(ri, monkeypatch, capsys):
    monkeypatch.setattr(ri, "index_unreachable", lambda: None)
    for status, code in (("resolves", 0), ("skipped", 0), ("conflict", 1), ("error", 1)):
        monkeypatch.setattr(ri, "check", lambda c, py, s=status: ri.Result(c, s, "why"))
        assert ri.main(["--only", "host: the quick start"]) == code, status
        assert capsys.readouterr().out.splitlines()[-1].startswith(f"{status:<9} host: the quick start: ")

"""The official engine over cores built here from source (``rig runtime build``), in the sandbox:
server#8755's own case, ``retained-response`` through the official API on 2.67.0, and (where it is
built) 2.70.0 with the PyPI bindings of its own version. A core not built for Python 3.12 here is
skipped with the command that builds it; .ci/run builds 2.67.0's stub for the sandbox's Python.
"""

from __future__ import annotations

import pytest

from helpers import cycles, rig
from test_official_engine import ENGINE, official


def _built(version: str):
    from rig.parent import runtime
    from rig.common.errors import RigError

    try:
        return runtime.resolve(version, auto_install=False)
    except RigError as e:
        pytest.skip(f"{e} (with the sandbox's Python 3.12: --python PATH)")


@official
def test_seed_case_on_its_own_version_through_the_official_api(tmp_path):
    """server#8755 as reported: 2.67.0, the official API, the last response kept → stop() waits
    out exit_timeout and finalize never runs before it; its control (nothing kept) is clean."""
    _built("2.67.0")
    res = tmp_path / "r"
    p = rig("soak", *ENGINE, "--runtime", "2.67.0", "--scenario", "retained-response", "--cycles", "2",
            "--exit-timeout", "3", "--allow-outcomes", "exit_timeout", "--results", str(res), timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    c = cycles(res)
    assert list(c.outcome) == ["exit_timeout"] * 2 and set(c.engine) == {"tritonserver"}
    assert set(c.triton_version) == {"2.67.0"}
    assert (c.finalize_before_stop == 0).all()
    res = tmp_path / "c"
    p = rig("soak", *ENGINE, "--runtime", "2.67.0", "--scenario", "retained-response", "--control",
            "--cycles", "2", "--exit-timeout", "3", "--results", str(res), timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert list(cycles(res).outcome) == ["clean"] * 2


@official
def test_the_bindings_of_the_cores_own_version(tmp_path):
    rt = _built("2.70.0")
    if not rt.bindings:
        pytest.skip("built-2.70.0 has no bindings of its own beside it (PyPI's tritonserver 2.70.0 for cp312)")
    res = tmp_path / "r"
    p = rig("soak", *ENGINE, "--runtime", "2.70.0", "--cycles", "2", "--allow-outcomes", "clean,aborted_at_exit",
            "--results", str(res), timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "tritonserver 2.70.0 over" in p.stdout  # the engine's reason names the bindings it loaded
    c = cycles(res)
    # from 2.68.0 every stub aborts at exit, after its finalize (docs/measurements/conformance.md):
    # the table's verdict for a plain soak on this core
    assert list(c.outcome) == ["aborted_at_exit"] * 2 and set(c.triton_version) == {"2.70.0"}
    assert (c.finalize_before_stop == 1).all() and (c.stop_latency_s < 3).all()

"""End to end on the real core: one lifecycle cycle per retention policy, via the CLI."""

from __future__ import annotations

import os

import pytest

from helpers import cycles, rig, spawn


@pytest.mark.slow
def test_retain_none_is_clean(tmp_path, runtime):
    res = tmp_path / "results"
    exit_timeout, startup_timeout = 5, 120
    p = rig("cycle", "--engine", "capi", "--model", "numpy", "--retain", "none", "--exit-timeout", str(exit_timeout),
            "--startup-timeout", str(startup_timeout), "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "cycle 1: clean" in p.stdout
    df = cycles(res)
    assert len(df) == 1
    r = df.iloc[0]
    assert r.outcome == "clean"
    assert r.engine == "capi" and r.model == "numpy" and r.retain == "none"
    assert r.finalize_expected == 1
    assert r.finalize_before_stop == 1 and r.finalize_after_stop == 0
    assert r.stubs_alive_after_stop == 0 and r.stubs_killed == 0
    assert r.shm_regions_leaked == 0
    assert 0 < r.start_latency_s < startup_timeout
    assert 0 < r.stop_latency_s < exit_timeout, "nothing held the model: the stop did not wait out the exit timeout"
    assert str(r.triton_version) == runtime.triton_version
    # the backend's regions are named for the worker: servers side by side never share a name
    log = next(res.glob("_work/*/logs/triton-c000001.log")).read_text()
    assert f'"shm-region-prefix-name":"triton_python_backend_shm_region_rig{r.worker_pid}_"' in log
    for col in ("run_id", "cycle", "triton_version", "engine", "model", "retain", "outcome",
                "start_latency_s", "stop_latency_s", "finalize_expected", "finalize_before_stop",
                "finalize_after_stop", "stubs_alive_after_stop"):
        assert col in df.columns


@pytest.mark.slow
def test_retain_last_response_waits_out_exit_timeout(tmp_path, runtime):
    """The mechanism of server#8755: a referenced response keeps its model loaded."""
    res = tmp_path / "results"
    exit_timeout = 3
    p = rig("cycle", "--engine", "capi", "--retain", "last-response", "--exit-timeout", str(exit_timeout),
            "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr  # a cycle records and reports; soaks judge
    r = cycles(res).iloc[0]
    assert r.outcome == "exit_timeout"
    # the stop waits the exit timeout out (Triton counts it in whole seconds), and then ends
    assert 0.95 * exit_timeout <= r.stop_latency_s < 2 * exit_timeout
    assert r.finalize_before_stop == 0
    assert r.finalize_after_stop == 1          # once the response is dropped, finalize runs
    assert r.stubs_alive_after_stop == 1
    assert "Exit timeout expired" in r.stop_error
    assert r.cleanup == "ok"


@pytest.mark.slow
def test_retain_last_array_waits_out_exit_timeout(tmp_path, runtime):
    res = tmp_path / "results"
    p = rig("cycle", "--engine", "capi", "--retain", "last-array", "--exit-timeout", "2",
            "--allow-outcomes", "clean", "--results", str(res))
    assert p.returncode == 1, p.stdout + p.stderr  # thresholds given: the cycle is judged
    assert "FAIL: outcomes not allowed: exit_timeout=1" in p.stdout
    r = cycles(res).iloc[0]
    assert r.outcome == "exit_timeout" and r.finalize_before_stop == 0


@pytest.mark.parametrize("args, words", [
    (["cycle", "--model-repository", "/nonexistent/repo"], "does not exist"),
    (["cycle", "--engine", "warp"], "invalid choice"),
    (["cycle", "--runtime", "0.0.1"], "not installed"),
    (["cycle", "--bogus"], "unrecognized arguments"),
    (["soak", "--config", "/nonexistent.toml"], "does not exist"),
    (["soak", "--config", "tests/data/malformed.toml"], "not valid TOML"),
    (["soak", "--config", "tests/data/unknown_key.toml"], "unknown key 'cycels'"),
    (["soak", "--allow-outcomes", "fine"], "unknown outcome"),
])
def test_bad_input_is_one_clear_line(args, words, tmp_path):
    p = rig(*args, "--results", str(tmp_path))
    assert p.returncode == 2
    lines = [line for line in p.stderr.strip().splitlines() if line]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("rig: error:") and words in lines[0]
    assert "Traceback" not in p.stderr + p.stdout


@pytest.mark.slow
def test_wrong_outputs_are_caught(tmp_path, runtime):
    """Positive control of the output check: numpy 2 in the stubs of a numpy-1 core returns every
    output empty, silently. The rig must say so (it gives stubs numpy<2 unless told not to)."""
    import numpy

    if int(numpy.__version__.split(".")[0]) < 2:
        pytest.skip(f"numpy {numpy.__version__} here: the stubs get numpy 1 anyway")
    res = tmp_path / "r"
    p = rig("cycle", "--results", str(res), env={"RIG_STUB_NUMPY": "as-is"})
    r = cycles(res).iloc[0]
    assert r.load_outcome == "wrong_outputs" and not bool(r.outputs_ok)
    assert "wrong outputs" in r.detail, r.detail
    assert p.returncode == 0
    assert "| load wrong_outputs |" in p.stdout


@pytest.mark.slow
def test_outputs_are_checked_when_clean(tmp_path, runtime):
    res = tmp_path / "r"
    assert rig("cycle", "--model-size", "8", "--results", str(res)).returncode == 0
    assert bool(cycles(res).iloc[0].outputs_ok) is True


@pytest.mark.slow
def test_cupy_model_runs_on_a_gpu_or_skips_with_a_reason(tmp_path):
    from rig.parent.preflight import cupy_usable

    ok, why = cupy_usable()
    res = tmp_path / "r"
    p = rig("cycle", "--model", "cupy", "--results", str(res))
    if not ok:
        print(f"cupy not usable here: {why}")
        # nothing ran: not a success unless the caller says a skip is one
        assert p.returncode == 3 and "skipped" in p.stdout and why in p.stdout
        assert not (res / "cycles").exists()
        p = rig("soak", "--model", "cupy", "--skip-ok", "--results", str(res))
        assert p.returncode == 0 and "skipped" in p.stdout
    else:
        assert p.returncode == 0, p.stdout + p.stderr
        r = cycles(res).iloc[0]
        assert r.outcome == "clean" and bool(r.outputs_ok)


@pytest.mark.slow
def test_two_runs_into_one_folder_do_not_collide(tmp_path, runtime):
    res = tmp_path / "shared"
    procs = [spawn("soak", "--cycles", "2", "--results", str(res)) for _ in range(2)]
    assert [p.wait(300) for p in procs] == [0, 0]
    df = cycles(res)
    assert len(df) == 4 and df.run_id.nunique() == 2
    for _, g in df.groupby("run_id"):
        assert sorted(g.cycle) == [1, 2]


@pytest.mark.slow
def test_runtime_install_and_list(runtime):
    version = runtime.name.split("-", 1)[1]
    p = rig("runtime", "install", version)  # installed already: nothing is downloaded
    assert p.returncode == 0 and f"installed Triton {runtime.triton_version} ({runtime.name}: " in p.stdout
    assert rig("--version").stdout.strip()[0].isdigit()
    p = rig("runtime", "list")
    assert p.returncode == 0 and runtime.name in p.stdout and runtime.triton_version in p.stdout
    # `rig doctor`: tests/commands/test_cli.py checks each of its lines


@pytest.mark.slow
def test_a_worker_can_be_rerun_by_hand_from_its_spec(tmp_path, runtime):
    """pyperf's habit: the worker is the same program with a flag; its spec reproduces a cycle."""
    import json

    from rig.contract import messages as protocol

    res = tmp_path / "r"
    assert rig("cycle", "--results", str(res)).returncode == 0
    spec = next((res / "_work").rglob("spec-0001.json"))
    # as a person types it in a plain shell: no LD_LIBRARY_PATH, RIG_STUB_SITE or venv on PATH
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin"}
    p = rig("worker", "--spec", str(spec), env=env, inherit_env=False, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    messages = [m for m in map(protocol.decode, p.stdout.splitlines()) if m is not None]
    assert [type(m) for m in messages[:2]] == [protocol.CycleStart, protocol.Phase]
    phases = [m.phase for m in messages if isinstance(m, protocol.Phase)]
    assert phases == ["start", "infer", "stop", "release", "cleanup"]
    partial = next(m for m in messages if isinstance(m, protocol.Partial))
    assert partial.row["outcome"] == "clean" and partial.shm_regions  # the stub's regions, by name
    assert all(r.startswith("triton_python_backend_shm_region") for r in partial.shm_regions)
    done = messages[-1]
    assert isinstance(done, protocol.CycleDone) and done.row["cycle"] == 1
    assert done.row["outcome"] == "clean" and done.row["outputs_ok"] is True
    assert done.triton_version == json.loads(spec.read_text())["runtime"]["triton_version"]  # the core's word


@pytest.mark.slow
def test_paths_with_spaces_work(tmp_path, runtime):
    """The stub aborts on a model path with a space; the rig serves it through a link instead of
    waiting out the startup deadline and storing `hung`."""
    res = tmp_path / "results with space"
    p = rig("cycle", "--results", str(res), "--startup-timeout", "30")
    assert p.returncode == 0, p.stdout + p.stderr
    assert cycles(res).outcome.iloc[0] == "clean"
    repo = tmp_path / "my models"
    from rig.parent import repository

    repository.render(repository.ModelSpec(), repo)
    p = rig("cycle", "--model-repository", str(repo), "--results", str(res), "--startup-timeout", "30")
    assert p.returncode == 0 and "served through" in p.stdout, p.stdout + p.stderr

"""Soaks end to end on the real core: many cycles, restart modes, faults, kill -9 and resume."""

from __future__ import annotations

import signal
import subprocess
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers import cycles, rig, spawn

pytestmark = pytest.mark.slow  # every test runs real cycles on the embedded core


def test_twenty_clean_cycles_same_process_no_leaks(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("soak", "--cycles", "20", "--restart", "same-process", "--requests", "50",
            "--exit-timeout", "5", "--results", str(res), timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    df = cycles(res).sort_values("cycle")
    assert list(df.cycle) == list(range(1, 21))
    assert set(df.outcome) == {"clean"}
    assert (df.finalize_before_stop == df.finalize_expected).all()
    assert (df.stubs_killed == 0).all() and (df.shm_regions_leaked == 0).all()
    assert df.worker_pid.nunique() == 1  # one long-lived worker
    # RSS of the long-lived worker: no upward slope beyond noise (bytes per cycle).
    rss = df.worker_rss_bytes.to_numpy(dtype=float)
    slope = np.polyfit(np.arange(len(rss))[5:], rss[5:], 1)[0]
    print(f"worker RSS slope over cycles 6-20: {slope / 1024:.1f} KiB/cycle")
    assert slope < 512 * 1024
    assert "finalize      100.0% before stop returned" in p.stdout


def test_retained_response_every_cycle_times_out_and_run_completes(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("soak", "--cycles", "4", "--retain", "last-response", "--exit-timeout", "1",
            "--results", str(res), timeout=600)
    assert p.returncode == 1  # exit_timeout is not allowed by default: the nightly job fails
    assert "FAIL: outcomes not allowed: exit_timeout=4" in p.stdout
    df = cycles(res)
    assert len(df) == 4 and set(df.outcome) == {"exit_timeout"}
    assert df.finalize_before_stop.sum() == 0
    assert "finalize      0.0% before stop returned" in p.stdout


@pytest.mark.parametrize("fault, outcome", [
    ("finalize-raises", "finalize_error"),
    ("finalize-sleeps", "exit_timeout"),
    ("stub-exits", "exit_timeout"),  # its requests failed (the load's verdict), and the dead stub's model stayed loaded
    ("load-fails", "load_failed"),
    ("load-hangs", "hung"),
])
def test_fault_models_yield_their_outcome(tmp_path, runtime, fault, outcome):
    res = tmp_path / "r"
    # finalize-raises stops as a clean one does (up to 2 s of polls): its timeout leaves room for a busy machine
    wait = "5" if fault == "finalize-raises" else "2"
    p = rig("soak", "--cycles", "2", "--fault", fault, "--exit-timeout", wait, "--request-timeout", "5",
            "--startup-timeout", "2", "--results", str(res), timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr  # not clean: the run fails its thresholds
    df = cycles(res)
    assert len(df) == 2, p.stdout
    assert set(df.outcome) == {outcome}, df[["outcome", "detail"]].to_string()
    load = {"stub-exits": "errors", "load-fails": "not_measured", "load-hangs": "not_measured"}.get(fault, "ok")
    assert set(df.load_outcome) == {load}, df[["load_outcome", "detail"]].to_string()
    if fault == "load-hangs":  # the watchdog killed the worker group, stub included
        assert df.detail.str.contains("phase start ran past its deadline").all()
        assert (df.stubs_killed >= 1).all()
    if fault == "finalize-raises":
        assert (df.finalize_errors == 1).all()
    if fault == "finalize-sleeps":
        # finalize never finished; the stub stuck in it was killed (by the backend or the rig)
        assert (df.finalize_before_stop == 0).all() and (df.finalize_after_stop == 0).all()


def test_leaking_model_shows_in_stub_rss(tmp_path, runtime):
    base = tmp_path / "base"
    leak = tmp_path / "leak"
    assert rig("cycle", "--requests", "200", "--results", str(base)).returncode == 0
    p = rig("cycle", "--requests", "200", "--fault", "leaks-memory", "--results", str(leak))
    assert p.returncode == 0, p.stdout + p.stderr
    grown = cycles(leak).stub_rss_bytes[0] - cycles(base).stub_rss_bytes[0]
    assert grown > 150 * 2**20, grown  # 200 requests x 1 MiB kept by the stub


def test_unload_then_stop_beats_plain_stop(tmp_path, runtime):
    res = tmp_path / "r"
    for strategy in ("stop", "unload-then-stop"):
        p = rig("soak", "--cycles", "2", "--stop-strategy", strategy, "--results", str(res))
        assert p.returncode == 0, p.stdout + p.stderr
    df = cycles(res)
    med = df.groupby("stop_strategy").stop_latency_s.median()
    assert med["unload-then-stop"] < med["stop"]
    assert (df.finalize_before_stop == 1).all()


def test_thresholds_set_the_exit_status(tmp_path, runtime):
    p = rig("soak", "--cycles", "1", "--max-stop-latency", "0.5", "--results", str(tmp_path))
    assert p.returncode == 1
    assert "FAIL: max stop latency" in p.stdout


def test_kill_9_then_resume(tmp_path, runtime):
    res = tmp_path / "r"
    # a clean stop waits out Triton's one-second polls (2.001 s here): a 2 s timeout is a coin toss on a busy CI
    proc = spawn("soak", "--cycles", "6", "--exit-timeout", "5", "--results", str(res))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if len(list((res / "cycles").rglob("*.parquet"))) >= 2 if (res / "cycles").exists() else False:
            break
        time.sleep(0.1)
    time.sleep(0.7)  # well inside the next cycle
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the kill landed before the run ended"
    time.sleep(1.0)  # the worker follows its parent (PR_SET_PDEATHSIG)
    visible = [f for f in res.rglob("*.parquet")]
    for f in visible:
        pq.read_table(f)  # every visible file is whole
    before = cycles(res)
    assert len(before) >= 2 and sorted(before.cycle) == list(range(1, len(before) + 1))
    run_id = pd.read_parquet(res / "runs").run_id[0]
    from rig.common import probes

    work = str(res / "_work" / run_id)
    p = rig("soak", "--resume", run_id, "--results", str(res), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"resuming: {len(before)} cycle(s) stored, {6 - len(before)} to go" in p.stdout + p.stderr
    after = cycles(res)
    assert sorted(after.cycle) == [1, 2, 3, 4, 5, 6]  # each cycle once
    assert set(after.run_id) == {run_id}
    assert set(after.outcome) == {"clean"}
    # the worker died with its parent, its stubs maybe not: none may be left after the resume
    assert not probes.orphaned_stubs(work), "the resumed run left the killed run's stubs running"


MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * 2).astype(np.int32))]))
        return out
'''
CONFIG = '''
name: "doubler"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_INT32 dims: [ -1, 3 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ -1, 3 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
'''


def test_users_own_repository_without_finalize(tmp_path, runtime):
    """A model that is not ours, with no initialize/finalize: inputs from metadata, evidence by hook."""
    repo = tmp_path / "repo"
    (repo / "doubler" / "1").mkdir(parents=True)
    (repo / "doubler" / "config.pbtxt").write_text(CONFIG)
    (repo / "doubler" / "1" / "model.py").write_text(MODEL)
    before = {p: p.read_text() for p in repo.rglob("*") if p.is_file()}
    res = tmp_path / "r"
    p = rig("soak", "--cycles", "2", "--model-repository", str(repo), "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    df = cycles(res)
    assert set(df.outcome) == {"clean"}
    assert (df.finalize_expected == 2).all() and (df.finalize_before_stop == 2).all()
    assert (df.errors == 0).all() and (df.requests == 100).all()
    after = {p: p.read_text() for p in repo.rglob("*") if p.is_file() and "__pycache__" not in str(p)}
    assert after == before  # the user's files are untouched


def test_worker_killed_by_a_signal_is_recorded_and_the_run_goes_on(tmp_path, runtime):
    import psutil

    res = tmp_path / "r"
    proc = spawn("soak", "--cycles", "2", "--requests", "20000", "--results", str(res),
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        for child in psutil.Process(proc.pid).children():
            try:
                if "worker" in " ".join(child.cmdline()) and child.children():
                    victim = child  # a worker whose stub is up: the server is running
            except psutil.NoSuchProcess:  # a child that ended meanwhile
                continue
        time.sleep(0.2)
    assert victim is not None
    time.sleep(1.0)
    # A stub notices its server's death on its own, in time, and exits: stopped (SIGSTOP), it
    # cannot, so only the rig's reaping can end it (a busy CI machine once let it go first).
    stubs = victim.children(recursive=True)
    for stub in stubs:
        stub.send_signal(signal.SIGSTOP)
    victim.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    df = cycles(res).sort_values("cycle")
    assert list(df.outcome) == ["crashed", "clean"], out
    assert "SIGKILL" in df.detail.iloc[0]
    assert stubs and df.stubs_killed.iloc[0] >= 1  # its orphaned stub was found and killed
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in stubs)


def test_unload_then_stop_with_a_retained_response_shows_the_same_bug(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("cycle", "--stop-strategy", "unload-then-stop", "--retain", "last-response", "--exit-timeout", "2",
            "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(res).iloc[0]
    assert r.outcome == "exit_timeout" and r.finalize_before_stop == 0
    assert "UNLOADING" in r.stop_error  # the model never finished unloading


def test_a_model_without_config_pbtxt_completes_its_own(tmp_path, runtime):
    """tritonserver's default: a Python model may fill its config in auto_complete_config."""
    repo = tmp_path / "repo"
    (repo / "auto" / "1").mkdir(parents=True)
    (repo / "auto" / "1" / "model.py").write_text(
        "import triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    @staticmethod\n"
        "    def auto_complete_config(config):\n"
        "        config.add_input({'name': 'IN', 'data_type': 'TYPE_INT32', 'dims': [3]})\n"
        "        config.add_output({'name': 'OUT', 'data_type': 'TYPE_INT32', 'dims': [3]})\n"
        "        config.set_max_batch_size(0)\n"
        "        return config\n\n"
        "    def execute(self, requests):\n"
        "        return [pb_utils.InferenceResponse([pb_utils.Tensor(\n"
        "            'OUT', pb_utils.get_input_tensor_by_name(r, 'IN').as_numpy() + 1)]) for r in requests]\n")
    res = tmp_path / "r"
    p = rig("cycle", "--model-repository", str(repo), "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    r = cycles(res).iloc[0]
    assert r.outcome == "clean" and r.errors == 0 and r.finalize_before_stop == 1


def test_runs_record_the_versions_of_the_packages_that_shape_a_figure(tmp_path, runtime):
    """Schema 8: the run's row says which locust, numpy (the worker's and the stubs'), pyarrow and
    tritonserver bindings made its figures; each compared with what is installed here."""
    import importlib.metadata as md
    import re
    import sys

    def stub_numpy() -> str:  # what an import in a stub finds: the runtime's numpy-1 folder first
        code = "import sys; sys.path[:0] = sys.argv[1:]; import numpy; print(numpy.__version__)"
        return subprocess.run([sys.executable, "-c", code, *([runtime.stub_site] if runtime.stub_site else [])],
                              capture_output=True, text=True, check=True).stdout.strip()

    res = tmp_path / "r"
    p = rig("cycle", "--workload", "steady", "--users", "1", "--workload-seconds", "1", "--results", str(res))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    q = rig("cycle", "--requests", "5", "--results", str(res))  # no Locust load: no locust version
    assert q.returncode == 0, q.stdout[-2000:] + q.stderr[-2000:]
    runs = pd.read_parquet(res / "runs").set_index("run_id")
    loaded, plain = (runs.loc[re.search(r"^run (\S+):", out.stdout, re.M).group(1)].to_dict() for out in (p, q))
    for row in (loaded, plain):
        assert row["schema_version"] >= 8 and row["engine"] == "capi"
        assert row["numpy_version"] == md.version("numpy")
        assert row["pyarrow_version"] == md.version("pyarrow")
        assert row["stub_numpy_version"] == stub_numpy()
        assert pd.isna(row["tritonserver_version"]), "the bindings count with --engine tritonserver only"
    assert loaded["locust_version"] == md.version("locust") and pd.isna(plain["locust_version"])
    if runtime.stub_site:  # the embedded core's stubs run numpy 1 whatever the worker has
        assert loaded["stub_numpy_version"].startswith("1.")

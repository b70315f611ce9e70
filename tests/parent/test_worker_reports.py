"""What the parent makes of fake workers (``fake_workers``) that report: the rows it completes,
types and stores, one worker per cycle or one for all, and its own bookkeeping."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from fake_workers import gone, prepared, run, stub_pid
from rig.parent import orchestrator
from rig.contract.spec import CycleSpec
from rig.contract.verdicts import OUTCOMES
from rig.parent.orchestrator import rows as parent_rows
from rig.contract.rows import CycleRow, WindowRow
from rig.contract.messages import Partial


# ---------------------------------------------------------------- workers that report

def test_reported_cycles_are_stored_as_reported_one_fresh_worker_each(tmp_path):
    p = prepared(tmp_path, '''
        for k in CYCLES:
            start(k)
            phase("infer", 30)
            send(Window({"cycle": k, "window": 1, "throughput": 100.0 * k}))
            send(CycleDone(row(k, throughput=1234.5, detail=f"spec cycles {CYCLES}")))
    ''', cycles=3, retain="last-response")
    r = run(p, [1, 2, 3])
    assert [row.cycle for row in r.rows] == [1, 2, 3]
    assert all(isinstance(row, CycleRow) and row.outcome == "clean" for row in r.rows)
    assert len({row.worker_pid for row in r.rows}) == 3, "fresh-process: one worker per cycle"
    assert [row.detail for row in r.rows] == ["spec cycles [1]", "spec cycles [2]", "spec cycles [3]"]
    assert r.phases == [(1, "infer"), (2, "infer"), (3, "infer")]
    assert [w.throughput for w in r.windows] == [100.0, 200.0, 300.0]  # each window as it closes
    # each cycle's result carries its own windows, typed, with the run's tags
    assert [[(w.cycle, w.throughput, w.run_id, w.engine) for w in res.windows] for res in r.results] == \
        [[(1, 100.0, "run1", "capi")], [(2, 200.0, "run1", "capi")], [(3, 300.0, "run1", "capi")]]
    assert all(isinstance(w, WindowRow) for res in r.results for w in res.windows)
    for res in r.results:
        orchestrator.record(p, res)
    stored = p.store.read("windows", "run1").sort_values("cycle")
    assert list(stored.throughput) == [100.0, 200.0, 300.0]
    first = r.rows[0]
    # what the parent adds: the run's tags, the wall time, the rig's overhead
    assert (first.run_id, first.engine, first.model, first.retain, first.restart) == \
        ("run1", "capi", "m", "last-response", "fresh-process")
    assert first.cycle_wall_s > 0
    assert first.overhead_s == pytest.approx(first.cycle_wall_s - 0.25 - 0.5 - 0.125)
    assert first.throughput == 1234.5 and first.stubs_killed == 0
    # each worker had its own spec, a valid CycleSpec, and its own log
    for i in (1, 2, 3):
        spec = CycleSpec.read(p.work_dir / f"spec-{i:04d}.json")
        assert spec.cycles == (i,) and spec.run_id == "run1" and spec.exit_timeout == 1
        assert spec.retain == "last-response" and spec.evidence_dir == str(p.work_dir / "evidence")
        assert (p.work_dir / "logs" / f"worker-{i:04d}.log").exists()
    assert r.seconds < 30, "no cycle waited out its phase's 30 s deadline"


def test_same_process_runs_every_cycle_in_one_worker(tmp_path):
    p = prepared(tmp_path, '''
        for k in CYCLES:
            report(k)
    ''', restart="same-process", cycles=3)
    r = run(p, [1, 2, 3])
    assert [row.outcome for row in r.rows] == ["clean"] * 3
    assert len({row.worker_pid for row in r.rows}) == 1
    assert json.loads((p.work_dir / "spec-0001.json").read_text())["cycles"] == [1, 2, 3]
    assert not (p.work_dir / "spec-0002.json").exists()


def test_a_stub_left_behind_by_a_finished_worker_is_killed_and_counted(tmp_path):
    p = prepared(tmp_path, '''
        fake_stub()
        report(CYCLES[0], stubs_killed=2)
    ''')
    r = run(p, [1])
    assert r.rows[0].outcome == "clean"
    assert r.rows[0].stubs_killed == 3, "the worker's own 2, plus the one the parent reaped"
    assert gone(stub_pid(p, 1))


def test_the_worker_finds_this_rig_first_on_its_path(tmp_path):
    p = prepared(tmp_path, '''
        report(CYCLES[0], detail=os.environ["PYTHONPATH"].split(os.pathsep)[0])
    ''')
    (row,) = run(p, [1]).rows
    assert row.detail == str(Path(orchestrator.__file__).resolve().parents[3])  # rig/parent/orchestrator -> the checkout


def test_the_core_reporting_another_version_is_noted(tmp_path):
    p = prepared(tmp_path, '''
        report(CYCLES[0], triton_version="2.99.0", detail="first note")
    ''')
    (row,) = run(p, [1]).rows
    assert row.detail == "first note; the core reports Triton 2.99.0; results are filed under 2.51.0"


# ---------------------------------------------------------------- the stored rows

def test_every_outcome_is_stored_as_soon_as_known(tmp_path):
    p = prepared(tmp_path, '''
        k = CYCLES[0]
        start(k)
        if k == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if k == 2:
            phase("start", 0.3)
            time.sleep(600)
        report(k, stop_error=None)
    ''', cycles=3)
    seen = []

    def on_cycle(result):
        orchestrator.record(p, result)
        seen.append(sorted(p.store.cycles_done("run1")))

    run(p, [1, 2, 3], on_cycle=on_cycle)
    assert seen == [[1], [1, 2], [1, 2, 3]], "each row is on disk before the next cycle starts"
    df = p.store.read("cycles", "run1").sort_values("cycle")
    assert list(df.outcome) == ["crashed", "hung", "clean"]
    assert set(df.outcome) <= set(OUTCOMES)
    assert set(df.triton_version) == {"2.51.0"}


# ---------------------------------------------------------------- the parent's bookkeeping

def _p(tmp_path):
    return prepared(tmp_path, "")


def test_finish_row_types_and_truncates(tmp_path):
    p = _p(tmp_path)
    row = parent_rows.blank_row(p, 4)
    row.update(outcome="stop_error", stubs_killed=2.0, requests=10.0, detail="x" * 5000, stop_error=RuntimeError("e"),
               start_latency_s=1, stop_latency_s=None, workload_s=2, outputs_ok=1)
    with pytest.raises(KeyError):  # a typed record from the start: no field but the row's
        row.update(not_a_field="refused")
    done = parent_rows.finish_row(p, row, 10.0)
    assert done.stubs_killed == 2 and type(done.stubs_killed) is int and type(done.requests) is int
    assert type(done.start_latency_s) is float and type(done.workload_s) is float and done.outputs_ok is True
    assert len(done.detail) == 2000 and done.stop_error == "e"
    assert done.overhead_s == pytest.approx(7.0)  # a missing stop latency counts as 0
    assert done.cycle_wall_s == 10.0 and done.engine == "capi" and done.cycle == 4
    assert parent_rows.finish_row(p, parent_rows.blank_row(p, 5), None).overhead_s is None


def test_lost_cycle_without_and_with_a_partial_row(tmp_path):
    p = _p(tmp_path)
    lost = parent_rows.lost_cycle(p, 3, None, parent_rows.Loss("hung", "hung", "phase x", stubs=2, leaked=1, pid=77))
    assert (lost["outcome"], lost["cleanup"], lost["detail"]) == ("hung", None, "phase x")
    assert (lost["stubs_killed"], lost["shm_regions_leaked"], lost["worker_pid"]) == (2, 1, 77)
    partial = Partial({"cycle": 3, "outcome": "clean", "stubs_killed": 1, "shm_regions_leaked": None,
                       "stop_latency_s": 0.5, "unknown_key": 1}, ("triton_python_backend_shm_region_gone",))
    kept = parent_rows.lost_cycle(p, 3, partial, parent_rows.Loss("crashed", "crashed: exit status 1", "why", 2, 0, 78))
    assert (kept["outcome"], kept["cleanup"], kept["detail"]) == ("clean", "crashed: exit status 1", "why")
    assert kept["stubs_killed"] == 3 and kept["shm_regions_leaked"] == 0 and kept["stop_latency_s"] == 0.5
    assert "unknown_key" not in kept
    assert set(kept) == {f.name for f in dataclasses.fields(CycleRow)}


def test_default_worker_command_is_the_rigs_own(tmp_path):
    p = dataclasses.replace(_p(tmp_path), worker_argv=None)
    p.work_dir.joinpath("logs").mkdir(parents=True, exist_ok=True)
    # the real worker's command line (killed at once: this fake runtime could not load a core)
    w = orchestrator.WorkerHandle(p, [1], 1)
    try:
        # -P: the working folder is not put first on the worker's module path
        assert w.proc.args[:5] == [sys.executable, "-P", "-m", "rig", "worker"]
        assert w.proc.args[5:7] == ["--spec", str(p.work_dir.resolve() / "spec-0001.json")]
        assert os.getpgid(w.proc.pid) == w.pgid == w.proc.pid, "a process group of its own"
    finally:
        w.kill()
        w.close()

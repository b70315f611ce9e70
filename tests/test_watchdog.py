"""The parent's watchdog (rig.orchestrator.run_cycles / WorkerHandle) on fake workers.

Each fake worker is a small Python file run in place of ``python -m rig worker`` (through
``Prepared.worker_argv``), with the same arguments (``--spec FILE --result-fd N``) and the same
protocol: ``rig.protocol``'s messages, one JSON line each on the result pipe. No Triton core is started: what is tested is what the
parent makes of a worker that reports, hangs, dies or talks nonsense, and that the run goes on.
Deadlines are announced by the fakes (a ``phase`` message) or set by the config, and kept short.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import textwrap
import time
import types
from pathlib import Path

import psutil
import pytest

from rig import orchestrator
from rig.config import RunConfig
from rig.cycle import OUTCOMES, CycleSpec
from rig.orchestrator import rows as parent_rows
from rig.runtime import Runtime
from rig.store import Store
from rig.protocol import CycleRow, Partial, WindowRow

# What every fake worker starts with: its arguments, its spec, the result pipe, and a way to
# leave a process the probes take for a backend stub (argv[0] is the stub's name) in its group.
PREAMBLE = f'''
import json, os, signal, subprocess, sys, time
from rig.protocol import CycleDone, CycleStart, Fatal, Partial, Phase, Window
_args = sys.argv[1:]
SPEC_PATH = _args[_args.index("--spec") + 1]
SPEC = json.load(open(SPEC_PATH))
CYCLES = SPEC["cycles"]
WORK = os.path.dirname(SPEC_PATH)
_out = os.fdopen(int(_args[_args.index("--result-fd") + 1]), "w", buffering=1)


def send(msg):
    _out.write(msg.encode() + "\\n")
    _out.flush()


def raw(text):
    _out.write(text)
    _out.flush()


def row(cycle, **kw):
    r = {{"cycle": cycle, "outcome": "clean", "worker_pid": os.getpid(), "start_latency_s": 0.25,
          "stop_latency_s": 0.5, "workload_s": 0.125, "finalize_expected": 1,
          "finalize_before_stop": 1, "finalize_after_stop": 0, "stubs_alive_after_stop": 0,
          "stubs_killed": 0, "shm_regions_leaked": 0, "cleanup": "ok"}}
    r.update(kw)
    return r


def start(cycle):
    send(CycleStart(cycle, time.monotonic()))


def phase(name, timeout_s):
    send(Phase(name, timeout_s, time.monotonic()))


def report(cycle, triton_version=None, **kw):
    start(cycle)
    phase("start", 30)
    phase("stop", 30)
    send(CycleDone(row(cycle, **kw), triton_version))


def fake_stub():
    p = subprocess.Popen(["triton_python_backend_stub", "300"], executable={shutil.which("sleep")!r})
    with open(os.path.join(WORK, f"stub-{{CYCLES[0]}}.pid"), "w") as f:
        f.write(str(p.pid))
    return p
'''


def prepared(tmp_path, body: str, **cfg) -> orchestrator.Prepared:
    """A run whose workers are ``body`` (after PREAMBLE); nothing resolved, nothing installed."""
    script = tmp_path / "fake_worker.py"
    script.write_text(PREAMBLE + textwrap.dedent(body))
    cfg.setdefault("startup_timeout", 5.0)
    config = RunConfig(exit_timeout=1, results=str(tmp_path / "results"), **cfg)
    rt = Runtime(name="embedded-test", kind="embedded", triton_version="2.51.0", server_dir=str(tmp_path),
                 core_library=str(tmp_path / "libtritonserver.so"), backend_dir=str(tmp_path / "backends"))
    work = tmp_path / "results" / "_work" / "run1"
    work.mkdir(parents=True)
    return orchestrator.Prepared(run_id="run1", config=config, runtime=rt, engine="capi", engine_reason="test",
                                 repository=tmp_path / "repo", models=["m"], model_label="m", work_dir=work,
                                 store=Store(tmp_path / "results"), worker_argv=[sys.executable, str(script)])


def run(p: orchestrator.Prepared, cycles: list[int], **kw) -> types.SimpleNamespace:
    rows, windows, phases, results = [], [], [], []

    def keep(result):
        results.append(result)
        rows.append(result.row)

    t0 = time.monotonic()
    orchestrator.run_cycles(p, cycles, kw.pop("on_cycle", keep),
                            on_window=windows.append,
                            on_phase=kw.pop("on_phase", lambda c, ph: phases.append((c, ph))))
    return types.SimpleNamespace(rows=rows, windows=windows, phases=phases, results=results,
                                 seconds=time.monotonic() - t0,
                                 by_cycle={r.cycle: r for r in rows})


def gone(pid: int, within: float = 3.0) -> bool:
    """The process is dead (a zombie counts: nothing runs), waiting a little for the kill to land."""
    deadline = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def stub_pid(p: orchestrator.Prepared, cycle: int) -> int:
    return int((p.work_dir / f"stub-{cycle}.pid").read_text())


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
        spec = CycleSpec(**json.loads((p.work_dir / f"spec-{i:04d}.json").read_text()))
        assert spec.cycles == [i] and spec.run_id == "run1" and spec.exit_timeout == 1
        assert spec.retain == "last-response" and spec.evidence_dir == str(p.work_dir / "evidence")
        assert (p.work_dir / "logs" / f"worker-{i:04d}.log").exists()
    assert r.seconds < 10


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
    assert row.detail == str(Path(orchestrator.__file__).resolve().parents[2])


def test_the_core_reporting_another_version_is_noted(tmp_path):
    p = prepared(tmp_path, '''
        report(CYCLES[0], triton_version="2.99.0", detail="first note")
    ''')
    (row,) = run(p, [1]).rows
    assert row.detail == "first note; the core reports Triton 2.99.0; results are filed under 2.51.0"


# ---------------------------------------------------------------- workers that hang

def test_a_phase_past_its_deadline_is_hung_its_group_killed_and_the_run_goes_on(tmp_path):
    p = prepared(tmp_path, '''
        k = CYCLES[0]
        if k == 1:
            start(k)
            fake_stub()
            phase("stop", 0.3)
            time.sleep(600)
        report(k)
    ''', cycles=2)
    r = run(p, [1, 2])
    hung, after = r.by_cycle[1], r.by_cycle[2]
    assert hung.outcome == "hung"
    assert hung.detail == "phase stop ran past its deadline; worker group killed"
    assert hung.stubs_killed == 1, "the stub in the worker's group is counted"
    assert gone(hung.worker_pid) and gone(stub_pid(p, 1)), "the whole group is killed"
    assert 0.3 <= hung.cycle_wall_s < 5
    assert after.outcome == "clean"
    assert r.seconds < 10


def test_a_worker_silent_from_the_start_is_hung_at_the_spawn_deadline(tmp_path):
    # Before any phase, the parent allows startup_timeout + 60 s: 1 s here.
    p = prepared(tmp_path, '''
        time.sleep(600)
    ''', startup_timeout=1.0 - 60)
    r = run(p, [1])
    (row,) = r.rows
    assert row.outcome == "hung" and row.detail == "phase spawn ran past its deadline; worker group killed"
    assert gone(row.worker_pid)
    assert r.seconds < 6


def test_a_hang_after_stop_keeps_the_stops_outcome(tmp_path):
    p = prepared(tmp_path, '''
        k = CYCLES[0]
        start(k)
        phase("stop", 30)
        send(Partial(row(k, stop_latency_s=1.5, finalize_before_stop=0, outcome="finalize_missing")))
        phase("cleanup", 0.3)
        time.sleep(600)
    ''')
    (row,) = run(p, [1]).rows
    assert row.outcome == "finalize_missing", "what stop did was measured: it stands"
    assert row.cleanup == "hung"
    assert row.stop_latency_s == 1.5 and row.finalize_before_stop == 0
    assert row.detail == "phase cleanup ran past its deadline; worker group killed"


# ---------------------------------------------------------------- workers that die

@pytest.mark.parametrize("death, how", [
    ("os.kill(os.getpid(), signal.SIGKILL)", "killed by SIGKILL"),
    ("os.kill(os.getpid(), signal.SIGTERM)", "killed by SIGTERM"),
    ("os._exit(7)", "exit status 7"),
])
def test_a_worker_that_dies_mid_cycle_is_crashed_and_the_run_goes_on(tmp_path, death, how):
    p = prepared(tmp_path, f'''
        k = CYCLES[0]
        if k == 2:
            start(k)
            phase("infer", 60)
            print("last words of the worker", file=sys.stderr, flush=True)
            {death}
        report(k)
    ''', cycles=3)
    r = run(p, [1, 2, 3])
    assert [row.outcome for row in r.rows] == ["clean", "crashed", "clean"]
    dead = r.by_cycle[2]
    assert dead.detail.startswith(f"worker {how} in phase infer: ")
    assert dead.cleanup is None, "no stop was measured: the crash is the outcome, not a cleanup note"
    assert dead.stop_latency_s is None and dead.worker_pid not in (r.by_cycle[1].worker_pid, None)
    assert "last words of the worker" in dead.detail, "the worker's log tail says what it was doing"
    assert r.seconds < 10, "a death is seen at once, not at the phase's 60 s deadline"


def test_a_worker_that_reports_a_fatal_error_is_crashed_with_that_error(tmp_path):
    p = prepared(tmp_path, '''
        start(CYCLES[0])
        phase("start", 60)
        send(Fatal("RuntimeError: no such engine", "..."))
        sys.exit(3)
    ''')
    (row,) = run(p, [1]).rows
    assert row.outcome == "crashed"
    assert row.detail == "worker exit status 3 in phase start: RuntimeError: no such engine"


def test_a_crash_after_stop_keeps_the_stops_outcome_and_counts_the_stub(tmp_path):
    p = prepared(tmp_path, '''
        k = CYCLES[0]
        start(k)
        fake_stub()
        phase("stop", 30)
        send(Partial(row(k, outcome="exit_timeout", stop_error="Exit timeout expired",
                         stop_latency_s=1.0, stubs_killed=1)))
        phase("release", 30)
        os.kill(os.getpid(), signal.SIGKILL)
    ''')
    (row,) = run(p, [1]).rows
    assert row.outcome == "exit_timeout" and row.stop_error == "Exit timeout expired"
    assert row.cleanup == "crashed: killed by SIGKILL"
    assert row.detail.startswith("worker killed by SIGKILL in phase release")
    assert row.stubs_killed == 2, "the worker's count plus the stub the parent killed"
    assert gone(stub_pid(p, 1))


def test_a_crash_in_teardown_still_counts_the_stub_left_after_stop(tmp_path):
    """The same fault must give the same leak verdict whether the worker's teardown killed the
    stub or the worker died first and the stub then exited on its own (no stub runs here)."""
    p = prepared(tmp_path, '''
        k = CYCLES[0]
        start(k)
        phase("stop", 30)
        send(Partial(row(k, outcome="exit_timeout", stop_error="Exit timeout expired",
                         stop_latency_s=5.0, stubs_alive_after_stop=1)))
        phase("release", 30)
        os.kill(os.getpid(), signal.SIGABRT)
    ''')
    (row,) = run(p, [1]).rows
    assert row.outcome == "exit_timeout" and row.cleanup == "crashed: killed by SIGABRT"
    assert row.stubs_killed == 1, "the stub left after stop is a leak, whoever ended it"


def test_a_same_process_worker_that_dies_loses_only_its_cycle(tmp_path):
    p = prepared(tmp_path, '''
        for k in CYCLES:
            if k == 2 and len(CYCLES) == 3:  # the first worker dies in cycle 2
                start(k)
                os._exit(9)
            report(k)
    ''', restart="same-process", cycles=3)
    r = run(p, [1, 2, 3])
    assert [(row.cycle, row.outcome) for row in r.rows] == [(1, "clean"), (2, "crashed"), (3, "clean")]
    assert r.by_cycle[1].worker_pid == r.by_cycle[2].worker_pid != r.by_cycle[3].worker_pid
    assert json.loads((p.work_dir / "spec-0002.json").read_text())["cycles"] == [3]


def test_an_exception_in_the_parent_kills_the_worker_group(tmp_path):
    p = prepared(tmp_path, '''
        start(CYCLES[0])
        fake_stub()
        phase("infer", 60)
        time.sleep(600)
    ''')

    def on_phase(cycle, phase):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(p, [1], on_phase=on_phase)
    assert gone(stub_pid(p, 1)), "no stub (nor worker) outlives the parent's interruption"
    worker = json.loads((p.work_dir / "spec-0001.json").read_text())  # the spec is still there to rerun
    assert worker["cycles"] == [1]


# ---------------------------------------------------------------- workers that talk nonsense

GARBAGE = r'''
raw("this is not json\n")
raw("{\"type\": \"cycle\", \"row\": \n")
_out.buffer.write(b"\xff\xfe\x00 binary\n"); _out.flush()
raw('{"type": "no-such-message", "cycle": 99}\n')
raw('{"type": "cycle_start", "cycle": "not a number", "t": 0}\n')
raw('{"type": "cycle", "row": {"outcome": "clean"}}\n')
'''


def test_garbage_on_the_pipe_is_ignored_and_the_cycle_still_counts(tmp_path):
    p = prepared(tmp_path, GARBAGE + '''
report(CYCLES[0])
raw("trailing garbage without a newline")
''')
    (row,) = run(p, [1]).rows
    assert row.cycle == 1 and row.outcome == "clean"


@pytest.mark.parametrize("start, code", [(False, 1), (True, 0)])
def test_garbage_then_exit_without_a_result_is_crashed(tmp_path, start, code):
    p = prepared(tmp_path, f'''
k = CYCLES[0]
if k == 1:
    if {start}:
        start(k)
{textwrap.indent(GARBAGE, "    ")}
    sys.exit({code})
report(k)
''', cycles=2)
    r = run(p, [1, 2])
    assert [(row.cycle, row.outcome) for row in r.rows] == [(1, "crashed"), (2, "clean")]
    assert r.by_cycle[1].detail.startswith(f"worker exit status {code} in phase spawn")
    assert r.seconds < 10


def test_a_worker_that_exits_0_without_a_word_is_crashed(tmp_path):
    # Guard: the third worker reports, so that the loop ends either way.
    p = prepared(tmp_path, '''
        n = len([f for f in os.listdir(WORK) if f.startswith("spec-")])
        if n >= 3:
            report(CYCLES[0], detail=f"reported by worker {n}")
        sys.exit(0)
    ''')
    (row,) = run(p, [1]).rows
    assert row.outcome == "crashed" and row.detail.startswith("worker exit status 0")


def test_json_that_is_not_an_object_is_ignored(tmp_path):
    p = prepared(tmp_path, '''
        raw("null\\n[1, 2]\\n")
        report(CYCLES[0])
    ''')
    (row,) = run(p, [1]).rows
    assert row.outcome == "clean"


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
               start_latency_s=1, stop_latency_s=None, workload_s=2, outputs_ok=1, not_a_field="dropped")
    done = parent_rows.finish_row(p, row, 10.0)
    assert done.stubs_killed == 2 and type(done.stubs_killed) is int and type(done.requests) is int
    assert type(done.start_latency_s) is float and type(done.workload_s) is float and done.outputs_ok is True
    assert len(done.detail) == 2000 and done.stop_error == "e"
    assert done.overhead_s == pytest.approx(7.0)  # a missing stop latency counts as 0
    assert done.cycle_wall_s == 10.0 and done.engine == "capi" and done.cycle == 4
    assert parent_rows.finish_row(p, parent_rows.blank_row(p, 5), None).overhead_s is None


def test_lost_cycle_without_and_with_a_partial_row(tmp_path):
    p = _p(tmp_path)
    lost = parent_rows.lost_cycle(p, 3, None, "hung", "hung", "phase x", stubs=2, leaked=1, pid=77)
    assert (lost["outcome"], lost["cleanup"], lost["detail"]) == ("hung", None, "phase x")
    assert (lost["stubs_killed"], lost["shm_regions_leaked"], lost["worker_pid"]) == (2, 1, 77)
    partial = Partial({"cycle": 3, "outcome": "clean", "stubs_killed": 1, "shm_regions_leaked": None,
                       "stop_latency_s": 0.5, "unknown_key": 1}, ("triton_python_backend_shm_region_gone",))
    kept = parent_rows.lost_cycle(p, 3, partial, "crashed", "crashed: exit status 1", "why", 2, 0, 78)
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

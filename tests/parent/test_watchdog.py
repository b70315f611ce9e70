"""The parent's watchdog (rig.parent.orchestrator.run_cycles / WorkerHandle) on fake workers
(``fake_workers``) that hang, die or talk nonsense: the cycle is recorded ``hung`` or
``crashed``, what the worker left is killed and counted, and the run goes on."""

from __future__ import annotations

import json
import textwrap

import pytest

from fake_workers import REPORT_DEADLINE_S, gone, prepared, run, stub_pid


# ---------------------------------------------------------------- workers that hang

def test_a_phase_past_its_deadline_is_hung_its_group_killed_and_the_run_goes_on(tmp_path):
    deadline = 1.0
    p = prepared(tmp_path, f'''
        k = CYCLES[0]
        if k == 1:
            start(k)
            fake_stub()
            phase("stop", {deadline})
            time.sleep(600)
        report(k)
    ''', cycles=2)
    r = run(p, [1, 2])
    hung, after = r.by_cycle[1], r.by_cycle[2]
    assert hung.outcome == "hung"
    assert hung.detail == "phase stop ran past its deadline; worker group killed"
    assert hung.stubs_killed == 1, "the stub in the worker's group is counted"
    assert gone(hung.worker_pid) and gone(stub_pid(p, 1)), "the whole group is killed"
    # killed at the phase's deadline, counted from when the parent heard of the phase: not before,
    # and not at some later deadline
    waited = r.ended_at[1] - r.phase_at[(1, "stop")]
    assert deadline <= waited < 2 * deadline and deadline <= hung.cycle_wall_s, (waited, hung.cycle_wall_s)
    assert after.outcome == "clean"
    assert r.seconds < REPORT_DEADLINE_S, "the clean cycle waited out no deadline"


def test_a_worker_silent_from_the_start_is_hung_at_the_spawn_deadline(tmp_path):
    # Before any phase, the parent allows startup_timeout + 60 s: 2 s here.
    spawn_deadline = 2.0
    p = prepared(tmp_path, '''
        time.sleep(600)
    ''', startup_timeout=spawn_deadline - 60)
    r = run(p, [1])
    (row,) = r.rows
    assert row.outcome == "hung" and row.detail == "phase spawn ran past its deadline; worker group killed"
    assert gone(row.worker_pid)
    assert spawn_deadline <= row.cycle_wall_s < 2 * spawn_deadline, row.cycle_wall_s


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
    assert r.seconds < 60, "a death is seen at once, not at the phase's 60 s deadline"


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
    assert r.seconds < REPORT_DEADLINE_S, "the exit is seen at once, not at the spawn's deadline (65 s)"


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

"""A cycle's two verdicts from its figures, and the finalize evidence they rest on: the markers the
hook leaves (rig/worker/hook/evidence.py, run as a stub would run it) read back and counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rig.contract import verdicts
from rig.worker import cycle

HOOK = Path(cycle.__file__).resolve().parent / "hook" / "evidence.py"  # rig/worker/hook


@pytest.mark.parametrize("row, outcome", [
    ({}, "clean"),
    ({"finalize_expected": 2, "finalize_before_stop": 2, "stop_error": None, "errors": 0}, "clean"),
    ({"finalize_expected": None, "finalize_before_stop": None}, "clean"),
    ({"outputs_ok": None}, "clean"),
    ({"outcome": "load_failed", "errors": 3, "stop_error": "x"}, "load_failed"),
    # the load's failures never hide the stop's verdict (classify_load judges them)
    ({"errors": 1, "stop_error": "Exit timeout expired"}, "exit_timeout"),
    ({"errors": 5, "timeouts": 5, "finalize_expected": 1, "finalize_before_stop": 0}, "finalize_missing"),
    ({"outputs_ok": False}, "clean"),
    ({"stop_error": "Internal: Exit timeout expired. Exiting immediately."}, "exit_timeout"),
    ({"stop_error": "unload: EXIT TIMEOUT"}, "exit_timeout"),
    ({"stop_error": "server is not ready"}, "stop_error"),
    ({"stop_error": "", "finalize_errors": 1}, "finalize_error"),
    ({"finalize_errors": 1, "finalize_expected": 2, "finalize_before_stop": 0}, "finalize_error"),
    ({"finalize_expected": 2, "finalize_before_stop": 1}, "finalize_missing"),
    ({"finalize_expected": 1, "finalize_before_stop": None}, "finalize_missing"),
    ({"outcome": "clean", "finalize_expected": 1, "finalize_before_stop": 0}, "finalize_missing"),
])
def test_classify(row, outcome):
    assert verdicts.classify(row) == outcome
    assert outcome in verdicts.OUTCOMES


@pytest.mark.parametrize("row, load", [
    ({"requests": 10, "errors": 0}, "ok"),
    ({"requests": 10, "errors": 3}, "errors"),
    ({"requests": 10, "errors": 3, "timeouts": 1}, "timeouts"),
    ({"requests": 10, "errors": 0, "bad_outputs": 2}, "wrong_outputs"),
    ({"requests": 10, "outputs_ok": False}, "wrong_outputs"),
    ({"requests": 0, "errors": 0}, "nothing_completed"),
    ({"requests": 0, "errors": 0, "outputs_ok": False}, "wrong_outputs"),
    ({"outcome": "load_failed", "requests": None}, "not_measured"),
    ({}, "not_measured"),
])
def test_classify_load(row, load):
    assert verdicts.classify_load(row) == load
    assert load in verdicts.LOAD_OUTCOMES


@pytest.mark.parametrize("old, new", [
    ({"outcome": "infer_error", "errors": 4, "requests": 9, "stop_error": "Exit timeout expired"},
     ("exit_timeout", "errors")),
    ({"outcome": "infer_error", "errors": 4, "requests": 9, "finalize_expected": 1, "finalize_before_stop": 1},
     ("clean", "errors")),
    ({"outcome": "wrong_output", "requests": 9, "finalize_expected": 1, "finalize_before_stop": 1},
     ("clean", "wrong_outputs")),
    ({"outcome": "exit_timeout", "requests": 9, "errors": 0, "stop_error": "Exit timeout"}, ("exit_timeout", "ok")),
    ({"outcome": "hung", "requests": None}, ("hung", "not_measured")),
    ({"outcome": "clean", "requests": 9, "load_outcome": "timeouts"}, ("clean", "timeouts")),
])
def test_a_cycle_stored_with_one_verdict_reads_as_two(old, new):
    up = verdicts.upgrade_legacy(dict(old))
    assert (up["outcome"], up["load_outcome"]) == new


def test_classify_never_answers_the_parents_outcomes():
    rows = [{"errors": e, "outputs_ok": o, "stop_error": s, "finalize_errors": f, "finalize_expected": x,
             "finalize_before_stop": b, "bad_outputs": bad, "stub_crashes": c, "in_flight_lost": lost}
            for e in (None, 0, 2) for o in (None, True, False) for s in (None, "exit timeout", "other")
            for f in (None, 0, 1) for x in (None, 0, 2) for b in (None, 0, 2) for bad in (None, 0, 3)
            for c in (None, 0, 1) for lost in (None, 0, 1)]
    seen = {verdicts.classify(r) for r in rows}
    assert seen == set(verdicts.OUTCOMES) - {"hung", "crashed", "load_failed"}


def test_a_lost_request_and_a_crashed_stub_are_the_stops_verdicts():
    assert verdicts.classify({"in_flight_lost": 1, "stop_error": "Exit timeout expired"}) == "requests_lost"
    assert verdicts.classify({"stop_error": "Exit timeout expired", "stub_crashes": 2}) == "exit_timeout"
    assert verdicts.classify({"stub_crashes": 1, "stub_exit_aborts": 0, "finalize_expected": 1,
                           "finalize_before_stop": 1}) == "stub_crashed"
    assert verdicts.classify({"stub_crashes": 1, "finalize_expected": 2, "finalize_before_stop": 1}) == "stub_crashed"


def test_an_abort_at_exit_keeps_what_the_stop_did():
    """A stub that died only after every finalize it owed (2.68.0 on) does not hide the stop: clean
    reads aborted_at_exit; a stop that waited out exit_timeout, or a finalize that raised, stays so."""
    done = {"finalize_expected": 2, "finalize_before_stop": 2}
    assert verdicts.classify({"stub_crashes": 2, "stub_exit_aborts": 2, **done}) == "aborted_at_exit"
    assert verdicts.classify({"stub_crashes": 2, "stub_exit_aborts": 1, **done}) == "stub_crashed"
    assert verdicts.classify({"stub_crashes": 1, "stub_exit_aborts": 1, "finalize_errors": 1, **done}) == "finalize_error"
    assert verdicts.classify({"stub_crashes": 1, "stub_exit_aborts": 1, "stop_error": "Exit timeout expired",
                           **done}) == "exit_timeout"
    # a row stored before the count (schema < 16): read from its finalize figures
    assert verdicts.classify({"stub_crashes": 1, **done}) == "aborted_at_exit"
    from rig.contract.verdicts import reread
    assert reread({"outcome": "stub_crashed", **done})["outcome"] == "aborted_at_exit"
    assert reread({"outcome": "stub_crashed", "finalize_errors": 1, **done}) == {
        "outcome": "finalize_error", "finalize_errors": 1, "stub_exit_aborts": 1, **done}
    assert reread({"outcome": "stub_crashed", "finalize_expected": 2, "finalize_before_stop": 1})["outcome"] == "stub_crashed"
    assert reread({"outcome": "stub_crashed", "stop_error": "x", **done})["outcome"] == "stub_crashed"
    assert verdicts.classify({"in_flight": 8, "in_flight_answered": 8, "in_flight_lost": 0}) == "clean"


def _marker(pid, instance, phase, t, error=None):
    return {"pid": pid, "model": "m", "instance": instance, "phase": phase, "t_mono": t, "error": error}


def test_summarize_no_markers():
    assert cycle.summarize_markers([], 1.0, crash_recorder=True) == {
        "finalize_expected": 0, "finalize_before_stop": 0, "finalize_after_stop": 0, "finalize_errors": 0,
        "stub_crashes": 0, "stub_exit_aborts": 0, "input_copies": None}
    assert cycle.summarize_markers([], None)["finalize_expected"] == 0
    # no crash recorder armed in the stubs (no compiler): not measured, not "no crash"
    assert cycle.summarize_markers([], 1.0, crash_recorder=False)["stub_crashes"] is None


def test_summarize_counts_instances_and_splits_at_the_stop():
    markers = [
        _marker(10, "m_0", "init", 0.1), _marker(10, "m_0", "init", 0.2),  # the same instance twice
        _marker(10, "m_1", "init", 0.1),
        _marker(11, "m_0", "init", 0.1),                                    # same name, another stub
        _marker(12, "m_0", "init_failed", 0.1, "ValueError: x"),          # never initialised
        _marker(10, "m_0", "finalize_start", 0.9),
        _marker(10, "m_0", "finalize_end", 1.0),                            # at the stop: before
        _marker(10, "m_1", "finalize_end", 0.5, "RuntimeError: boom"),
        _marker(11, "m_0", "finalize_end", 1.5),                            # after the stop
        {"pid": 11, "phase": "crash", "signal": 11, "t_mono": 1.6},         # then it died (rig/worker/hook/crash.c)
    ]
    assert cycle.summarize_markers(markers, 1.0, crash_recorder=True) == {
        "finalize_expected": 3, "finalize_before_stop": 2, "finalize_after_stop": 1, "finalize_errors": 1,
        "stub_crashes": 1, "stub_exit_aborts": 1, "input_copies": None}
    # the stop never returned: every finalize counts as after
    s = cycle.summarize_markers(markers, None)
    assert (s["finalize_before_stop"], s["finalize_after_stop"]) == (0, 3)


def test_read_markers_skips_what_it_cannot_read(tmp_path):
    assert cycle.read_markers(tmp_path / "missing") == []
    (tmp_path / "1-m_0-init.json").write_text(json.dumps(_marker(1, "m_0", "init", 0.5)))
    (tmp_path / "1-m_0-finalize_end.json.tmp").write_text("{half")      # a marker being written
    (tmp_path / "2-m_0-init.json").write_text("{not json")                # a torn one
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "3-m_0-init.json").write_bytes(b"\xff\xfe")             # not UTF-8
    got = cycle.read_markers(tmp_path)
    assert got == [_marker(1, "m_0", "init", 0.5)]


def test_markers_from_the_real_hook_with_a_finalize_that_raises(tmp_path):
    """The hook (rig/worker/hook/evidence.py) instruments any TritonPythonModel: run it as a stub would
    (its own interpreter, RIG_EVIDENCE_DIR set) and read back what it left."""
    code = textwrap.dedent(f"""
        import time
        exec(compile(open({str(HOOK)!r}).read(), "evidence.py", "exec"))

        class TritonPythonModel:
            def initialize(self, args):
                self.args = args
            def finalize(self):
                if self.args["model_instance_name"] == "bad_0":
                    raise RuntimeError("finalize failed")

        good, bad = TritonPythonModel(), TritonPythonModel()
        good.initialize({{"model_name": "good", "model_instance_name": "good_0"}})
        bad.initialize({{"model_name": "bad", "model_instance_name": "bad_0"}})
        good.finalize()
        print(time.monotonic(), flush=True)
        try:
            bad.finalize()
        except RuntimeError:
            pass
    """)
    env = dict(os.environ, RIG_EVIDENCE_DIR=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    t_between = float(p.stdout.strip())
    markers = cycle.read_markers(tmp_path)
    assert sorted((m["instance"], m["phase"]) for m in markers) == [
        ("bad_0", "finalize_end"), ("bad_0", "finalize_start"), ("bad_0", "init"),
        ("good_0", "finalize_end"), ("good_0", "finalize_start"), ("good_0", "init")]
    bad_end = next(m for m in markers if m["instance"] == "bad_0" and m["phase"] == "finalize_end")
    assert bad_end["error"] == "RuntimeError: finalize failed" and bad_end["model"] == "bad"
    # the markers' clock is this process's CLOCK_MONOTONIC: a stop "returned" between the two
    # finalizes splits them
    assert cycle.summarize_markers(markers, t_between, crash_recorder=True) == {
        "finalize_expected": 2, "finalize_before_stop": 1, "finalize_after_stop": 1, "finalize_errors": 1,
        "stub_crashes": 0, "stub_exit_aborts": 0, "input_copies": None}
    assert not list(tmp_path.glob("*.tmp"))


def test_finalize_markers_count_only_from_this_cycles_own_stubs():
    from rig.contract.evidence import summarize_markers

    mine = [{"pid": 10, "instance": "m_0", "phase": "init", "t_mono": 1.0},
            {"pid": 10, "instance": "m_0", "phase": "finalize_end", "t_mono": 2.0}]
    stranger = [{"pid": 99, "instance": "m_0", "phase": "finalize_end", "t_mono": 2.0},   # another process
                {"pid": 10, "instance": "m_9", "phase": "finalize_end", "t_mono": 2.0}]   # never initialized
    s = summarize_markers(mine + stranger, t_stop_returned=3.0)
    assert s["finalize_expected"] == 1 and s["finalize_before_stop"] == 1 and s["finalize_after_stop"] == 0


def test_a_finalize_never_called_is_told_apart_and_explained_only_on_finalize_missing():
    from rig.contract.verdicts import never_called
    from rig.contract.evidence import never_finalized

    markers = [{"pid": 10, "instance": "m_0", "phase": "init"}, {"pid": 11, "instance": "m_1", "phase": "init"},
               {"pid": 10, "instance": "m_0", "phase": "finalize_start"},   # called (whether it ended or not)
               {"pid": 12, "instance": "m_1", "phase": "finalize_start"}]   # another stub's: not m_1's
    assert never_finalized(markers) == 1 and never_finalized([]) == 0
    note = never_called({"outcome": "finalize_missing"}, 1)
    assert note.startswith("finalize was never called in 1 instance(s)") and "stub_paused_at_stop.py" in note
    assert never_called({"outcome": "finalize_missing"}, 0) is None       # called, never ended: not this
    assert never_called({"outcome": "exit_timeout"}, 2) is None           # the stop's own verdict


def test_merge_joins_details():
    from rig.contract.rows import CycleDraft, joined

    row = CycleDraft(detail="first")
    row.merge({"requests": 5, "detail": "second"})
    assert dict(row) == {"detail": "first; second", "requests": 5}
    row = CycleDraft(detail=None)
    row.merge({"errors": 0, "detail": None})
    assert dict(row) == {"detail": None, "errors": 0}
    row.note("a cause", first=True)
    row.note("an effect")
    assert row["detail"] == "a cause; an effect"
    assert joined("x", None) == "x" and joined(None, "y") == "y" and joined("x", "y", first=True) == "y; x"


def test_a_draft_takes_only_the_rows_fields_each_typed():
    import pytest

    from rig.contract.rows import CycleDraft

    row = CycleDraft.blank(cycle=3.0, requests="12")
    assert row["cycle"] == 3 and isinstance(row["cycle"], int) and row["requests"] == 12
    assert row["outcome"] is None and len(row) == len(row.row().__dataclass_fields__)
    with pytest.raises(KeyError, match="not a field of CycleRow"):
        row["stop_latency"] = 1.0  # misspelt: stop_latency_s
    row.update(outcome="clean", load_outcome="ok")
    assert row.row().outcome == "clean"


def test_an_abort_at_exit_is_told_from_a_crash_before_or_during_the_stop():
    """A stub that died after every finalize it owed (2.68.0 on: the interpreter aborts at its exit)
    is counted apart from one that died before its finalize ended, or with an instance unfinalized."""
    markers = [
        _marker(10, "m_0", "init", 0.1), _marker(10, "m_0", "finalize_end", 1.0),
        {"pid": 10, "phase": "crash", "signal": 6, "t_mono": 1.2},            # after its finalize: at exit
        _marker(11, "m_1", "init", 0.1),
        {"pid": 11, "phase": "crash", "signal": 11, "t_mono": 0.5},           # no finalize: under load
        _marker(12, "m_2", "init", 0.1), _marker(12, "m_3", "init", 0.1),
        _marker(12, "m_2", "finalize_end", 1.0),
        {"pid": 12, "phase": "crash", "signal": 6, "t_mono": 1.1},            # one instance unfinalized
        _marker(13, "m_4", "init", 0.1), _marker(13, "m_4", "finalize_end", 2.0),
        {"pid": 13, "phase": "crash", "signal": 6, "t_mono": 1.5},            # died in its finalize
    ]
    s = cycle.summarize_markers(markers, 3.0, crash_recorder=True)
    assert (s["stub_crashes"], s["stub_exit_aborts"]) == (4, 1)
    assert cycle.summarize_markers(markers, 3.0, crash_recorder=False)["stub_exit_aborts"] is None


def test_a_failed_soak_says_what_each_verdict_it_failed_on_means():
    from rig.contract.verdicts import OUTCOMES, explain

    assert explain(["outcomes not allowed: aborted_at_exit=2, exit_timeout=1", "load outcomes not allowed: errors=1",
                    "leaks: 1 stub(s) killed by the rig, 0 shared-memory region(s) left"]) == [
        f"aborted_at_exit: {OUTCOMES['aborted_at_exit']}", f"exit_timeout: {OUTCOMES['exit_timeout']}"]
    assert explain([]) == []

"""The rig's pure parts, on real inputs: outcomes, finalize evidence, verdicts and summaries,
schedules, bench figures, config parsing, the store's round trips, and the probes that need no
GPU and no Triton core."""

from __future__ import annotations

import collections
import dataclasses
import json
import mmap
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import psutil
import pytest

from rig import bench, cycle, probes, soak
from rig.config import RunConfig, Thresholds, from_toml_text, load
from rig.errors import RigError
from rig.schedule import arrival_times

from rig.analysis.sweeps import stable
from rig.store import Store
from rig.protocol import CycleRow, RunRow, WindowRow

HOOK = Path(cycle.__file__).resolve().parent / "hook" / "evidence.py"


def cycle_row(cycle_no=1, **kw) -> CycleRow:
    base = {f.name: None for f in dataclasses.fields(CycleRow)}
    base.pop("schema_version")
    base.update(run_id="r1", cycle=cycle_no, engine="capi", model="numpy", retain="none", outcome="clean",
                restart="fresh-process", stop_strategy="stop", started_at="2026-01-01T00:00:00+00:00")
    base.update(kw)
    return CycleRow(**base)


# ================================================================ cycle: outcomes

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
    assert cycle.classify(row) == outcome
    assert outcome in cycle.OUTCOMES


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
    assert cycle.classify_load(row) == load
    assert load in cycle.LOAD_OUTCOMES


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
    up = cycle.upgrade_legacy(dict(old))
    assert (up["outcome"], up["load_outcome"]) == new


def test_classify_never_answers_the_parents_outcomes():
    rows = [{"errors": e, "outputs_ok": o, "stop_error": s, "finalize_errors": f, "finalize_expected": x,
             "finalize_before_stop": b, "bad_outputs": bad}
            for e in (None, 0, 2) for o in (None, True, False) for s in (None, "exit timeout", "other")
            for f in (None, 0, 1) for x in (None, 0, 2) for b in (None, 0, 2) for bad in (None, 0, 3)]
    seen = {cycle.classify(r) for r in rows}
    assert seen == set(cycle.OUTCOMES) - {"hung", "crashed", "load_failed"}


# ================================================================ cycle: finalize evidence

def _marker(pid, instance, phase, t, error=None):
    return {"pid": pid, "model": "m", "instance": instance, "phase": phase, "t_mono": t, "error": error}


def test_summarize_no_markers():
    assert cycle.summarize_markers([], 1.0) == {"finalize_expected": 0, "finalize_before_stop": 0,
                                                "finalize_after_stop": 0, "finalize_errors": 0}
    assert cycle.summarize_markers([], None)["finalize_expected"] == 0


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
    ]
    assert cycle.summarize_markers(markers, 1.0) == {"finalize_expected": 3, "finalize_before_stop": 2,
                                                     "finalize_after_stop": 1, "finalize_errors": 1}
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
    """The hook (rig/hook/evidence.py) instruments any TritonPythonModel: run it as a stub would
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
    assert cycle.summarize_markers(markers, t_between) == {"finalize_expected": 2, "finalize_before_stop": 1,
                                                           "finalize_after_stop": 1, "finalize_errors": 1}
    assert not list(tmp_path.glob("*.tmp"))


def test_merge_joins_details():
    row = {"detail": "first"}
    cycle._merge(row, {"requests": 5, "detail": "second"})
    assert row == {"detail": "first; second", "requests": 5}
    row = {"detail": None}
    cycle._merge(row, {"errors": 0, "detail": None})
    assert row == {"detail": None, "errors": 0}


# ================================================================ soak: tally, verdict, summary

def test_tally_figures():
    t = soak.Tally()
    assert t.finalize_success is None and t.stop_latencies == [] and t.leaks == (0, 0)
    t.add(cycle_row(1, finalize_expected=2, finalize_before_stop=2, stop_latency_s=0.5, stubs_killed=1))
    t.add(cycle_row(2, outcome="hung"))  # a lost cycle: every figure None
    t.add(cycle_row(3, outcome="exit_timeout", finalize_expected=2, finalize_before_stop=0,
                    stop_latency_s=30.0, shm_regions_leaked=2))
    assert t.outcomes == collections.Counter(clean=1, hung=1, exit_timeout=1)
    assert t.finalize_success == 0.5
    assert t.stop_latencies == [0.5, 30.0]
    assert t.leaks == (1, 2)


def _cfg(**thresholds) -> RunConfig:
    return RunConfig(thresholds=Thresholds(**thresholds))


def test_judge_passes_a_clean_run():
    t = soak.Tally([cycle_row(k, finalize_expected=1, finalize_before_stop=1, stop_latency_s=1.0) for k in (1, 2)])
    assert soak.judge(t, _cfg(max_stop_latency_s=1.0, min_finalize_success=1.0), ("clean",)) == []
    assert soak.judge(soak.Tally(), _cfg(max_stop_latency_s=1.0, min_finalize_success=1.0), ("clean",)) == []


def test_judge_names_every_threshold_crossed():
    t = soak.Tally([cycle_row(1, finalize_expected=2, finalize_before_stop=2, stop_latency_s=0.2),
                    cycle_row(2, outcome="exit_timeout", finalize_expected=2, finalize_before_stop=0,
                              stop_latency_s=6.0, stubs_killed=2),
                    cycle_row(3, outcome="hung"), cycle_row(4, outcome="exit_timeout", shm_regions_leaked=1)])
    reasons = soak.judge(t, _cfg(max_stop_latency_s=5, min_finalize_success=0.9), ("clean",))
    assert reasons == ["outcomes not allowed: exit_timeout=2, hung=1",
                       "max stop latency 6.000 s > 5 s",
                       "finalize success 50.0% < 90.0%",
                       "leaks: 2 stub(s) killed by the rig, 1 shared-memory region(s) left"]
    allowed = soak.judge(t, _cfg(allow_leaks=True), ("clean", "exit_timeout", "hung"))
    assert allowed == []


def test_judge_holds_each_verdict_to_its_own_allowed_names():
    t = soak.Tally([cycle_row(1, load_outcome="ok"), cycle_row(2, outcome="exit_timeout", load_outcome="errors"),
                    cycle_row(3, outcome="load_failed", load_outcome="not_measured"),
                    cycle_row(4, load_outcome="timeouts")])
    assert soak.judge(t, _cfg(), soak.DEFAULT_ALLOWED) == [
        "outcomes not allowed: exit_timeout=1, load_failed=1", "load outcomes not allowed: errors=1, timeouts=1"]
    assert soak.judge(t, _cfg(), ("clean", "exit_timeout", "load_failed", "ok", "errors", "timeouts")) == []


@pytest.mark.parametrize("text, allowed", [
    (None, ("clean", "ok")),
    ("clean,exit_timeout", ("clean", "exit_timeout", "ok")),       # the load keeps its default
    ("errors", ("errors", "clean")),                              # the lifecycle keeps its default
    ("clean,infer_error", ("clean", "errors", "timeouts", "nothing_completed")),  # schema 5's names
    ("wrong_output", ("wrong_outputs", "clean")),
])
def test_allowed_outcomes_name_both_kinds(text, allowed):
    assert soak.allowed_outcomes(_cfg(allow_outcomes=text), soak.DEFAULT_ALLOWED) == allowed


def test_an_unknown_allowed_outcome_names_both_vocabularies():
    with pytest.raises(RigError, match="the lifecycle's clean.*the load's ok"):
        soak.allowed_outcomes(_cfg(allow_outcomes="clean,bogus"), soak.DEFAULT_ALLOWED)


def test_the_gate_fails_a_new_verdict_of_either_kind():
    from rig.analysis import verdict

    base = [cycle_row(k, load_outcome="ok", finalize_expected=1, finalize_before_stop=1, stop_latency_s=2.0)
            for k in range(1, 5)]
    cand = [cycle_row(k, load_outcome="timeouts" if k == 1 else "ok", finalize_expected=1,
                      finalize_before_stop=1, stop_latency_s=2.0) for k in range(1, 5)]
    assert verdict.gate(base, None, base, None) == []
    assert verdict.gate(base, None, cand, None) == [
        "new load outcome(s): timeouts in 1/4 cycles (baseline had only ok)"]


def test_judge_unset_thresholds_and_missing_figures():
    t = soak.Tally([cycle_row(1, outcome="crashed")])  # no latency, no finalize evidence
    assert soak.judge(t, _cfg(max_stop_latency_s=0.001, min_finalize_success=1.0), ("clean", "crashed")) == []


def test_summary_table():
    t = soak.Tally([cycle_row(1, stop_latency_s=0.5, throughput=1000.0, overhead_s=0.25,
                              finalize_expected=1, finalize_before_stop=1, load_outcome="errors"),
                    cycle_row(2, stop_latency_s=3.5, throughput=3000.0, overhead_s=0.75,
                              finalize_expected=1, finalize_before_stop=0, outcome="finalize_missing",
                              load_outcome="ok"),
                    cycle_row(3, stop_latency_s=1.0, stubs_killed=1, outcome="hung")])
    assert soak.summary_table(t).splitlines() == [
        "cycles        3",
        "outcomes      clean=1, finalize_missing=1, hung=1  (lifecycle)",
        "load          errors=1, ok=1",
        "finalize      50.0% before stop returned",
        "stop latency  min 0.500  median 1.000  max 3.500 s",
        "throughput    median 2,000 infer/s",
        "rig overhead  median 0.500 s per cycle (beyond start, workload and stop)",
        "leaks         1 stub(s) killed, 0 shared-memory region(s) removed",
    ]
    empty = soak.summary_table(soak.Tally([cycle_row(1, outcome="crashed")]))
    assert empty.splitlines() == ["cycles        1", "outcomes      crashed=1  (lifecycle)", "load          -",
                                  "finalize      -",
                                  "leaks         0 stub(s) killed, 0 shared-memory region(s) removed"]


def test_cycle_line_of_a_clean_cycle():
    r = cycle_row(4, start_latency_s=1.23456, stop_latency_s=0.5, finalize_expected=2, finalize_before_stop=2,
                  finalize_after_stop=0, stubs_alive_after_stop=0, throughput=12345.6, cleanup="ok",
                  stop_error="ignored when clean", detail="ignored when clean", load_outcome="ok")
    assert soak.cycle_line(r) == ("cycle 4: clean | load ok | start 1.235 s | stop 0.500 s | finalize 2/2 before stop, "
                                  "0 after | stubs alive after stop 0 | 12,346 infer/s")


def test_cycle_line_of_lost_and_failed_cycles():
    hung = cycle_row(2, outcome="hung", stubs_killed=1, shm_regions_leaked=3,
                     detail="phase stop ran past its deadline; worker group killed")
    assert soak.cycle_line(hung) == (
        "cycle 2: hung | load - | start - s | stop - s | finalize -/- before stop, - after | stubs alive after stop - "
        "| stubs killed 1 | shm leaked 3 | (phase stop ran past its deadline; worker group killed)")
    timeout = cycle_row(3, outcome="exit_timeout", stop_error="E" * 300, detail="a detail", finalize_errors=1,
                        errors=4, cleanup="crashed: killed by SIGSEGV")
    line = soak.cycle_line(timeout)
    assert "| 1 finalize raised |" in line and "| cleanup crashed: killed by SIGSEGV |" in line
    assert "| 4 request errors |" in line
    assert line.endswith("(stop: " + "E" * 160 + ")"), "the stop's error, cut at 160 characters"
    # Two verdicts, each with its reason: the load's words never hide the stop's
    both = cycle_row(5, outcome="exit_timeout", load_outcome="errors", errors=7, timeouts=2,
                     stop_error="Exit timeout expired", detail="a detail",
                     error_messages='{"ValueError: bad calibration table": 5, "no response": 2}')
    line = soak.cycle_line(both)
    assert line.startswith("cycle 5: exit_timeout | load errors |")
    assert "| 7 request errors (2 unanswered) |" in line
    assert line.endswith("| (stop: Exit timeout expired) | (load: ValueError: bad calibration table)")
    lost = cycle_row(6, outcome="finalize_missing", load_outcome="ok", detail="the stub died")
    assert soak.cycle_line(lost).endswith("(the stub died)"), "a lifecycle failure with no stop error: its detail"


def test_window_row_fills_what_a_window_message_lacks():
    from rig.protocol import window_row

    w = window_row("r9", "capi", "numpy", {"cycle": "3", "window": None, "throughput": None, "p50_us": 120.0,
                            "requests": 10.0, "unknown": 1})
    assert isinstance(w, WindowRow)
    assert (w.run_id, w.cycle, w.window, w.tool, w.mode) == ("r9", 3, 0, "rig", "closed")
    assert (w.requests, w.errors, w.throughput, w.start_s, w.p50_us, w.p99_us) == (10, 0, 0.0, 0.0, 120.0, None)
    assert type(w.requests) is int
    assert window_row("r9", "capi", "numpy", {"tool": "perf_analyzer", "mode": "open"}).tool == "perf_analyzer"


# ================================================================ schedule

def test_constant_arrivals_are_evenly_spaced_inside_the_span():
    t = arrival_times(200, 0.5, 1_000, "constant")
    assert t.dtype == np.int64
    assert len(t) == 99  # 5 ms apart from 1_000 + 5 ms; the 100th lands on the end, excluded
    assert (np.diff(t) == 5_000_000).all() and t[0] == 1_000 + 5_000_000
    assert t[-1] < 1_000 + 500_000_000


def test_poisson_arrivals():
    a = arrival_times(500, 4.0, 0, "poisson", seed=1)
    assert (np.diff(a) >= 0).all() and a[0] > 0 and a[-1] < 4e9
    assert len(a) == 2000  # conditioned on its count: exactly the rate asked for
    gaps = np.diff(a)
    assert gaps.mean() == pytest.approx(2e6, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)  # exponential gaps, as Poisson's
    assert (gaps < 0.1 * gaps.mean()).mean() == pytest.approx(1 - np.exp(-0.1), abs=0.03)
    assert not np.array_equal(a[:50], arrival_times(500, 4.0, 0, "poisson", seed=2)[:50])
    for rate, seconds in ((100, 3.0), (37.5, 2.0), (1000, 0.25), (0.4, 1.0)):
        assert len(arrival_times(rate, seconds, 10, "poisson", seed=3)) == round(rate * seconds)


def test_a_rate_too_low_for_the_span_sends_nothing():
    assert len(arrival_times(0.5, 1.0, 0, "constant")) == 0  # the first send is due at 2 s


def test_stable_edge_cases():
    row = {"throughput": 100.0, "p50_us": 50.0}
    assert stable([]) is None and stable([row, row]) is None
    assert stable([row] * 3) is True
    assert stable([{"throughput": 500.0, "p50_us": 1.0}] + [row] * 3) is True, "only the last n count"
    assert stable([row, row, {"throughput": 100.0, "p50_us": None}]) is False
    assert stable([row, row, {"throughput": 100.0}]) is False
    assert stable([{"throughput": 0.0, "p50_us": 50.0}] * 3) is False
    # 10 % of the mean is the bound: 90/100/110 (mean 100) is inside, 85/100/115 is not
    tp = lambda *v: [{"throughput": x, "p50_us": 50.0} for x in v]  # noqa: E731
    assert stable(tp(90, 100, 110)) is True and stable(tp(85, 100, 115)) is False
    assert stable(tp(85, 100, 115), pct=20) is True
    assert stable(tp(100, 100), n=2) is True and stable(tp(100), n=2) is None


# ================================================================ bench

@pytest.mark.parametrize("text, kind, want", [
    (None, int, []), ("", int, []), ("1,2, 4", int, [1, 2, 4]), ("8,,16,", int, [8, 16]),
    ("0.5,250", float, [0.5, 250.0]),
])
def test_points(text, kind, want):
    assert bench._points(text, kind) == want


@pytest.mark.parametrize("text, kind, words", [
    ("a,b", int, "comma-separated"), ("1.5", int, "comma-separated"), ("0,1", int, "positive"),
    ("-2", float, "positive"), (",", int, "positive"),
])
def test_bad_points(text, kind, words):
    with pytest.raises(RigError, match=words):
        bench._points(text, kind)


def test_summarize_takes_medians_of_the_last_three_windows_after_warm_up():
    w = lambda t, p50=None, hub=None, st=None: {"throughput": t, "p50_us": p50, "p99_us": p50 and p50 * 2,  # noqa: E731
                                                 "hub_block_max_ms": hub, "stable": st}
    five = [w(1.0, 10, 9.0), w(100.0, 20), w(200.0, 30, 1.0), w(300.0, None), w(400.0, 50, None, True)]
    assert bench.summarize(five) == {"throughput": 300.0, "p50_us": 40.0, "p99_us": 80.0,
                                     "hub_block_max_ms": 9.0, "stable": True}
    four = five[:4]  # the first is dropped, three are left
    assert bench.summarize(four)["throughput"] == 200.0 and bench.summarize(four)["stable"] is False
    three = five[:3]  # three windows: none is warm-up
    assert bench.summarize(three)["throughput"] == 100.0
    assert bench.summarize([w(5.0)])["hub_block_max_ms"] == 0
    assert bench.summarize([]) == {"throughput": None, "p50_us": None, "p99_us": None,
                                   "hub_block_max_ms": None, "stable": False}


def test_knee_edge_cases():
    assert bench.knee([]) is None
    assert bench.knee([{"point": 1, "throughput": None}, {"point": 2, "throughput": 0}]) is None
    rising = [{"point": c, "throughput": 100.0 * c} for c in (1, 2, 4)]
    assert bench.knee(rising)["point"] == 4, "still buying throughput: the last point"
    flat = [{"point": 1, "throughput": 100.0}, {"point": 2, "throughput": 109.0}]
    assert bench.knee(flat)["point"] == 1
    failed_middle = [{"point": 1, "throughput": 100.0}, {"point": 2, "throughput": None},
                     {"point": 4, "throughput": 300.0}]
    assert bench.knee(failed_middle)["point"] == 4, "a point without figures is skipped"
    behind = [{"point": 100, "throughput": 50.0, "p99_us": 100}]
    assert bench.knee(behind, open_loop=True) is None
    no_base = [{"point": 100, "throughput": 99.0, "p99_us": None},
               {"point": 200, "throughput": 195.0, "p99_us": 10**9}]
    assert bench.knee(no_base, open_loop=True)["point"] == 200, "no p99 at the base: throughput alone"


# ================================================================ config

@pytest.mark.parametrize("overrides, words", [
    ({"engine": "tensorrt"}, "engine must be one of"),
    ({"stop_strategy": "kill"}, "stop_strategy must be one of"),
    ({"restart": "never"}, "restart must be one of"),
    ({"workload.name": "burst"}, "workload.name must be one of"),
    ({"workload.arrivals": "uniform"}, "arrivals must be one of poisson, constant"),
    ({"workload.seconds": 0}, "must be > 0"),
    ({"workload.window_seconds": -1.0}, "must be > 0"),
    ({"workload.users": 0}, "users and in_flight >= 1"),
    ({"workload.in_flight": 0}, "users and in_flight >= 1"),
    ({"workload.rate": 0.0}, "must be > 0"),
    ({"cycles": 0}, "cycles must be >= 1"),
    ({"requests": -1}, "requests >= 0"),
    ({"exit_timeout": -5}, "exit_timeout >= 0"),
    ({"model": "tensorflow"}, "model must be one of"),
    ({"thresholds.min_finalize_success": -0.1}, "fraction"),
    ({"cycles": True}, "cycles must be int"),
    ({"cycles": 2.5}, "cycles must be int"),
    ({"retain": 1}, "retain must be one of none, last-response, last-array"),
    ({"thresholds.allow_leaks": "yes"}, "allow_leaks must be bool"),
    ({"thresholds": 3}, "thresholds must be a table"),
    ({"workload.nope": 1}, "unknown key 'nope'"),
])
def test_bad_options_are_one_rig_error(overrides, words):
    with pytest.raises(RigError) as e:
        load(None, overrides)
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_options_coerce_and_skip_none():
    cfg = load(None, {"exit-timeout": 5, "request_timeout": 2, "workload.rate": 10, "cycles": None,
                      "model": "tensorflow", "model_repository": "/models"})
    assert cfg.exit_timeout == 5 and cfg.cycles == 1
    assert cfg.request_timeout == 2.0 and isinstance(cfg.request_timeout, float)
    assert cfg.workload.rate == 10.0 and isinstance(cfg.workload.rate, float)
    assert cfg.model == "tensorflow", "any model name goes with a repository of one's own"


def test_to_toml_escapes_and_omits_none():
    cfg = RunConfig(model_repository='C:\\models "x"', results="r")
    text = cfg.to_toml()
    keys = [line.split(" = ")[0] for line in text.splitlines() if " = " in line]
    assert "runtime" not in keys and "rate" not in keys and "max_stop_latency_s" not in keys  # None: left out
    assert "dynamic_batching = false" in text and "[workload]" in text and "[thresholds]" in text
    again = from_toml_text(text)
    assert again == cfg and again.model_repository == 'C:\\models "x"'


def test_stored_config_is_validated_too():
    with pytest.raises(RigError, match="retain must be one of"):
        from_toml_text('retain = "forever"\n')
    with pytest.raises(RigError, match="stored config: unknown key"):
        from_toml_text("speed = 1\n")


# ================================================================ store

def test_every_column_round_trips(tmp_path):
    store = Store(tmp_path)
    row = cycle_row(7, start_latency_s=0.125, stop_latency_s=None, finalize_expected=3, outputs_ok=False,
                    throughput=1e6, worker_rss_bytes=2**40, stop_error="Exit timeout — ünïcode",
                    detail=None, cleanup="ok")
    store.write("cycles", [row], "2.51.0", "c000007", date="2026-02-03")
    df = pd.read_parquet(tmp_path / "cycles")
    assert len(df) == 1
    got = df.iloc[0]
    for f in dataclasses.fields(CycleRow):
        want = getattr(row, f.name)
        value = got[f.name]
        if want is None:
            assert pd.isna(value), f.name
        else:
            assert value == want, f.name
    assert str(got["triton_version"]) == "2.51.0" and str(got["date"]) == "2026-02-03"
    back = store.read("cycles", "r1")
    assert back.loc[0, "stop_error"] == "Exit timeout — ünïcode"


def test_runs_windows_and_filters(tmp_path):
    store = Store(tmp_path)
    run = RunRow(run_id="r1", started_at="t", command="soak", host="h", cpu="c", gpu=None, engine="capi",
                 runtime="embedded-0.7.0", model="numpy", config="cycles = 2\n", rig_version="0.1.0",
                 python_version="3.11.0")
    store.write("runs", [run], "2.51.0", "run")
    stored = store.run_row("r1")
    assert stored["config"] == "cycles = 2\n" and stored["command"] == "soak"
    assert pd.isna(stored["gpu"]), "a missing value reads back missing"
    assert store.run_row("nope") is None
    windows = [WindowRow(run_id="r1", cycle=1, window=i, engine="capi", model="numpy", tool="rig", start_s=i * 1.0,
                         length_s=1.0, mode="closed", concurrency=2, rate=None, requests=10 * i, errors=0,
                         throughput=10.0 * i, p50_us=None, p90_us=None, p99_us=None, p999_us=None, max_us=None,
                         mean_us=None, stable=None, hub_block_max_ms=None, worker_rss_bytes=None,
                         gpu_memory_bytes=None, gpu_utilization=None, histogram=None) for i in (1, 2, 3)]
    store.write("windows", windows, "2.51.0", "c000001")
    w = store.read("windows", "r1")
    assert sorted(w.window) == [1, 2, 3] and sorted(w.requests) == [10, 20, 30]
    assert len(store.read("windows", "r2")) == 0


def test_empty_store_reads_as_empty_frames(tmp_path):
    store = Store(tmp_path / "none")
    for table, row_type in (("cycles", CycleRow), ("runs", RunRow), ("windows", WindowRow)):
        df = store.read(table)
        assert len(df) == 0 and list(df.columns) == [f.name for f in dataclasses.fields(row_type)]
    assert store.cycles_done("r1") == set()


def test_a_unit_written_again_replaces_the_first(tmp_path):
    store = Store(tmp_path)
    first = store.write("cycles", [cycle_row(1, outcome="hung")], "2.51.0", "c000001")
    second = store.write("cycles", [cycle_row(1, outcome="clean")], "2.51.0", "c000001")
    assert first == second
    assert list(store.read("cycles").outcome) == ["clean"]


def test_partition_names(tmp_path):
    store = Store(tmp_path)
    a = store.write("cycles", [cycle_row(1)], "25.01/py3", "c000001", date="2026-01-01")
    b = store.write("cycles", [cycle_row(2)], "", "c000002", date="2026-01-01")
    assert a.parent.relative_to(tmp_path).as_posix() == "cycles/triton_version=25.01_py3/date=2026-01-01"
    assert b.parent.name == "date=2026-01-01" and b.parent.parent.name == "triton_version=unknown"
    assert a.name == "r1-c000001.parquet"
    assert sorted(store.read("cycles").triton_version) == ["25.01_py3", "unknown"]


def test_a_write_that_dies_midway_leaves_no_partial_file_where_readers_look(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.write("cycles", [cycle_row(1)], "2.51.0", "c000001")
    real = pq.write_table

    def dies_halfway(table, where, **kw):
        real(table, where, **kw)
        data = Path(where).read_bytes()
        Path(where).write_bytes(data[: len(data) // 2])  # what a SIGKILL mid-write leaves
        raise OSError("killed")

    monkeypatch.setattr(pq, "write_table", dies_halfway)
    with pytest.raises(OSError):
        store.write("cycles", [cycle_row(2)], "2.51.0", "c000002")
    monkeypatch.undo()
    files = list((tmp_path / "cycles").rglob("*"))
    visible = [f for f in files if f.is_file() and not f.name.startswith((".", "_"))]
    assert [f.name for f in visible] == ["r1-c000001.parquet"], "no half file under a reader's name"
    assert not [f for f in files if f.name.startswith(".")], "a write that fails removes its temporary file"
    # a SIGKILL would leave the hidden temporary file: readers never look at it
    (visible[0].parent / ".r1-c000002.parquet.dead.tmp").write_bytes(b"PAR1 cut short")
    assert store.cycles_done("r1") == {1}
    assert len(pd.read_parquet(tmp_path / "cycles")) == 1  # pandas skips the hidden file too


# ================================================================ probes (no GPU, no core)

def _fake_stub(**popen) -> subprocess.Popen:
    """A process the probes take for a backend stub: argv[0] is the stub's name."""
    return subprocess.Popen([probes.STUB_NAME, "60"], executable=shutil.which("sleep"), **popen)


def test_stubs_are_found_below_a_pid_and_in_a_group_then_killed():
    plain = subprocess.Popen([shutil.which("sleep"), "60"])
    stub = _fake_stub(start_new_session=True)
    try:
        mine = [p.pid for p in probes.stubs_of(os.getpid())]
        assert stub.pid in mine and plain.pid not in mine
        assert [p.pid for p in probes.stubs_in_group(stub.pid)] == [stub.pid]
        assert probes.stubs_in_group(plain.pid) == []
        assert probes.total_rss(probes.stubs_of(os.getpid())) > 0
        assert probes.kill_processes(probes.stubs_in_group(stub.pid)) == 1
        assert not psutil.pid_exists(stub.pid), "killed and reaped"
        assert stub.pid not in [p.pid for p in probes.stubs_of(os.getpid())]
    finally:
        for p in (plain, stub):
            p.kill()
            p.wait()
    assert probes.stubs_of(2**22 + 1) == [] and probes.total_rss([]) is None


def test_shared_memory_regions_mapped_present_and_removed():
    name = f"{probes.SHM_PREFIX}_rigtest_{uuid.uuid4().hex[:8]}"
    path = probes.SHM_DIR / name
    if not probes.SHM_DIR.is_dir():
        pytest.skip(f"no {probes.SHM_DIR} here")
    path.write_bytes(b"\0" * 4096)
    try:
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 4096) as m:
            assert name in probes.shm_regions_mapped([os.getpid()])
            assert name not in probes.orphaned_shm_regions(), "mapped by a live process"
            assert probes.shm_regions_present({name, name + "_gone"}) == {name}
            path.unlink()  # the mapping outlives the name: /proc shows it "(deleted)"
            assert name in probes.shm_regions_mapped([os.getpid()])
            assert probes.shm_regions_present({name}) == set()
            m[0] = 1
        path.write_bytes(b"\0")
        assert name in probes.orphaned_shm_regions(), "nobody maps it any more"
        assert probes.remove_shm_regions({name}) == 1 and not path.exists()
        assert probes.remove_shm_regions({name}) == 0
    finally:
        path.unlink(missing_ok=True)
    assert probes.shm_regions_mapped([2**22 + 1]) == set()


def test_process_stats():
    s = probes.process_stats()
    assert s["rss_bytes"] > 10**6 and s["fds"] >= 3 and s["threads"] >= 1
    assert probes.process_stats(2**22 + 1) == {"rss_bytes": None, "fds": None, "threads": None}


def test_gpu_says_why_when_there_is_none():
    g = probes.Gpu()
    if g.available:
        assert isinstance(g.memory_used(), int) and g.name
    else:
        assert g.why and g.memory_used() is None and g.utilization() is None
    assert probes.gpu() is probes.gpu()


def test_outcomes_and_option_values_are_literals_the_config_enforces():
    import typing

    from rig import config as config_mod
    from rig.cycle import OUTCOMES, Outcome

    assert tuple(OUTCOMES) == typing.get_args(Outcome)
    assert config_mod.RETAIN == ("none", "last-response", "last-array")
    with pytest.raises(RigError, match="retain must be one of none, last-response, last-array"):
        config_mod.load(None, {"retain": "everything"})
    with pytest.raises(RigError, match="arrivals must be one of poisson, constant"):
        config_mod.load(None, {"workload.arrivals": "bursty"})


def test_redact_hides_the_credentials_a_uri_or_option_carries():
    from rig.text import redact

    text = ('results = "s3://AKIA:pw0@minio:9000/b/p?access_key=AKIA1&secret_key=a/b+c'
            '&session_token=T0KEN9&region=eu"')
    out = redact(text)
    for secret in ("pw0", "AKIA1", "a/b+c", "T0KEN9"):
        assert secret not in out
    assert "region=eu" in out and "s3://AKIA:***@minio:9000/b/p" in out
    assert redact("results = \"/tmp/plain folder\"") == "results = \"/tmp/plain folder\""


def test_bench_points_are_the_median_over_repeats_of_each_repeats_last_windows():
    """The plot's figures are the printed table's: per repeat (cycle) the median of its last
    3 windows, then the median over repeats, never windows of several repeats pooled."""
    import pandas as pd

    from rig.analysis.plots import bench_points

    rows = []
    for cycle, level in ((1, 100.0), (2, 200.0), (3, 400.0)):  # three repeats of one point
        for window in range(1, 5):  # window 1 is warm-up
            rows.append({"tool": "rig", "mode": "closed", "concurrency": 4, "rate": None, "cycle": cycle,
                         "window": window, "throughput": 1.0 if window == 1 else level + window,
                         "p50_us": 10.0, "p99_us": 20.0})
    pts = bench_points(pd.DataFrame(rows))
    assert len(pts) == 1 and pts.throughput.iloc[0] == 203.0  # median of 103, 203, 403


def test_finalize_markers_count_only_from_this_cycles_own_stubs():
    from rig.evidence import summarize_markers

    mine = [{"pid": 10, "instance": "m_0", "phase": "init", "t_mono": 1.0},
            {"pid": 10, "instance": "m_0", "phase": "finalize_end", "t_mono": 2.0}]
    stranger = [{"pid": 99, "instance": "m_0", "phase": "finalize_end", "t_mono": 2.0},   # another process
                {"pid": 10, "instance": "m_9", "phase": "finalize_end", "t_mono": 2.0}]   # never initialized
    s = summarize_markers(mine + stranger, t_stop_returned=3.0)
    assert s["finalize_expected"] == 1 and s["finalize_before_stop"] == 1 and s["finalize_after_stop"] == 0

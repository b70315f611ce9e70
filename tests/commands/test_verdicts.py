"""A soak's tally, its judgement against the thresholds and the allowed verdicts, its summary and
per-cycle lines; the gate's new-verdict rule."""

from __future__ import annotations

import collections

import pytest

from helpers import cycle_row
from rig.workflows import soak
from rig.parent.config import RunConfig, Thresholds
from rig.common.errors import RigError


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


def test_a_slowdown_over_a_short_load_needs_its_p50_to_rise_by_the_floor():
    """A 100-request load that lasts 0.18 s read 134 % slower at its end from one stall: its p50 rose
    by 1.6 ms, under the floor, so not slowing; the slows-down control's 10 ms rise is."""
    from rig.contract.verdicts import MIN_SLOWDOWN_US, classify_growth

    row = {"outcome": "clean", "requests": 100, "slowdown_pct": 382.0, "slowdown_low_pct": 134.0,
           "p50_change_pct": 293.0, "throughput_change_pct": -79.0, "stub_growth_low_b": 0.0}
    assert classify_growth({**row, "p50_us_per_1k": 15_900.0}) == "ok"
    assert classify_growth({**row, "p50_us_per_1k": 103_000.0}) == "slowing"
    assert classify_growth({**row, "p50_us_per_1k": MIN_SLOWDOWN_US * 10.0}) == "slowing"  # exactly the floor
    assert classify_growth({**row, "p50_us_per_1k": None}) == "slowing"  # no fit to read: the bound alone

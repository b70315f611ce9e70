"""Open-loop arrival schedules, perf_analyzer's stability rule, and bench's figures: its points,
the medians of a point's windows, the knee of a sweep, the plot's points."""

from __future__ import annotations

import numpy as np
import pytest

from rig.workflows import bench
from rig.analysis.sweeps import stable
from rig.common.errors import RigError
from rig.worker.load.schedule import arrival_times


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


def test_a_sweep_in_rounds_keeps_the_points_up_to_the_first_over_the_bound_in_round_one():
    """Repeats are rounds of the whole sweep: the first round decides where a --p99-bound-ms sweep
    stops (the point over the bound measured again, those after it not)."""
    from rig.workflows.bench import _within_bound

    got = {1.0: {"rig": [{"p99_us": 300.0}]}, 2.0: {"rig": [{"p99_us": 1500.0}]}, 4.0: {"rig": [{"p99_us": 900.0}]}}
    said: list[str] = []
    assert _within_bound([1.0, 2.0, 4.0], got, 1.0, said.append) == [1.0, 2.0]
    assert said and "round 1" in said[0]
    assert _within_bound([1.0, 2.0, 4.0], got, None, said.append) == [1.0, 2.0, 4.0]
    assert _within_bound([1.0, 2.0, 4.0], got, 2.0, said.append) == [1.0, 2.0, 4.0]
    no_p99 = {1.0: {"rig": []}, 2.0: {"rig": [{"p99_us": None}]}}
    assert _within_bound([1.0, 2.0], no_p99, 1.0, said.append) == [1.0, 2.0]

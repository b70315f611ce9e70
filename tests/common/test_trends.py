"""The growth verdict's pure parts, no core: the slopes and trends (rig.common.trends), the verdict
itself (verdicts.classify_growth) and the cycle's observers (rig.worker.observers). The same behaviour
on a real core, through the rig as users run it: tests/e2e/test_growth.py."""

from __future__ import annotations

import inspect
import json
import types

import numpy as np
import pytest

from rig.common import trends
from rig.contract.messages import Samples
from rig.contract.verdicts import MAX_MEMORY_GROWTH_B, MIN_GROWTH_B, WORKER_FLOOR_B_PER_S, classify_growth
from rig.worker import observers
from rig.worker.clients import clientside

MIB = 1 << 20


# ------------------------------------------------------------------ theil_sen


def test_theil_sen_of_a_line_is_the_line_with_a_closed_interval():
    x = np.arange(10.0)
    s = trends.theil_sen(x, 2 * x + 1)
    assert (s.slope, s.low, s.high) == pytest.approx((2.0, 2.0, 2.0))
    assert s.intercept == pytest.approx(1.0)
    assert (s.n, s.span) == (10, 9.0)


def test_theil_sen_is_moved_little_by_one_outlier_where_least_squares_follows_it():
    x = np.arange(12.0)
    y = 2 * x + 1
    y[7] = 500.0  # one stray sample: an allocator's arena, a neighbour's burst
    s = trends.theil_sen(x, y)
    assert s.slope == pytest.approx(2.0, abs=1e-9)
    assert s.low <= 2.0 <= s.high
    assert np.polyfit(x, y, 1)[0] > 5  # what a least-squares slope would have read


def test_theil_sen_needs_four_finite_points_and_spread():
    assert trends.theil_sen([0, 1, 2], [0, 1, 2]) is None
    assert trends.theil_sen([1, 1, 1, 1, 1], [0, 1, 2, 3, 4]) is None  # no spread in x
    assert trends.theil_sen([0, 1, 2, np.nan, 4], [0, 1, 2, 3, np.inf]) is None  # 3 finite points left
    s = trends.theil_sen([0, 1, 2, np.nan, 4, 5], [0, 1, 2, 3, 4, 5])
    assert s.n == 5 and s.slope == pytest.approx(1.0)


# ------------------------------------------------------------------ requests_at, warmup_end


def test_requests_at_reads_the_windows_cumulative_counts_linearly_inside_each():
    got = trends.requests_at([0.0, 0.5, 1.0, 2.5, 3.0, 9.0], window_ends=[1.0, 2.0, 3.0],
                             window_requests=[10, 20, 30], t_start=0.0, t_end=3.0, total=None)
    assert list(got) == pytest.approx([0, 5, 10, 45, 60, 60])  # held at the last count past the end


def test_requests_at_without_windows_spreads_the_total_over_the_load():
    got = trends.requests_at([0.0, 5.0, 10.0, 12.0, -1.0], [], [], t_start=0.0, t_end=10.0, total=100)
    assert list(got) == pytest.approx([0, 50, 100, 100, 0])
    assert trends.requests_at([1.0], [], [], 0.0, 10.0, total=None) is None
    assert trends.requests_at([1.0], [], [], 5.0, 5.0, total=100) is None  # no length to spread over


def test_the_warm_up_ends_with_the_first_window_or_a_fifth_of_the_load():
    assert trends.warmup_end(0.0, 10.0, [3.0, 1.0, 2.0]) == 1.0
    assert trends.warmup_end(0.0, 10.0, [1.0]) == pytest.approx(2.0)  # one window: no first end to trust
    assert trends.warmup_end(5.0, 15.0, []) == pytest.approx(7.0)


# ------------------------------------------------------------------ process_growth


def _sample(k, process="worker", model=None, instance=None, pid=1, rss=None, gpu=None, requests=None):
    return dict(sample=k, t=float(k), requests=float(requests if requests is not None else 100 * k),
                process=process, model=model, instance=instance, pid=pid, rss_bytes=rss, gpu_bytes=gpu)


def test_process_growth_sums_a_models_instances_sample_by_sample():
    samples = []
    for k in range(10):  # 100 requests a sample; each instance keeps 500 B a request
        samples.append(_sample(k, rss=50 * MIB))
        for i in (0, 1):
            samples.append(_sample(k, "stub", "m", f"m_0_{i}", pid=10 + i, rss=40 * MIB + i * MIB + 500 * 100 * k))
    got = trends.process_growth(samples, after_t=0.0)
    assert set(got) == {"worker", "stub m"}
    assert got["stub m"].slope == pytest.approx(2 * 500 * 1000)  # both instances: 1 MB per 1,000 requests
    assert got["worker"].slope == pytest.approx(0.0)
    assert got["stub m"].span == pytest.approx(0.9)  # thousands of requests covered


def test_process_growth_reads_rss():
    samples = [_sample(k, "stub", "m", rss=40 * MIB + 1_000_000 * k) for k in range(8)]
    assert trends.process_growth(samples, 0.0)["stub m"].slope == pytest.approx(10_000_000)
    samples = [_sample(k, "stub", "m", rss=None) for k in range(8)]  # nothing read: no slope
    assert "stub m" not in trends.process_growth(samples, 0.0)


def test_process_growth_leaves_out_the_warm_up_and_incomplete_samples_and_adds_the_gpu():
    samples = [_sample(0, rss=1 * MIB), _sample(1, rss=300 * MIB)]  # the warm-up's jump, before after_t
    samples += [_sample(k, rss=400 * MIB + 1000 * 100 * k, gpu=1000 + 50 * 100 * k) for k in range(2, 12)]
    for k in range(2, 12):  # a model of two instances whose second died at sample 6 and came back at 8
        samples.append(_sample(k, "stub", "m", "m_0_0", pid=10, rss=10 * MIB + 200 * 100 * k))
        if k not in (6, 7):
            samples.append(_sample(k, "stub", "m", "m_0_1", pid=11, rss=10 * MIB + 200 * 100 * k))
    got = trends.process_growth(samples, after_t=2.0)
    assert got["worker"].slope == pytest.approx(1000 * 1000)
    assert got["gpu"].slope == pytest.approx(50 * 1000)
    assert got["stub m"].slope == pytest.approx(2 * 200 * 1000)  # read over the 8 complete samples
    assert got["stub m"].n == 8
    # a sample with no request count (no windows, no total) is no point
    assert trends.process_growth([dict(s, requests=None) for s in samples], 2.0) == {}


def test_growth_columns_name_the_stub_model_whose_whole_interval_is_highest():
    s = trends.Slope
    growth = {"worker": s(1000.0, 500.0, 1500.0, 0.0, 10, 2.0), "stub a": s(9e6, 1e3, 2e7, 0.0, 10, 1.0),
              "stub b": s(5e6, 4e6, 6e6, 0.0, 10, 1.5)}
    got = trends.growth_columns(growth, rate=400.0)
    assert got["stub_growth_model"] == "b" and got["stub_growth_per_1k_b"] == 5e6
    assert got["worker_growth_per_s_b"] == pytest.approx(1000.0 * 400 / 1000)
    assert got["growth_requests"] == pytest.approx(2000.0)
    assert json.loads(got["growth_by_process"])["stub a"] == [9e6, 1e3, 2e7]
    assert "gpu_growth_per_1k_b" not in got and trends.growth_columns({}) == {}
    assert trends.growth_columns(growth)["worker_growth_per_s_b"] is None  # no rate known


# ------------------------------------------------------------------ window_trend, run_trend


def _windows(p50, throughput=None, length=1.0, drain=None):
    throughput = throughput if throughput is not None else [1e6 / v for v in p50]
    out = [dict(window=i + 1, start_s=i * length, length_s=length, requests=int(round(t * length)),
                throughput=t, p50_us=p, p99_us=2 * p) for i, (p, t) in enumerate(zip(p50, throughput))]
    if drain is not None:
        out.append(dict(window=len(out) + 1, start_s=len(out) * length, length_s=drain, requests=3,
                        throughput=3 / drain, p50_us=50 * p50[-1], p99_us=100 * p50[-1]))
    return out


def test_a_flat_load_shows_no_slowdown():
    got = trends.window_trend(_windows([1000.0] * 10))
    assert got["trend_windows"] == 10
    assert got["slowdown_pct"] == pytest.approx(0.0, abs=1e-9)
    assert got["slowdown_low_pct"] <= 0.0
    assert got["throughput_change_pct"] == pytest.approx(0.0, abs=1e-9)
    assert got["p50_us_per_1k"] == pytest.approx(0.0, abs=1e-9)


def test_a_rising_load_shows_its_slowdown_with_an_interval_above_the_threshold():
    p50 = list(np.geomspace(1000.0, 3000.0, 10))  # p50 trebles: 200 % slower at the end
    got = trends.window_trend(_windows(p50))
    assert got["p50_change_pct"] == pytest.approx(200.0)
    assert got["slowdown_pct"] >= 200.0 - 1e-6  # throughput's fall reads at least as slow
    assert got["slowdown_low_pct"] > 50.0
    assert got["throughput_change_pct"] < -50.0
    assert got["p50_us_per_1k"] > 0


def test_a_noisy_flat_load_stays_under_the_threshold():
    rng = np.random.default_rng(7)
    p50 = list(1000.0 * (1 + 0.15 * rng.standard_normal(16)))
    p50[5] = 9000.0  # one window a noisy neighbour slowed
    got = trends.window_trend(_windows(p50))
    assert got["trend_windows"] == 16
    assert abs(got["slowdown_pct"]) < 25.0
    assert got["slowdown_low_pct"] < 50.0


def test_a_drain_window_of_odd_length_is_left_out():
    flat = [1000.0] * 8
    got = trends.window_trend(_windows(flat, drain=0.2))  # 1/5 of the others, p50 fifty times: the drain
    assert got["trend_windows"] == 8 and got["slowdown_pct"] == pytest.approx(0.0, abs=1e-9)
    assert trends.window_trend(_windows(flat, drain=3.0))["trend_windows"] == 8  # too long as well
    assert trends.window_trend(_windows(flat, drain=1.2))["trend_windows"] == 9  # a window like the others
    assert trends.window_trend(_windows(flat), skip=2)["trend_windows"] == 6
    # windows that completed nothing are not points
    empty = _windows(flat) + [dict(window=9, start_s=8.0, length_s=1.0, requests=0, throughput=0.0, p50_us=None)]
    assert trends.window_trend(empty)["trend_windows"] == 8


def test_a_load_whose_latency_explodes_is_read_as_slowing():
    """Measured (scores_history under an open loop of 200 requests a second, 0.5 s windows): p50
    rose from 2 ms to 352 ms as the requests queued. A straight line over such a rise starts
    below zero; the change is read in log space (a ratio), so it is read whole."""
    p50 = [1998.0, 2683.0, 2659.0, 5039.0, 16703.0, 90879.0, 351743.0]
    throughput = [165.0, 213.0, 166.0, 216.0, 180.0, 114.0, 53.0]
    got = trends.window_trend(_windows(p50, throughput, length=0.5))
    assert got["p50_change_pct"] is not None
    assert got["slowdown_low_pct"] > 50.0


def test_too_few_windows_give_no_trend():
    assert trends.window_trend(_windows([1000.0, 2000.0, 3000.0])) == {"trend_windows": 3}
    assert trends.window_trend([]) == {"trend_windows": 0}


def test_slower_reads_a_throughput_fall_as_the_same_slowdown():
    # throughput a third lower at the end: 50 % slower; its smallest fall is the conservative bound
    got = trends.slower(None, (-100 / 3, -50.0, -20.0))
    assert got == pytest.approx((50.0, 25.0))
    assert trends.slower((10.0, 5.0, 15.0), (-100 / 3, -50.0, -20.0)) == pytest.approx((50.0, 25.0))
    assert trends.slower((80.0, 60.0, 90.0), (-100 / 3, -50.0, -20.0)) == (80.0, 60.0)
    assert trends.slower(None, None) is None
    assert trends.change([0, 1, 2, 3], [0, -1, -2, -3]) is None  # no positive start to read a % of


def test_run_trend_reads_the_slowdown_across_cycles_per_minute():
    load_s = [60.0 * k for k in range(5)]  # five cycles, four minutes of load between the first and last
    got = trends.run_trend(load_s, [100.0] * 5, list(np.geomspace(1000.0, 2000.0, 5)))
    assert got["cycles"] == 5
    assert got["p50_change_pct"] == pytest.approx(100.0)
    assert got["slowdown_pct"] == pytest.approx(100.0)
    assert got["pct_per_min"] == pytest.approx(25.0)
    flat = trends.run_trend(load_s, [100.0] * 5, [1000.0] * 5)
    assert flat["slowdown_pct"] == pytest.approx(0.0, abs=1e-9)
    short = trends.run_trend([0.0, 60.0], [100.0, 50.0], [1000.0, 2000.0])
    assert short["cycles"] == 2 and short["throughput_change_pct"] is None and "slowdown_pct" not in short


# ------------------------------------------------------------------ classify_growth


def _row(**kw):
    row = dict(outcome="clean", requests=1000)
    row.update(kw)
    return row


def test_a_stub_that_grows_past_the_threshold_is_leaking():
    # 64 KiB a request over 900 requests after the warm-up: ~59 MB
    row = _row(stub_growth_low_b=65_000_000.0, growth_requests=900.0, worker_growth_low_b=0.0,
               worker_growth_per_s_b=0.0)
    assert classify_growth(row) == "leaking"
    assert classify_growth(row, max_memory_growth_b=None) == "ok"  # not judged
    assert classify_growth(row, max_memory_growth_b=70_000_000.0) == "ok"  # under a threshold set higher


def test_a_worker_under_its_own_floor_per_second_is_not_leaking():
    row = _row(worker_growth_low_b=1_000_000.0, worker_growth_per_s_b=WORKER_FLOOR_B_PER_S / 2,
               growth_requests=50_000.0)
    assert classify_growth(row) == "ok"
    assert classify_growth(dict(row, worker_growth_per_s_b=2.0 * WORKER_FLOOR_B_PER_S)) == "leaking"


def test_growth_under_min_growth_over_the_whole_load_is_not_leaking():
    # 1 MB per 1,000 requests, read over 1,000 requests: 1 MB in all, a short load's fresh pages
    row = _row(stub_growth_low_b=1_000_000.0, growth_requests=1000.0)
    assert 1_000_000.0 > MAX_MEMORY_GROWTH_B and 1_000_000.0 * 1000 / 1000 < MIN_GROWTH_B
    assert classify_growth(row) == "ok"
    assert classify_growth(dict(row, growth_requests=10_000.0)) == "leaking"  # 10 MB in all


def test_a_slowdown_past_the_threshold_over_its_whole_interval_is_slowing():
    assert classify_growth(_row(slowdown_pct=200.0, slowdown_low_pct=60.0)) == "slowing"
    read = dict(worker_growth_low_b=0.0)  # ok says memory was read too
    assert classify_growth(_row(slowdown_pct=200.0, slowdown_low_pct=40.0, **read)) == "ok"  # its interval reaches under
    assert classify_growth(_row(slowdown_low_pct=60.0, **read), max_slowdown_pct=None) == "ok"
    assert classify_growth(_row(slowdown_low_pct=60.0, **read), max_slowdown_pct=80.0) == "ok"
    assert classify_growth(_row(slowdown_low_pct=40.0)) == "not_measured"  # no memory read: no ok
    # both: leaking first (memory runs a node out)
    both = _row(slowdown_low_pct=60.0, stub_growth_low_b=65_000_000.0, growth_requests=900.0)
    assert classify_growth(both) == "leaking"


def test_nothing_read_is_not_measured():
    assert classify_growth(_row()) == "not_measured"
    assert classify_growth(_row(requests=None, stub_growth_low_b=65e6, growth_requests=900.0)) == "not_measured"
    assert classify_growth(_row(worker_growth_low_b=0.0)) == "ok"  # one measured process is a reading
    assert classify_growth(_row(slowdown_low_pct=-5.0)) == "not_measured"  # the memory unread (--memory-samples off)


def test_a_cycle_whose_load_failed_is_not_measured():
    row = _row(outcome="load_failed", stub_growth_low_b=65e6, growth_requests=900.0, slowdown_low_pct=90.0)
    assert classify_growth(row) == "not_measured"


# ------------------------------------------------------------------ observers


def _protocol_methods():
    return {n: f for n, f in vars(observers.CycleObserver).items() if callable(f) and not n.startswith("_")}


ALL_OBSERVERS = [observers.Observer, observers.ProcessMemory, *observers.CLIENT_OBSERVERS.values()]


def test_the_protocol_has_every_phase():
    assert set(_protocol_methods()) == {"load_started", "tick", "load_ended", "before_stop", "settled", "released", "stopped"}


@pytest.mark.parametrize("cls", ALL_OBSERVERS, ids=lambda c: c.__name__)
def test_every_observer_has_the_protocols_methods_with_its_signatures(cls):
    assert isinstance(cls.sets_scene, bool)
    for name, proto in _protocol_methods().items():
        method = getattr(cls, name)
        assert callable(method), name
        assert list(inspect.signature(method).parameters) == list(inspect.signature(proto).parameters), name


def test_the_observers_that_set_the_scene_for_the_stop():
    scene = {c.__name__ for c in ALL_OBSERVERS if c.sets_scene}
    assert scene == {"RefusedRequests", "LoadingAtStop", "InFlightAtStop", "StubKilled", "LoadMissing",
                     "ReloadInPlace", "ExitAfterStop", "SequencesAtStop"}
    # a fresh observer with nothing in flight never holds the release
    assert all(c().settled() for c in ALL_OBSERVERS)


def test_for_spec_picks_the_clients_observer_beside_the_sampler():
    assert set(observers.CLIENT_OBSERVERS) == set(clientside.CLIENTS) - {"none"}
    for client, cls in observers.CLIENT_OBSERVERS.items():
        got = observers.for_spec(types.SimpleNamespace(client=client))
        assert [type(o) for o in got] == [observers.ProcessMemory, cls]
        assert [type(o) for o in observers.for_spec(types.SimpleNamespace(client=client), sample=False)] == [cls]
    assert [type(o) for o in observers.for_spec(types.SimpleNamespace(client="none"))] == [observers.ProcessMemory]
    assert observers.for_spec(types.SimpleNamespace(client="none"), sample=False) == []


def test_process_memory_reads_its_samples_at_the_loads_end():
    """ProcessMemory's end of load, on samples it did not take: each sample's request count from
    the windows, the growth columns to the row, the samples (``t_s`` from the load's start, none
    after its last window) to the channel."""
    pm = observers.ProcessMemory()
    pm._me = object()  # the load started
    t0 = 100.0
    windows = [dict(requests=100, errors=0, monotonic_end=t0 + k) for k in range(1, 11)]
    for k in range(12):  # one sample every 0.5 s; the last two after the load's end
        t = t0 + 0.5 * k if k < 11 else t0 + 20.0
        pm.samples.append(dict(sample=k, t=t, process="worker", model=None, instance=None, pid=1,
                               rss_bytes=60 * MIB, gpu_bytes=None))
        pm.samples.append(dict(sample=k, t=t, process="stub", model="m", instance="m_0_0", pid=2,
                               rss_bytes=40 * MIB + 50 * 1024 * k, gpu_bytes=None))
    sent = []
    ctx = observers.Context(engine=None, spec=None, inputs={}, cycle=3, unload_all=lambda t: None,
                            send=sent.append, windows=windows, t_load=t0, t_load_end=t0 + 10.5)
    row = {"requests": 1000}
    pm.load_ended(ctx, row)
    assert row["memory_samples"] == 11
    # 50 KiB a sample, 50 requests a sample: 1 KiB a request
    assert row["stub_growth_per_1k_b"] == pytest.approx(1024 * 1000)
    assert row["stub_growth_model"] == "m"
    assert row["worker_growth_per_1k_b"] == pytest.approx(0.0)
    assert row["worker_growth_per_s_b"] == pytest.approx(0.0)
    assert len(sent) == 1 and isinstance(sent[0], Samples) and sent[0].cycle == 3
    rows = sent[0].rows
    assert len(rows) == 22 and all("t" not in r for r in rows)
    assert [r["t_s"] for r in rows if r["process"] == "stub"] == pytest.approx([0.5 * k for k in range(11)])
    assert [r["requests"] for r in rows if r["process"] == "stub"] == pytest.approx([50.0 * k for k in range(11)])

"""Workloads on the real core: Locust in the worker, exact latency, open vs closed loop, windows."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import cycles, rig, spawn
from rig.analysis.sweeps import stable
from rig.worker.load.schedule import arrival_times


DELAY_MS = 20  # the model's execute delay in the latency tests


def windows(res):
    return pd.read_parquet(res / "windows")


@pytest.mark.slow
def test_slow_model_shows_its_delay_in_p50(tmp_path, runtime):
    """Positive control: execute sleeps 20 ms, so the rig's p50 reads at least 20 ms and well under
    twice that (the rig adds its own overhead, which a busy host stretches; it never removes the
    delay)."""
    res = tmp_path / "r"
    p = rig("cycle", "--execute-delay-ms", str(DELAY_MS), "--workload", "steady", "--users", "1",
            "--workload-seconds", "3", "--window-seconds", "1", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    w = windows(res)
    p50 = w.p50_us.median()
    print(f"p50 {p50:.0f} us for a {DELAY_MS * 1000:,} us execute")
    assert DELAY_MS * 1000 <= p50 < 2 * DELAY_MS * 1000
    assert (w.p50_us >= DELAY_MS * 1000).all(), w.p50_us.tolist()
    assert (w.requests > 0).all() and (w.errors == 0).all()


@pytest.mark.slow
def test_open_loop_past_capacity_queues_closed_loop_does_not(tmp_path, runtime):
    """20 ms per request = 50/s capacity. Open loop at 80/s: latency grows window after window,
    counted from the scheduled send. Closed loop at 1 user: latency stays at the service time."""
    res = tmp_path / "r"
    p = rig("cycle", "--execute-delay-ms", str(DELAY_MS), "--workload", "steady", "--rate", "80",
            "--workload-seconds", "3", "--window-seconds", "1", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    w = windows(res).sort_values("window")
    assert (w["mode"] == "open").all() and (w["rate"] == 80).all()
    print(w[["window", "requests", "p50_us", "p99_us"]].to_string())
    assert w.p50_us.iloc[-1] > 3 * w.p50_us.iloc[0]
    assert w.p50_us.iloc[-1] > 5 * DELAY_MS * 1000  # far above the 20 ms service time
    closed = tmp_path / "c"
    p = rig("cycle", "--execute-delay-ms", str(DELAY_MS), "--workload", "steady", "--users", "1",
            "--workload-seconds", "3", "--window-seconds", "1", "--results", str(closed))
    assert p.returncode == 0
    wc = windows(closed).sort_values("window")
    # closed loop: every window stays near the service time, far below the open loop's queue
    assert DELAY_MS * 1000 <= wc.p50_us.min() and wc.p50_us.max() < 2 * DELAY_MS * 1000
    assert wc.p50_us.max() < w.p50_us.iloc[-1] / 2


@pytest.mark.slow
def test_soak_with_workload_fills_windows_for_every_cycle_every_request_in_one(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("soak", "--cycles", "3", "--workload", "steady", "--users", "2", "--workload-seconds", "2",
            "--window-seconds", "0.5", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    c = cycles(res)
    w = windows(res)
    assert sorted(w.cycle.unique()) == sorted(c.cycle) == [1, 2, 3]
    assert (w.groupby("cycle").window.count() == 4).all()
    assert (w.throughput > 0).all() and (w.histogram.notna()).all()
    for col in ("run_id", "cycle", "window", "start_s", "length_s", "mode", "concurrency", "rate",
                "requests", "errors", "throughput", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
                "hub_block_max_ms", "worker_rss_bytes"):
        assert col in w.columns
    # the hub monitor's figure is recorded (its bound is a benchmark's business, not a test's:
    # a busy neighbour deschedules the process; test_hub_monitor_catches_a_block is its control)
    print("hub block max per window (ms):", w.hub_block_max_ms.round(2).tolist())
    assert w.hub_block_max_ms.notna().all() and (w.hub_block_max_ms >= 0).all()
    assert (c.throughput > 0).all()
    # every completed request is in exactly one window of its cycle, the last in-flight ones too
    per_cycle = w.groupby("cycle").requests.sum()
    assert (per_cycle == (c.set_index("cycle").requests - c.set_index("cycle").errors)).all()


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["ramp", "step", "spike"])
def test_shapes_run(tmp_path, runtime, shape):
    res = tmp_path / "r"
    p = rig("cycle", "--workload", shape, "--users", "4", "--workload-seconds", "2",
            "--window-seconds", "0.5", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    w = windows(res).sort_values("window")
    assert len(w) == 4 and (w.requests > 0).all()
    # the shape moved the load: it starts below its peak of 4 users (Locust ticks a shape each second)
    print(w[["window", "concurrency", "throughput"]])
    assert w.concurrency.iloc[0] < 4 and w.concurrency.max() > w.concurrency.iloc[0]


@pytest.mark.slow
def test_bench_sweep_stores_windows_and_reports_knee(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("bench", "--concurrency", "1,2", "--windows", "3", "--window-seconds", "0.5", "--repeats", "1",
            "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "knee:" in p.stdout
    w = windows(res)
    assert sorted(w.concurrency.unique()) == [1, 2]
    assert (w.groupby("cycle").window.count() == 3).all()
    assert list((res / "plots").glob("*-bench.png"))


def test_arrival_times_are_seeded_and_at_rate():
    a = arrival_times(1000, 2.0, 0, "poisson", seed=7)
    b = arrival_times(1000, 2.0, 0, "poisson", seed=7)
    assert (a == b).all()
    assert len(a) == 2000 and a[-1] < 2e9
    c = arrival_times(100, 1.0, 10, "constant")
    assert len(c) in (99, 100) and abs((c[1] - c[0]) - 1e7) < 1


def test_stability_rule():
    rows = [{"throughput": t, "p50_us": 100} for t in (100, 105, 98)]
    assert stable(rows) is True
    assert stable(rows[:2]) is None
    assert stable(rows + [{"throughput": 150, "p50_us": 100}]) is False


def test_knee_rules():
    from rig.analysis.sweeps import knee

    closed = [{"point": 1, "throughput": 100}, {"point": 2, "throughput": 180}, {"point": 4, "throughput": 185}]
    assert knee(closed)["point"] == 2
    opened = [{"point": 100, "throughput": 99, "p99_us": 200}, {"point": 200, "throughput": 198, "p99_us": 300},
              {"point": 400, "throughput": 250, "p99_us": 90000}]
    assert knee(opened, open_loop=True)["point"] == 200


STRLEN_CONFIG = '''
name: "strlen"
backend: "python"
max_batch_size: 4
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "LEN" data_type: TYPE_INT64 dims: [ 1 ] } ]
'''
STRLEN_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            t = pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy()
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("LEN", np.array([[len(x[0])] for x in t], dtype=np.int64))]))
        return out
'''


@pytest.mark.slow
def test_workload_spreads_over_a_users_models_bytes_included(tmp_path, runtime):
    from rig.parent import repository

    repo = tmp_path / "repo"
    (repo / "strlen" / "1").mkdir(parents=True)
    (repo / "strlen" / "config.pbtxt").write_text(STRLEN_CONFIG)
    (repo / "strlen" / "1" / "model.py").write_text(STRLEN_MODEL)
    repository.render(repository.ModelSpec(name="matmul"), repo)
    res = tmp_path / "r"
    p = rig("cycle", "--model-repository", str(repo), "--workload", "steady", "--users", "2",
            "--workload-seconds", "2", "--window-seconds", "1", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    c = cycles(res).iloc[0]
    assert c.outcome == "clean" and c.errors == 0 and c.finalize_expected == 2
    stats = next((res / "_work").rglob("locust-c000001_stats.csv")).read_text()
    assert "infer,strlen," in stats and "infer,matmul," in stats  # Locust's own CSV, both models


@pytest.mark.slow
def test_locust_web_ui_serves_live_stats(tmp_path, runtime):
    """Optional Locust web UI: served by the worker during the load, fed by the rig's events."""
    import json
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = spawn("cycle", "--workload", "steady", "--users", "2", "--workload-seconds", "6",
                 "--locust-web-port", str(port), "--results", str(tmp_path / "r"))
    seen = 0
    page = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not seen:
        try:
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read().decode()
            stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats/requests", timeout=2).read())
            seen = sum(e["num_requests"] for e in stats["stats"] if e["name"] == "numpy")
        except OSError:
            pass
        time.sleep(0.3)
    assert proc.wait(120) == 0
    assert "<html" in page.lower()
    assert seen > 0


@pytest.mark.slow  # a process of its own: the end-to-end tier
def test_the_in_process_load_parts_in_a_process_of_their_own():
    """``tests/inproc_load.py`` imports Locust into its process, which monkey-patches it for
    gevent: in a process of its own, so that patching never meets an ``ssl`` or ``urllib3``
    that other tests imported first (a RecursionError), nor turns other tests' threads into
    greenlets. Its tests: the numpy HDR recording against hdrh value by value, Locust's stats
    logged in bulk against Locust's own logging, the hub monitor against a real block, the
    sink's pump at most once a second."""
    import subprocess
    import sys

    from helpers import ROOT

    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "inproc_load.py")], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    print(p.stdout[-3000:])
    assert p.returncode == 0 and "4 passed" in p.stdout, p.stdout[-3000:] + p.stderr[-2000:]

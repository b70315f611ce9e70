"""perf_analyzer (tritonclient 2.48) in C API mode over the embedded core, on a tiny Python model."""

from __future__ import annotations

import os
import time

import pytest

from rig.parent import repository
from rig.parent import perf_analyzer as pa
from rig.parent import perf_analyzer_output as pao
from rig.common.errors import RigError

LATENCIES = ("p50_us", "p90_us", "p95_us", "p99_us", "avg_us")


def _repo(tmp_path, name="simple", model_py=None):
    """The rig's numpy template as ``name``; ``model_py`` replaces its model file (a broken one)."""
    mdir = repository.render(repository.ModelSpec(name=name), tmp_path / "repo")
    if model_py is not None:
        (mdir / "1" / "model.py").write_text(model_py)
    return tmp_path / "repo"


@pytest.fixture(scope="module")
def binary():
    try:
        return pa.ensure_perf_analyzer(log=print)
    except RigError as e:
        print(f"SKIP reason: {e}")
        pytest.skip(f"perf_analyzer unavailable: {e}")


# ---------------------------------------------------------------- no binary needed

CSV_248 = """\
Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,\
Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,\
p99 latency,Avg latency,request/response,response wait
1,6950.28,3,0,14,13,89,25,0,131,177,195,222,141,3,135
2,7887.12,3,0,132,8,84,26,0,238,329,363,431,250,3,204
"""


def test_parse_csv_by_header_names():
    rows = pao.parse_csv(CSV_248)
    assert [r["concurrency"] for r in rows] == [1, 2]
    assert rows[0]["throughput"] == pytest.approx(6950.28)
    assert rows[1]["p99_us"] == 431 and rows[1]["avg_us"] == 250
    assert rows[1]["server_queue_us"] == 132 and rows[1]["server_compute_infer_us"] == 84


def test_parse_csv_reordered_columns_and_trailing_table():
    text = ("Request Rate,p99 latency,Inferences/Second,Some New Column\n"
            "1000,252,999.8,7\n\nOther,Table\n1,2\n")
    (row,) = pao.parse_csv(text)
    assert row == {"rate": 1000.0, "p99_us": 252, "throughput": 999.8, "some_new_column": 7}
    assert pao.parse_csv("") == []


def test_meaningful_line_skips_gpu_noise():
    lines = [
        'W1129 15:03:05.871471 3170 pinned_memory_manager.cc:273] "Unable to allocate pinned '
        'system memory, pinned memory pool will not be available: CUDA driver version is '
        'insufficient for CUDA runtime version"',
        "Error: Failed to initialize NVML",
        'E1129 15:13:25.521984 3829 model_lifecycle.cc:642] "failed to load \'bad\' version 1: '
        "Internal: ModuleNotFoundError: No module named 'x'\\n\\nAt:\\n  model.py(1)\"",
        "error: creating server: Internal - failed to load all models",
        "malloc_consolidate(): unaligned fastbin chunk detected",
    ]
    assert pao.meaningful(lines) == ("failed to load 'bad' version 1: Internal: "
                                     "ModuleNotFoundError: No module named 'x'")
    assert pao.meaningful(lines[:2] + lines[3:]) == \
        "error: creating server: Internal - failed to load all models"


def test_perf_analyzer_env_must_be_executable(tmp_path, monkeypatch):
    monkeypatch.setenv("PERF_ANALYZER", str(tmp_path / "missing"))
    with pytest.raises(RigError, match="PERF_ANALYZER"):
        pa.ensure_perf_analyzer()


@pytest.mark.slow
def test_arguments_checked_before_running(tmp_path, runtime):
    repo = _repo(tmp_path)
    with pytest.raises(RigError, match="not both"):
        pa.run_perf_analyzer(runtime, repo, "simple", concurrency=[1], rate=[10.0])
    with pytest.raises(RigError, match="not in the repository"):
        pa.run_perf_analyzer(runtime, repo, "nosuch", concurrency=[1])


# ---------------------------------------------------------------- real runs

@pytest.mark.slow
def test_real_run_on_embedded_core(tmp_path, runtime, binary):
    repo = _repo(tmp_path)
    t0 = time.monotonic()
    points = pa.run_perf_analyzer(runtime, repo, "simple", concurrency=[1, 2],
                                  shapes={"INPUT": [4]}, measurement_ms=500,
                                  # what is tested is the run and its parse, not the machine's calm: a wide
                                  # stability band, so that a busy neighbour cannot fail it
                                  stability_pct=100, max_trials=10, timeout_s=120, log=print)
    print(f"{time.monotonic() - t0:.1f} s:", points)
    assert [p["concurrency"] for p in points] == [1, 2]
    for p in points:
        assert p["throughput"] > 0
        for k in LATENCIES:
            assert isinstance(p[k], (int, float)) and p[k] > 0, (k, p)
        assert p["p50_us"] <= p["p99_us"]
        assert "server_queue_us" in p and "server_compute_infer_us" in p
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".csv")]


@pytest.mark.slow
def test_model_that_fails_to_load_is_reported_quickly(tmp_path, runtime, binary):
    repo = _repo(tmp_path, "broken", model_py="import no_such_module_here\n")
    t0, timeout_s = time.monotonic(), 120
    with pytest.raises(RigError, match="no_such_module_here") as info:
        pa.run_perf_analyzer(runtime, repo, "broken", concurrency=[1], shapes={"INPUT": [4]},
                             measurement_ms=500, timeout_s=timeout_s)
    assert time.monotonic() - t0 < timeout_s / 2, "the load-retry loop was not cut short"
    assert "failed to load 'broken'" in str(info.value)

"""The growth verdict (``growth_outcome``) on the real core, through the rig as users run it:
the template's faults (``leaks-memory`` keeps 1 MiB a request, ``slows-down`` sleeps 100 us more
in every execute), the clean template, and models written as other teams write them
(tests/corpus/memo_leak, memo_bounded, memo_leak_two_instances, scores_history). The verdict's
pure parts: tests/common/test_trends.py.

Every figure is read back from the stored Parquet (the ``cycles`` and ``memory`` tables). No
assertion is on a time: the machine is shared, so a slowdown is held to its interval's lower
bound against the rig's own threshold, and memory to 10 % of what the model keeps.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import ROOT, cycles, rig

pytestmark = pytest.mark.slow  # every test runs real cycles on the embedded core

CORPUS = ROOT / "tests" / "corpus"
MIB = 1 << 20
TEMPLATE_LEAK_PER_1K = 1000 * MIB      # leaks-memory: 1 MiB a request
MEMO_PER_1K = 1000 * 64 * 1024         # the memo models: 64 KiB a request
MAX_SLOWDOWN_PCT = 50.0                # the rig's default --max-slowdown
# four seconds read as eight windows: a trend over four points alone is too easily made by a neighbour
STEADY = ("--workload", "steady", "--workload-seconds", "4", "--window-seconds", "0.5")


def soak(tmp_path, *args: str, rc: int | None = None) -> tuple[object, pd.DataFrame]:
    """``rig soak ARGS`` to completion (exit status ``rc`` where given); its stored cycles."""
    res = tmp_path / "r"
    p = rig("soak", *args, "--results", str(res), timeout=400)
    said = "\n".join(line for line in p.stdout.splitlines() if line.startswith(("cycle ", "growth", "FAIL")))
    print(said)
    out = f"exit {p.returncode}\n{said}\n{p.stdout[-2000:]}{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr, out
    assert (p.returncode == rc) if rc is not None else (p.returncode in (0, 1)), out
    return p, cycles(res).sort_values("cycle").reset_index(drop=True)


def memory(tmp_path) -> pd.DataFrame:
    return pd.read_parquet(tmp_path / "r" / "memory")


def detail(c: pd.DataFrame) -> str:
    cols = [k for k in ("growth_outcome", "stub_growth_per_1k_b", "stub_growth_low_b", "growth_requests",
                        "slowdown_pct", "slowdown_low_pct", "trend_windows", "detail") if k in c]
    return c[cols].to_string()


def within(got: float, want: float, rel: float = 0.10) -> bool:
    return abs(got - want) <= rel * want


# ------------------------------------------------------------------ the template's faults


def test_the_templates_leak_is_leaking_at_one_mib_a_request_and_fails_the_run(tmp_path, runtime):
    p, c = soak(tmp_path, "--fault", "leaks-memory", "--cycles", "2", rc=1)
    assert list(c.cycle) == [1, 2]
    assert set(c.growth_outcome) == {"leaking"}, detail(c)
    assert set(c.outcome) == {"clean"} and set(c.load_outcome) == {"ok"}  # a leak answers every request
    for _, row in c.iterrows():
        assert within(row.stub_growth_per_1k_b, TEMPLATE_LEAK_PER_1K), detail(c)
        assert row.stub_growth_low_b > 0.9 * TEMPLATE_LEAK_PER_1K
        assert row.stub_growth_model == "numpy"
        assert "stub numpy" in json.loads(row.growth_by_process)
        assert "stub numpy +" in row.detail and "per 1,000 requests" in row.detail
    # the run fails on the growth verdict, in a line of its own
    assert "FAIL: growth outcomes not allowed: leaking=2" in p.stdout

    m = memory(tmp_path)
    assert set(m.cycle) == {1, 2}
    assert set(m.process) == {"worker", "stub"}
    stub = m[m.process == "stub"]
    assert set(zip(stub.model, stub.instance)) == {("numpy", "numpy_0_0")}
    for k, per_cycle in stub.groupby("cycle"):
        rss = per_cycle.sort_values("sample").rss_bytes.to_numpy(float)
        assert len(rss) >= 8, per_cycle.to_string()
        assert (np.diff(rss) > 0).all(), per_cycle.to_string()  # 10 MiB more at each tenth of the load
        assert rss[-1] - rss[0] > 80 * MIB  # ~100 requests x 1 MiB
        assert (m[(m.cycle == k) & (m.process == "worker")].rss_bytes > 0).all()


@pytest.mark.parametrize("workload", [(), STEADY], ids=["fixed-count", "steady"])
def test_the_templates_slowdown_is_slowing(tmp_path, runtime, workload):
    p, c = soak(tmp_path, "--fault", "slows-down", "--cycles", "1", *workload, rc=1)
    row = c.iloc[0]
    assert row.growth_outcome == "slowing", detail(c)
    assert row.slowdown_low_pct > MAX_SLOWDOWN_PCT and row.p50_change_pct > 0, detail(c)
    assert row.trend_windows >= 4
    assert (row.outcome, row.load_outcome) == ("clean", "ok")
    assert "FAIL: growth outcomes not allowed: slowing=1" in p.stdout


@pytest.mark.parametrize("workload", [(), STEADY], ids=["fixed-count", "steady"])
def test_the_clean_template_is_ok(tmp_path, runtime, workload):
    p, c = soak(tmp_path, "--cycles", "1", *workload, rc=0)
    row = c.iloc[0]
    assert row.growth_outcome == "ok", detail(c)
    assert row.memory_samples >= 4 and row.trend_windows >= 4
    assert not row.slowdown_low_pct > MAX_SLOWDOWN_PCT
    assert "FAIL" not in p.stdout


# ------------------------------------------------------------------ models as teams write them


def test_a_memo_never_emptied_is_leaking_at_its_size_and_allowed_passes(tmp_path, runtime):
    """64 KiB of features memoized a request, never read nor emptied; ``--allow-outcomes
    leaking`` lets the run pass (the leak known and accepted)."""
    p, c = soak(tmp_path, "--model-repository", str(CORPUS / "memo_leak"), "--cycles", "1",
                "--requests", "1000", "--allow-outcomes", "leaking", rc=0)
    row = c.iloc[0]
    assert row.growth_outcome == "leaking", detail(c)
    assert row.stub_growth_model == "memo_leak"
    assert within(row.stub_growth_per_1k_b, MEMO_PER_1K), detail(c)
    assert "FAIL" not in p.stdout


def test_the_same_memo_bounded_is_ok(tmp_path, runtime):
    p, c = soak(tmp_path, "--model-repository", str(CORPUS / "memo_bounded"), "--cycles", "1",
                "--requests", "1000", rc=0)
    row = c.iloc[0]
    assert row.growth_outcome == "ok", detail(c)
    assert row.stub_growth_model == "memo_bounded"
    # the memo's 32 x 64 KiB is at most 2 MiB, kept within the first requests
    assert abs(row.stub_growth_per_1k_b) < 0.05 * MEMO_PER_1K, detail(c)


def test_a_leak_in_two_instances_is_read_as_their_sum(tmp_path, runtime):
    p, c = soak(tmp_path, "--model-repository", str(CORPUS / "memo_leak_two_instances"), "--cycles", "1",
                "--requests", "1000", rc=1)
    row = c.iloc[0]
    assert row.growth_outcome == "leaking", detail(c)
    assert row.stub_growth_model == "memo_leak_two_instances"
    # each instance keeps 64 KiB of the requests it served; the model's stubs together, all of them
    assert within(row.stub_growth_per_1k_b, MEMO_PER_1K), detail(c)
    m = memory(tmp_path)
    stub = m[m.process == "stub"]
    instances = sorted(set(stub.instance))
    assert instances == ["memo_leak_two_instances_0_0", "memo_leak_two_instances_0_1"], instances
    assert stub.groupby("instance").pid.nunique().eq(1).all()
    for name, g in stub.groupby("instance"):
        rss = g.sort_values("sample").rss_bytes.to_numpy(float)
        assert rss[-1] - rss[0] < 0.95 * 64 * 1024 * 1000, f"{name} kept (nearly) all: no sum to read"


def test_a_model_that_scores_each_query_against_all_earlier_ones_is_slowing(tmp_path, runtime):
    """Its work grows with the requests before it: under one user the load slows as the square
    root of its time (steep at first, then flatter), read over sixteen windows of 0.25 s. Its
    work is the CPU's, so a neighbour that takes the cores for a while (two cores, other tests
    beside) can hide the trend in one load: two loads (each a fresh stub, an empty history), one
    of them at least read as slowing, and neither as anything else but ok."""
    p, c = soak(tmp_path, "--model-repository", str(CORPUS / "scores_history"), "--cycles", "2",
                "--workload", "steady", "--workload-seconds", "4", "--window-seconds", "0.25", rc=1)
    assert set(c.outcome) == {"clean"} and set(c.load_outcome) == {"ok"}, detail(c)
    assert "slowing" in set(c.growth_outcome) and set(c.growth_outcome) <= {"slowing", "ok"}, detail(c)
    slowing = c[c.growth_outcome == "slowing"]
    assert (slowing.slowdown_low_pct > MAX_SLOWDOWN_PCT).all() and (slowing.p50_change_pct > 0).all()


# ------------------------------------------------------------------ sampling off


def test_memory_samples_off_measures_no_memory(tmp_path, runtime):
    p, c = soak(tmp_path, "--fault", "leaks-memory", "--cycles", "1", "--memory-samples", "off")
    row = c.iloc[0]
    assert not (tmp_path / "r" / "memory").exists() or memory(tmp_path).empty
    assert pd.isna(row.memory_samples) and pd.isna(row.stub_growth_per_1k_b) and pd.isna(row.worker_growth_per_1k_b)
    assert row.growth_outcome != "leaking", detail(c)  # the leak is not seen: nothing sampled it
    assert row.growth_outcome == "not_measured", detail(c)

#!/usr/bin/env python3
"""How much the CPUs' idle states move this machine's figures: ``rig bench`` with the CPUs held
out of idle (``--cpu-idle hold``) against left to the kernel (``--cpu-idle os``), interleaved.

    python benchmarks/cpu_idle.py [--concurrency 1,2,4,8] [--pairs 2] [--compare perf-analyzer]
        [--engine capi] [--runtime SPEC] [--results DIR]

Each pair runs one repeat of every point under each regime, the order alternating per pair, so a
drift of the machine falls on both. With ``--compare perf-analyzer`` perf_analyzer is measured
beside the rig in each run (and so under the same regime). Prints, per point and tool, the median
throughput and p99 under each regime and their ratios (hold / os). Run it once per kind of node:
on a machine where the ratio is near 1, the regime does not matter there.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("hold", "os")


def bench(mode: str, a, results: Path) -> str:
    """One ``rig bench`` under ``mode``; its run id."""
    from rig.store import Store

    before = set(Store(results).read("runs").get("run_id", [])) if (results / "runs").exists() else set()
    cmd = [sys.executable, "-m", "rig", "bench", "--concurrency", a.concurrency, "--repeats", "1",
           "--windows", str(a.windows), "--window-seconds", str(a.window_seconds), "--cpu-idle", mode,
           "--engine", a.engine, "--results", str(results)]
    cmd += ["--runtime", a.runtime] if a.runtime else []
    cmd += ["--compare", a.compare] if a.compare else []
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"rig bench --cpu-idle {mode} failed: {(proc.stderr or proc.stdout).strip()[-1500:]}")
    runs = Store(results).read("runs")
    (run_id,) = set(runs["run_id"]) - before
    held = runs[runs.run_id == run_id].cpu_idle.iloc[0]
    print(f"  --cpu-idle {mode}: run {run_id} ({held})", flush=True)
    return run_id


def figures(results: Path, run_id: str) -> dict:
    """(tool, point) -> {"throughput", "p99_us"} of one run: each point's summary over its windows."""
    from rig.analysis.sweeps import summarize
    from rig.store import Store

    w = Store(results).read("windows", run_id).sort_values("window")
    out = {}
    for (tool, point), g in w.groupby(["tool", "concurrency"]):
        out[(tool, int(point))] = summarize(g.to_dict("records"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", default="1,2,4,8")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--window-seconds", type=float, default=1.0)
    ap.add_argument("--compare", choices=["perf-analyzer"])
    ap.add_argument("--engine", default="capi", choices=["capi", "tritonserver"])
    ap.add_argument("--runtime")
    ap.add_argument("--results", help="keep the runs in this results folder (default: a temporary one)")
    a = ap.parse_args()
    if a.pairs < 1:
        ap.error("--pairs must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(a.results) if a.results else Path(tmp) / "results"
        got: dict[str, list[dict]] = {m: [] for m in MODES}
        for i in range(a.pairs):
            print(f"pair {i + 1}/{a.pairs}", flush=True)
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                got[mode].append(figures(results, bench(mode, a, results)))
    keys = sorted({k for runs in got.values() for run in runs for k in run})
    print(f"\nmedians over {a.pairs} run(s) per regime; x = hold / os")
    print(f"{'tool':<14} {'point':>5} | {'hold infer/s':>12} {'os infer/s':>11} {'x':>5} | "
          f"{'hold p99 us':>11} {'os p99 us':>10} {'x':>5}")
    for tool, point in keys:
        med = {m: {f: _median([run[(tool, point)].get(f) for run in got[m] if (tool, point) in run])
                   for f in ("throughput", "p99_us")} for m in MODES}
        print(f"{tool:<14} {point:>5} | {_n(med['hold']['throughput']):>12} {_n(med['os']['throughput']):>11} "
              f"{_x(med, 'throughput'):>5} | {_n(med['hold']['p99_us']):>11} {_n(med['os']['p99_us']):>10} "
              f"{_x(med, 'p99_us'):>5}")
    return 0


def _median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def _n(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _x(med: dict, key: str) -> str:
    a, b = med["hold"][key], med["os"][key]
    return f"{a / b:.2f}" if a and b else "-"


if __name__ == "__main__":
    sys.exit(main())

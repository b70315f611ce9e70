"""What reading Triton's statistics at every window costs the load (issue 42): ``rig bench
--compare perf-analyzer`` with ``--server-stats on`` and ``off``, side by side and alternated (on,
off, off, on, ...), at the same settings; prints each run's figures, then the paired medians of
the rig's throughput and p99 ratios (on / off), and of its ratios to perf_analyzer measured in
the same run (rig / perf_analyzer, on against off), which take the machine's drift out.

    .venv/bin/python benchmarks/server_stats_cost.py [--pairs 4] [--concurrency 2] [--windows 5]
        [--window-seconds 5] [--model-repository R] [--engine capi] [--no-compare]

Each run is one point, one repeat (``--repeats 1``): about 2 x windows x window-seconds plus
starts, ~1 min a run at the defaults, ~8 min for 4 pairs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd


def bench(results: Path, stats: str, args) -> dict:
    """One run: the rig's (and perf_analyzer's) throughput and p99, medians of the windows after
    the first, and where the rig's time went (with stats on)."""
    cmd = [sys.executable, "-m", "rig", "bench", "--concurrency", str(args.concurrency), "--repeats", "1",
           "--windows", str(args.windows), "--window-seconds", str(args.window_seconds), "--engine", args.engine,
           "--server-stats", stats, "--results", str(results)]
    if not args.no_compare:
        cmd += ["--compare", "perf-analyzer"]
    if args.model_repository:
        cmd += ["--model-repository", args.model_repository]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    w = pd.read_parquet(results / "windows")
    out = {}
    for tool, g in w.groupby("tool"):
        g = g[g.window > 1] if tool == "rig" and len(g) > 1 else g  # the rig's first window is warm-up
        out[tool] = (float(g.throughput.median()), float(g.p99_us.median()))
    if stats == "on":
        from rig.contract import server_stats

        t = server_stats.over_windows(w[w.tool == "rig"].to_dict("records"))
        out["times"] = t
        pa = w[w.tool == "perf_analyzer"].to_dict("records")
        out["pa_times"] = server_stats.over_windows(pa) if pa else None
    return out


def _line(i: int, side: str, got: dict) -> str:
    tput, p99 = got["rig"]
    text = f"pair {i + 1} {side:>3}: rig {tput:,.0f} infer/s, p99 {p99:,.0f} us"
    if "perf_analyzer" in got:
        pt, pp = got["perf_analyzer"]
        text += f" | perf_analyzer {pt:,.0f} infer/s, p99 {pp:,.0f} us"
    t = got.get("times")
    if t and t.get("request_us") is not None:
        text += (f" | client {t['client_us']:,.0f} us, Triton {t['request_us']:,.0f} us "
                 f"(queue {t['queue_us']:,.0f}, infer {t['compute_infer_us']:,.0f})")
    return text


def _paired(name: str, ratios: list[float]) -> str:
    return (f"{name}: paired median {statistics.median(ratios):.3f} "
            f"(pairs {', '.join(f'{x:.3f}' for x in ratios)})")


def main() -> int:
    a = argparse.ArgumentParser()
    a.add_argument("--pairs", type=int, default=4)
    a.add_argument("--concurrency", type=int, default=2)
    a.add_argument("--windows", type=int, default=5)
    a.add_argument("--window-seconds", type=float, default=5.0)
    a.add_argument("--engine", default="capi")
    a.add_argument("--model-repository")
    a.add_argument("--no-compare", action="store_true", help="the rig alone, without perf_analyzer beside it")
    args = a.parse_args()
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
                runs[side].append(bench(Path(tmp) / f"{i}-{side}", side, args))
                print(_line(i, side, runs[side][-1]), flush=True)
    pairs = list(zip(runs["on"], runs["off"]))
    print(_paired("rig throughput on/off", [on["rig"][0] / off["rig"][0] for on, off in pairs]))
    print(_paired("rig p99 on/off       ", [on["rig"][1] / off["rig"][1] for on, off in pairs]))
    agree = [(on["times"]["request_us"], on["pa_times"]["request_us"]) for on in runs["on"]
             if on.get("times") and on.get("pa_times") and on["pa_times"].get("request_us")]
    if agree:  # the two tools' server-side averages at the same concurrency, statistics on
        print(_paired("Triton's request time, rig's run / perf_analyzer's", [r / p for r, p in agree])
              + " (" + ", ".join(f"{r:,.0f}/{p:,.0f} us" for r, p in agree) + ")")
    if not args.no_compare:
        def x(run, k):
            return run["rig"][k] / run["perf_analyzer"][k]

        both = [(on, off) for on, off in pairs if "perf_analyzer" in on and "perf_analyzer" in off]
        if both:
            print(_paired("rig/perf_analyzer throughput, on/off", [x(on, 0) / x(off, 0) for on, off in both]))
            print(_paired("rig/perf_analyzer p99, on/off       ", [x(on, 1) / x(off, 1) for on, off in both]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

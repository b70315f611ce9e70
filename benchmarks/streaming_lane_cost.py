"""The streaming lane's own cost, measured apart (issue 54, item 5): the template model served
unbatched (A) and decoupled (B: it sends each request's one response with the final flag through
the request's sender, inside ``execute``, so Triton's statistics still cover the answer), the same
soak side by side, alternated A B B A; per run, over its windows after the first, the client's mean
and Triton's request time; then the paired medians of client - Triton on each side and of B - A,
what streaming adds to the rig's own cost per request.

    .venv/bin/python benchmarks/streaming_lane_cost.py [--pairs 4] [--users 1] [--seconds 5]
        [--engine capi] [--runtime R]

Each run is one soak cycle of ``--seconds`` of load in 1 s windows: ~15 s a run, ~2 min for 4 pairs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd


def soak(results: Path, decoupled: bool, args) -> dict:
    cmd = [sys.executable, "-m", "rig", "soak", "--workload", "steady", "--users", str(args.users), "--in-flight",
           "1", "--workload-seconds", str(args.seconds), "--window-seconds", "1", "--cycles", "1", "--engine",
           args.engine, "--results", str(results)]
    if args.runtime:
        cmd += ["--runtime", args.runtime]
    if decoupled:
        cmd += ["--model-shape", "decoupled"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    from rig.contract import server_stats

    w = pd.read_parquet(results / "windows")
    w = w[(w.tool == "rig") & (w.window > 1)]
    t = server_stats.over_windows(w.to_dict("records"))
    beyond = t["beyond_us"] if t["uncovered"] else t["own_us"]
    return {"client": t["client_us"], "triton": t["request_us"], "beyond": beyond, "why": t["uncovered"],
            "throughput": float(w.throughput.median())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--users", type=int, default=1)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--engine", default="capi")
    ap.add_argument("--runtime", default=None)
    args = ap.parse_args()
    got: dict[str, list[dict]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        for i in range(args.pairs):
            for side in ("A", "B", "B", "A"):
                n += 1
                r = soak(Path(tmp) / f"r{n}", side == "B", args)
                got[side].append(r)
                print(f"pair {i + 1} {side} ({'decoupled' if side == 'B' else 'unbatched'}): client "
                      f"{r['client']:,.0f} us, Triton {r['triton']:,.0f} us, client - Triton {r['beyond']:,.1f} us, "
                      f"{r['throughput']:,.0f} infer/s" + (f" [{r['why']}]" if r["why"] else ""), flush=True)
    # each pair's two runs of a side are averaged, then paired against the other side's
    a = [statistics.mean(x["beyond"] for x in got["A"][2 * i:2 * i + 2]) for i in range(args.pairs)]
    b = [statistics.mean(x["beyond"] for x in got["B"][2 * i:2 * i + 2]) for i in range(args.pairs)]
    diffs = [y - x for x, y in zip(a, b)]
    print(f"client - Triton, median of pairs: unbatched {statistics.median(a):,.1f} us, decoupled "
          f"{statistics.median(b):,.1f} us; decoupled - unbatched {statistics.median(diffs):+,.1f} us "
          f"(pairs {min(diffs):+,.1f} to {max(diffs):+,.1f})")
    ta = statistics.median(x["throughput"] for x in got["A"])
    tb = statistics.median(x["throughput"] for x in got["B"])
    print(f"throughput, median of runs: unbatched {ta:,.0f} infer/s, decoupled {tb:,.0f} infer/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

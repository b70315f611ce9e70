#!/usr/bin/env python3
"""Stop latency of plain ``stop`` against ``unload-then-stop``, measured side by side in one run,
and the rig's own cost per cycle (wall time beyond Triton's start and stop).

    python benchmarks/stop_strategies.py [--pairs 5] [--results DIR]

Cycles alternate between the two strategies (pairs), so both see the same machine noise.
Prints medians, the ratio, and the overhead; the cycles stay in DIR for analysis.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from rig.parent import config
from rig.workflows.soak import execute


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--results", default=None)
    ap.add_argument("--restart", default="fresh-process", choices=["fresh-process", "same-process"])
    a = ap.parse_args()
    results = a.results or tempfile.mkdtemp(prefix="rig-stop-bench-")
    quiet = lambda msg: None  # noqa: E731
    for i in range(a.pairs):
        for strategy in ("stop", "unload-then-stop"):
            cfg = config.load(None, {"stop_strategy": strategy, "results": results, "cycles": 1,
                                     "restart": a.restart, "exit_timeout": 10})
            execute(cfg, "cycle", log=quiet)
        print(f"pair {i + 1}/{a.pairs} done", flush=True)
    import pandas as pd

    df = pd.read_parquet(f"{results}/cycles")
    bad = df[df.outcome != "clean"]
    if len(bad):
        print(f"warning: {len(bad)} cycle(s) not clean: {bad.outcome.value_counts().to_dict()}")
    med = df.groupby("stop_strategy").stop_latency_s.median()
    over = df.groupby("stop_strategy").overhead_s.median()
    start = df.start_latency_s.median()
    print(f"\ncycles: {len(df)} ({a.pairs} pairs, {a.restart}), results in {results}")
    print(f"{'strategy':<18} {'stop median (s)':>16} {'min':>8} {'max':>8} {'rig overhead (s)':>17}")
    for s, g in df.groupby("stop_strategy"):
        print(f"{s:<18} {med[s]:>16.3f} {g.stop_latency_s.min():>8.3f} {g.stop_latency_s.max():>8.3f} "
              f"{over[s]:>17.3f}")
    print(f"\nunload-then-stop / stop = {med['unload-then-stop'] / med['stop']:.2f} "
          f"(stop is {med['stop'] / med['unload-then-stop']:.2f}x slower)")
    print(f"start latency median {start:.3f} s; rig overhead median {statistics.median(df.overhead_s):.3f} s "
          f"per cycle = {statistics.median(df.overhead_s / df.cycle_wall_s) * 100:.0f} % of a cycle's wall time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

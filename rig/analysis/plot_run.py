#!/usr/bin/env python3
"""Plot a stored run again, from the results folder alone (no Triton needed):

    python analysis/plot_run.py results [RUN_ID] [--out plots/]

A soak run gives stop latency, finalize success and memory per cycle; a bench run gives
throughput and latency against load (beside perf_analyzer where it was compared). Without
RUN_ID, the latest run. Uses the rig's public API: ``rig.Store`` and ``rig.analysis.plots``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rig.analysis import plots
from rig.store import Store


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("run_id", nargs="?")
    ap.add_argument("--out", default=None, help="folder for the PNG files (default RESULTS/plots)")
    a = ap.parse_args()
    store = Store(a.results)
    runs = store.read("runs")
    if runs.empty:
        print(f"no runs stored in {a.results}", file=sys.stderr)
        return 2
    run = runs[runs.run_id == a.run_id] if a.run_id else runs.sort_values("run_id").tail(1)
    if run.empty:
        print(f"no run {a.run_id} in {a.results}", file=sys.stderr)
        return 2
    run_id, command = run.run_id.iloc[0], run.command.iloc[0]
    out = Path(a.out or Path(a.results) / "plots")
    if command == "bench":
        path = plots.bench_figure(store.read("windows", run_id), out / f"{run_id}-bench.png")
    else:
        path = plots.soak_figure(store.read("cycles", run_id), out / f"{run_id}-soak.png")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The rig's own tail beside perf_analyzer's (issue 54, item 6): reads the results folders of
``rig bench --compare perf-analyzer`` runs and prints, per run and concurrency point, the two
tools' p99 as the bench's table reads it (each repeat's median of its last 3 windows, then the
median over repeats) and over the run's merged histogram (every window of the point, every
repeat, summed exactly), with the ratio rig / perf_analyzer of each. Given runs of two sides
(``--a`` and ``--b``, taken alternated: A B B A ...), it adds the paired medians per point, each
pair's ratio taken in one run, which takes the machine's drift out.

    .venv/bin/python benchmarks/rig_tail.py --a R1 R4 --b R2 R3 [--names before after]

Each folder holds one bench run (its ``windows`` table).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pandas as pd

from rig.common import hdr


def figures(results: Path) -> dict[int, dict]:
    """Per point: each tool's bench p99, merged p99 (us), and the rig's longest hub block (ms)."""
    w = pd.read_parquet(results / "windows")
    out: dict[int, dict] = {}
    for point, g in w.groupby("concurrency"):
        fig: dict = {}
        for tool, t in g.groupby("tool"):
            per_repeat = [r.sort_values("window").tail(3).p99_us.median() for _, r in t.groupby("cycle")]
            merged = hdr.merge(t.histogram.tolist())
            fig[tool] = {
                "bench": float(statistics.median(per_repeat)),
                "merged": float(merged.get_value_at_percentile(99)) if merged is not None else None,
            }
        if "rig" in fig and "perf_analyzer" in fig:
            for k in ("bench", "merged"):
                fig[f"{k}_x"] = fig["rig"][k] / fig["perf_analyzer"][k]
        fig["hub_ms"] = float(g[g.tool == "rig"].hub_block_max_ms.max())
        out[int(point)] = fig
    return out


def _show(name: str, figs: dict[int, dict]) -> None:
    for point, f in sorted(figs.items()):
        rig, pa = f.get("rig", {}), f.get("perf_analyzer", {})
        print(
            f"{name:>24} c{point}: p99 rig/PA bench {rig.get('bench', 0):,.0f}/{pa.get('bench', 0):,.0f} us "
            f"({f.get('bench_x', float('nan')):.2f}), merged {rig.get('merged', 0):,.0f}/{pa.get('merged', 0):,.0f} us "
            f"({f.get('merged_x', float('nan')):.2f}), hub max {f['hub_ms']:.1f} ms"
        )


def main() -> int:
    a = argparse.ArgumentParser()
    a.add_argument("--a", nargs="+", type=Path, required=True, help="results folders of side A")
    a.add_argument("--b", nargs="*", type=Path, default=[], help="results folders of side B, in pair order")
    a.add_argument("--names", nargs=2, default=("A", "B"))
    args = a.parse_args()
    sides = {args.names[0]: [figures(p) for p in args.a], args.names[1]: [figures(p) for p in args.b]}
    for name, paths in ((args.names[0], args.a), (args.names[1], args.b)):
        for path, figs in zip(paths, sides[name]):
            _show(f"{name} {path.name}", figs)
    points = sorted({p for figs in sides[args.names[0]] for p in figs})
    for name, runs in sides.items():
        for k in ("bench_x", "merged_x"):
            meds = []
            for point in points:
                xs = [r[point][k] for r in runs if point in r and k in r[point]]
                meds.append(f"c{point} {statistics.median(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})" if xs else "")
            print(f"{name}: p99 rig/PA, {k[:-2]}, median of runs: " + "; ".join(meds))
    if sides[args.names[1]]:
        for k in ("bench_x", "merged_x"):
            line = []
            for point in points:
                pairs = [
                    b[point][k] / a_[point][k]
                    for a_, b in zip(sides[args.names[0]], sides[args.names[1]])
                    if point in a_ and point in b and k in a_[point] and k in b[point]
                ]
                if pairs:
                    line.append(f"c{point} {statistics.median(pairs):.2f} ({', '.join(f'{x:.2f}' for x in pairs)})")
            print(f"{args.names[1]}/{args.names[0]} of the p99 ratio, {k[:-2]}, paired medians: " + "; ".join(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

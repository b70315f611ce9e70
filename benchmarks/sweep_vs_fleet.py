"""Does a fleet's node serve what the bench measured at the same load? One node at one load, measured
several ways, alternated round after round (so the machine's drift falls on every way alike), each
into a results folder of its own; then each way's throughput (requests over seconds of its windows,
as `rig capacity` reads them) and p99 (the windows' histograms merged), and the paired ratios to the
bench's.

    python benchmarks/sweep_vs_fleet.py --results DIR [--rounds 7] [--cpus 0] [--load 3]
        [--ways bench,fleet,soak]          # whole CPU: the load paths
    python benchmarks/sweep_vs_fleet.py --results DIR --rounds 4 --cpus quota:0.4 \\
        --ways bench,burn,hold,fleet       # a quota node: idle, beside burn:30, held awake, a fleet
    python benchmarks/sweep_vs_fleet.py --results DIR --read   # print the tables of a finished DIR

The ways: `bench` (rig bench, CPUs left to idle, 3 windows of 2 s), `burn` (the same beside
--neighbour burn:30), `hold` (the same, CPUs held awake), `fleet` (a one-node rig fleet, 2 rounds of
6 s, 2 s windows), `soak` (rig soak alone, 2 cycles of 6 s). Measured: docs/measurements/capacity.md,
"Which sweep predicts a fleet".
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

RIG = [sys.executable, "-m", "rig"]
PORT = 5591


def run_way(way: str, out: Path, cpus: str, load: int) -> None:
    bench = [*RIG, "bench", "--cpus", cpus, "--concurrency", str(load), "--repeats", "1", "--windows", "3",
             "--window-seconds", "2", "--results", str(out)]
    if way in ("bench", "burn", "hold"):
        extra = {"bench": ["--cpu-idle", "os"], "burn": ["--cpu-idle", "os", "--neighbour", "burn:30"],
                 "hold": ["--cpu-idle", "hold"]}[way]
        subprocess.run(bench + extra, check=True, capture_output=True)
        return
    node = ["--cpus", cpus, "--cycles", "2", "--workload", "steady", "--results", str(out)]
    if way == "soak":
        subprocess.run([*RIG, "soak", *node, "--users", str(load), "--workload-seconds", "6", "--window-seconds", "2"],
                       check=True, capture_output=True)
        return
    master = subprocess.Popen([*RIG, "fleet", "--nodes", "1", "--cycles", "2", "--users", str(load), "--workload",
                               "steady", "--workload-seconds", "6", "--window-seconds", "2", "--port", str(PORT),
                               "--results", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)
    try:
        subprocess.run([*RIG, "soak", "--locust-master", f"127.0.0.1:{PORT}", "--node", "a", *node],
                       check=True, capture_output=True)
    finally:
        master.wait(timeout=120)


def figures(folder: Path) -> tuple[float, float | None]:
    import pandas as pd

    from rig.analysis.stats import histogram_percentiles
    from rig.common import hdr

    w = pd.read_parquet(folder / "windows")
    if "tool" in w:
        w = w[w["tool"].fillna("rig") == "rig"]
    h = hdr.merge([x for x in w["histogram"] if isinstance(x, str) and x])
    p99 = histogram_percentiles(h, (99,))["p99_us"] if h is not None else None
    return float(w["requests"].sum() / w["length_s"].sum()), p99


def table(results: Path) -> str:
    got: dict[int, dict[str, tuple]] = {}
    for d in sorted(p for p in results.iterdir() if (p / "windows").is_dir()):
        way, _, i = d.name.rpartition("-")
        got.setdefault(int(i), {})[way] = figures(d)
    ways = list(dict.fromkeys(w for r in got.values() for w in r))
    lines = ["| round | " + " | ".join(f"{w}: infer/s / p99 us" for w in ways) + " |",
             "| ---: |" + " --- |" * len(ways)]
    for i in sorted(got):
        cells = [f"{got[i][w][0]:,.0f} / {got[i][w][1]:,.0f}" if w in got[i] else "-" for w in ways]
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    for w in ways[1:]:
        r = [got[i][w][0] / got[i][ways[0]][0] for i in got if w in got[i] and ways[0] in got[i]]
        if r:
            lines.append(f"\n{w} / {ways[0]} throughput, paired median {statistics.median(r):.3f} "
                         f"(range {min(r):.3f}-{max(r):.3f}, {len(r)} rounds)")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cpus", default="0")
    ap.add_argument("--load", type=int, default=3)
    ap.add_argument("--ways", default="bench,fleet,soak")
    ap.add_argument("--read", action="store_true", help="only print the tables of a finished --results")
    a = ap.parse_args()
    ways = a.ways.split(",")
    if not a.read:
        for i in range(1, a.rounds + 1):
            for way in ways:
                with open("/proc/loadavg") as f:
                    print(f"round {i} {way} (load average {f.read().split()[0]})", flush=True)
                run_way(way, a.results / f"{way}-{i}", a.cpus, a.load)
    print(table(a.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

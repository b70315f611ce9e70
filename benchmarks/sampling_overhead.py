"""What sampling every process's memory costs the load: ``rig bench`` with ``--memory-samples on``
and ``off``, side by side and alternated (on, off, off, on, ...), at the same settings; prints the
paired medians of throughput and p99 and their ratios (on / off).

    .venv/bin/python benchmarks/sampling_overhead.py [--pairs 4] [--concurrency 2] [--windows 5]
        [--model-repository R] [--engine capi]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd


def bench(results: Path, sampling: str, args) -> tuple[float, float]:
    cmd = [sys.executable, "-m", "rig", "bench", "--concurrency", str(args.concurrency), "--windows", str(args.windows),
           "--engine", args.engine, "--memory-samples", sampling, "--cpu-idle", "os", "--results", str(results)]
    if args.model_repository:
        cmd += ["--model-repository", args.model_repository]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    w = pd.read_parquet(results / "windows")
    w = w[(w.tool == "rig") & (w.window > 1)]  # the first window is warm-up
    return float(w.throughput.median()), float(w.p99_us.median())


def main() -> int:
    a = argparse.ArgumentParser()
    a.add_argument("--pairs", type=int, default=4)
    a.add_argument("--concurrency", type=int, default=2)
    a.add_argument("--windows", type=int, default=5)
    a.add_argument("--engine", default="capi")
    a.add_argument("--model-repository")
    args = a.parse_args()
    figures: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            for side in order:
                figures[side].append(bench(Path(tmp) / f"{i}-{side}", side, args))
                print(f"pair {i + 1} {side}: {figures[side][-1][0]:,.0f} infer/s, p99 {figures[side][-1][1]:,.0f} us",
                      flush=True)
    thr = [on[0] / off[0] for on, off in zip(figures["on"], figures["off"])]
    p99 = [on[1] / off[1] for on, off in zip(figures["on"], figures["off"])]
    print(f"throughput on/off: paired median {statistics.median(thr):.3f} (pairs {', '.join(f'{x:.3f}' for x in thr)})")
    print(f"p99 on/off:        paired median {statistics.median(p99):.3f} (pairs {', '.join(f'{x:.3f}' for x in p99)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

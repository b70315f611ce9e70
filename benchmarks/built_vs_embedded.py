"""Does a core built here from source behave as the same version from PyPI? Two runtimes of one
Triton version side by side (a built one and an embedded one), soaked in alternating rounds with
the same settings: every cycle's verdicts, and throughput as paired medians per round.

    python benchmarks/built_vs_embedded.py [--built 2.51.0] [--embedded 0.7.0] [--rounds 4]
        [--cycles 3] [--config workloads/nightly.toml] [--results DIR]

Prints one line per round and a summary; exit 0 where the verdicts agree, 1 where they differ.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def soak(runtime: str, args, results: Path) -> "object":
    import pandas as pd

    out = results / runtime.replace("/", "_")
    cmd = [sys.executable, "-m", "rig", "soak", "--runtime", runtime, "--cycles", str(args.cycles),
           "--config", args.config, "--results", str(out)]
    before = set()
    if (out / "cycles").exists():
        before = set(pd.read_parquet(out / "cycles").run_id)
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"built_vs_embedded: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    c = pd.read_parquet(out / "cycles")
    return c[~c.run_id.isin(before)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--built", default="2.51.0")
    ap.add_argument("--embedded", default="0.7.0")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--config", default="workloads/nightly.toml")
    ap.add_argument("--results", default=None)
    args = ap.parse_args(argv)
    results = Path(args.results or tempfile.mkdtemp(prefix="built-vs-embedded-"))
    sides = {"built": f"built-{args.built}", "embedded": args.embedded}
    verdicts = {k: Counter() for k in sides}
    medians = {k: [] for k in sides}
    versions = {k: set() for k in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))  # alternate who goes first
        line = []
        for side in order:
            c = soak(sides[side], args, results)
            verdicts[side].update(zip(c.outcome, c.load_outcome, c.growth_outcome.fillna("-")))
            versions[side].update(c.triton_version)
            med = float(c.throughput.median())
            medians[side].append(med)
            line.append(f"{side} {med:,.0f} infer/s")
        ratio = medians["built"][-1] / medians["embedded"][-1]
        print(f"round {r + 1}: {', '.join(line)}; built/embedded {ratio:.3f}", flush=True)
    ratios = [b / e for b, e in zip(medians["built"], medians["embedded"])]
    for side in sides:
        print(f"{side:<9} {sides[side]:<14} Triton {','.join(sorted(versions[side]))}  median "
              f"{statistics.median(medians[side]):,.0f} infer/s  verdicts "
              + ", ".join(f"{'/'.join(v)} x{n}" for v, n in sorted(verdicts[side].items())))
    print(f"paired ratio built/embedded: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} rounds); results in {results}")
    same = set(verdicts["built"]) == set(verdicts["embedded"])
    print("verdicts: " + ("the same" if same else "DIFFER"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

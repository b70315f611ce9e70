"""Do two checkouts of the rig give the same figures? A nightly soak (workloads/nightly.toml, N
cycles) and a short bench beside perf_analyzer, run from each checkout in turn (A, B, B, A, ...:
drift falls on both), the figures side by side with paired medians.

    python benchmarks/before_after.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 2] [--cycles 20]

A checkout is a folder holding a `rig` package (a `git worktree add /tmp/old COMMIT` of an older
commit, say); each runs with this interpreter, its own package first on the path. Prints, per
side and round: the nightly's verdicts, finalize success, median stop latency, median throughput
and p99 of its windows; the bench's rig/perf_analyzer ratios of throughput and p99 at each point.
Then the paired medians of B/A. Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = ["bench", "--concurrency", "1,4", "--compare", "perf-analyzer", "--repeats", "3", "--windows", "3",
         "--window-seconds", "2"]


def rig(checkout: Path, args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "rig", *args], cwd=checkout, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"before_after: rig {' '.join(args[:2])} in {checkout} exited {proc.returncode}: "
                         f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")


def nightly(checkout: Path, results: Path, cycles: int) -> dict:
    from rig.store import Store

    rig(checkout, ["soak", "--config", "workloads/nightly.toml", "--cycles", str(cycles), "--results", str(results)])
    store = Store(str(results))
    c, w = store.read("cycles"), store.read("windows")
    expected = c["finalize_expected"].fillna(0).sum()
    return {"verdicts": dict(c.groupby(["outcome", "load_outcome"]).size()),
            "finalize": c["finalize_before_stop"].fillna(0).sum() / expected if expected else None,
            "stop_s": float(c["stop_latency_s"].median()), "infer_s": float(c["throughput"].median()),
            "p99_us": float(w["p99_us"].median())}


def bench(checkout: Path, results: Path) -> dict:
    from rig.store import Store

    rig(checkout, [*BENCH, "--results", str(results)])
    w = Store(str(results)).read("windows")
    out = {}
    for point, g in w.groupby("concurrency"):
        per = {tool: g[g["tool"] == tool].groupby("cycle")[["throughput", "p99_us"]].median()
               for tool in ("rig", "perf_analyzer")}
        ratio = (per["rig"] / per["perf_analyzer"]).median()
        out[int(point)] = (float(ratio["throughput"]), float(ratio["p99_us"]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cycles", type=int, default=20)
    a = ap.parse_args(argv)
    sides = {"A": Path(a.old).resolve(), "B": Path(a.new).resolve()}
    if not all((p / "rig").is_dir() for p in sides.values()):
        print("before_after: each checkout must hold a rig/ package", file=sys.stderr)
        return 2
    got: dict[str, list] = {"A": [], "B": []}
    work = Path(tempfile.mkdtemp(prefix="before-after-"))
    for r in range(a.rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            n = nightly(sides[side], work / f"{side}{r}-nightly", a.cycles)
            b = bench(sides[side], work / f"{side}{r}-bench")
            got[side].append((n, b))
            print(f"round {r + 1} {side}: nightly {n}; bench rig/perf_analyzer (throughput, p99) {b}", flush=True)
    for key in ("finalize", "stop_s", "infer_s", "p99_us"):
        pairs = [bn[0][key] / an[0][key] for an, bn in zip(got["A"], got["B"]) if an[0][key]]
        print(f"nightly {key}: B/A paired median {statistics.median(pairs):.3f}" if pairs else f"{key}: -")
    for point in got["A"][0][1]:
        for i, what in enumerate(("throughput ratio", "p99 ratio")):
            a_ = [x[1][point][i] for x in got["A"]]
            b_ = [x[1][point][i] for x in got["B"]]
            print(f"bench c{point} {what} (rig/perf_analyzer): A {statistics.median(a_):.2f}, "
                  f"B {statistics.median(b_):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How far apart are two runs of one configuration? Pairs of identical short soaks (the tests'
real store: 5 cycles of a 1-second steady workload, 1 user, 0.5 s windows), back to back, each
pair compared by `rig report --where run_id=A,B`; optionally beside a busy process (a Python loop
for the length of the pair, as a second test worker or a neighbour on a shared node would be).

    python benchmarks/identical_runs.py [--pairs 3] [--busy]

Prints, per pair, each metric's change and p from the report's differences table, then the
largest absolute change per metric. The report calls a throughput, latency or start latency
change of one run against one "unconfirmed", never significant (rig/analysis/report/differences.py).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

BUSY = "while True: sum(range(100000))"


def pair(root: Path, busy: bool) -> list[tuple[str, float, str]]:
    from stores import real_store  # the tests' store: none_a, none_b (identical), keep

    burner = subprocess.Popen([sys.executable, "-c", BUSY]) if busy else None
    try:
        ids = real_store(root)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    p = subprocess.run([sys.executable, "-m", "rig", "report", str(root), "--where",
                        f"run_id={ids['none_a']},{ids['none_b']}", "--out", str(root / "r.html")],
                       capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"identical_runs: rig report exited {p.returncode}: {p.stderr.strip()[-300:]}")
    diffs = p.stdout.split("## Differences from the baseline")[1]
    rows = []
    for line in diffs.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 9 and re.match(r"[+-]?[0-9.]+ %", cells[4]):
            rows.append((cells[1], float(cells[4].split()[0]), f"p={cells[6]} {cells[8]}"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="a busy Python loop beside each pair")
    a = ap.parse_args()
    worst: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.pairs):
            rows = pair(Path(tmp) / f"s{i}", a.busy)
            print(f"pair {i + 1}: " + "; ".join(f"{m} {c:+.1f} % ({s})" for m, c, s in rows), flush=True)
            for m, c, _ in rows:
                worst[m] = max(worst.get(m, 0.0), abs(c))
    print(json.dumps({"busy": a.busy, "pairs": a.pairs, "largest_abs_change_pct": worst}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

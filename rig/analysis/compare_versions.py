"""Example: compare two Triton versions (or two runs) of one results folder through the public
analysis functions, and print the frames.

    python -m rig.analysis.compare_versions results 2.48.0 2.51.0
    python -m rig.analysis.compare_versions results 20261130T1547 20261130T1548

Each side is a ``triton_version`` partition value, else a run id or a unique prefix of one.
The same figures in a notebook: ``frames.lifecycle(cycles)``, ``frames.performance(windows,
cycles=cycles)``, ``verdict.gate(...)``.
"""

from __future__ import annotations

import sys

import pandas as pd

from rig.analysis import frames, verdict
from rig.store import Store


def side(cycles: pd.DataFrame, name: str) -> pd.Series:
    """The rows of one side: a Triton version, else the run whose id starts with ``name``."""
    if name in set(cycles["triton_version"]):
        return cycles["triton_version"] == name
    runs = sorted({r for r in cycles["run_id"] if r.startswith(name)})
    if len(runs) != 1:
        raise SystemExit(f"{name}: {'no' if not runs else len(runs)} matching version or run")
    return cycles["run_id"] == runs[0]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    results, a, b = argv
    store = Store(results)
    cycles, windows = store.read("cycles"), store.read("windows")
    if not len(cycles):
        raise SystemExit(f"{results}: no cycles stored")
    cycles = cycles.assign(side=None)
    cycles.loc[side(cycles, a), "side"] = f"A {a}"
    cycles.loc[side(cycles, b), "side"] = f"B {b}"
    cycles = cycles[cycles["side"].notna()]
    windows = windows.merge(cycles[["run_id", "cycle", "side"]], on=["run_id", "cycle"])
    with pd.option_context("display.width", 200, "display.max_columns", 40):
        print("lifecycle, per side:")
        print(frames.lifecycle(cycles, by=["side"]).set_index("side").T.to_string())
        if len(windows):
            print("\nperformance, per side and point:")
            perf = frames.performance(windows, by=["side"])
            print(
                perf[
                    [
                        "side",
                        "point",
                        "tool",
                        "windows",
                        "throughput",
                        "throughput_low",
                        "throughput_high",
                        "p50_us",
                        "p99_us",
                        "p999_us",
                        "errors",
                    ]
                ].to_string(index=False)
            )
    a_rows, b_rows = cycles[cycles["side"] == f"A {a}"], cycles[cycles["side"] == f"B {b}"]
    reasons = verdict.gate(a_rows, windows[windows["side"] == f"A {a}"], b_rows, windows[windows["side"] == f"B {b}"])
    print("\ngate (default thresholds), B against A:")
    print("\n".join(f"  FAIL: {r}" for r in reasons) or "  pass")
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Figures of a sweep's points from their windows: perf_analyzer's stability rule, a point's
summary, and the knee of a sweep. Pure functions over window rows (dicts)."""

from __future__ import annotations

import itertools
import statistics

from rig.common.stability import stable  # noqa: F401 - re-exported: the worker applies it live


def measured(windows: list[dict]) -> list[dict]:
    """The windows a point's figures come from: its last 3 (the first is warm-up when there are more)."""
    return (windows[1:] if len(windows) > 3 else windows)[-3:]


def summarize(windows: list[dict]) -> dict:
    """A point's figures: medians over its last 3 windows (the first is warm-up when there are more)."""
    ws = measured(windows)

    def med(key):
        vals = [w[key] for w in ws if w.get(key) is not None]
        return statistics.median(vals) if vals else None

    return {
        "throughput": med("throughput"),
        "p50_us": med("p50_us"),
        "p99_us": med("p99_us"),
        "hub_block_max_ms": max((w.get("hub_block_max_ms") or 0) for w in windows) if windows else None,
        "stable": bool(windows and windows[-1].get("stable")),
    }


def knee(points: list[dict], open_loop: bool = False) -> dict | None:
    """Closed loop: the last point before more concurrency stops buying throughput (< 10 % more
    at the next point). Open loop: the last rate the server keeps up with (achieved >= 95 % of
    offered, and p99 within 10x of the lightest point's)."""
    ok = [p for p in points if p.get("throughput")]
    if not ok:
        return None
    if open_loop:
        base = ok[0].get("p99_us") or 0
        kept_up = [
            p for p in ok if p["throughput"] >= 0.95 * p["point"] and (not base or (p.get("p99_us") or 0) <= 10 * base)
        ]
        return kept_up[-1] if kept_up else None
    for a, b in itertools.pairwise(ok):
        if b["throughput"] < a["throughput"] * 1.10:
            return a
    return ok[-1]

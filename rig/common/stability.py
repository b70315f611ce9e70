"""perf_analyzer's stability rule, which the worker applies to each window as it closes and
``rig bench`` and the analysis apply to stored windows: one copy, free of Locust and gevent."""

from __future__ import annotations


def stable(rows: list[dict], n: int = 3, pct: float = 10.0) -> bool | None:
    """perf_analyzer's rule: the last ``n`` windows' throughput and p50 within ``pct`` % of their mean."""
    if len(rows) < n:
        return None
    last = rows[-n:]
    for key in ("throughput", "p50_us"):
        vals = [r[key] for r in last if r.get(key) is not None]
        if len(vals) < n:
            return False
        mean = sum(vals) / n
        if mean <= 0 or any(abs(v - mean) / mean * 100 > pct for v in vals):
            return False
    return True

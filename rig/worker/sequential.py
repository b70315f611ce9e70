"""A cycle's fixed count of requests (no workload): sent one at a time, the models in turn, and
read as windows of equal counts for the cycle's trend (``rig.common.trends``), never stored."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from rig.common.text import top_messages
from rig.worker.engines.base import Engine, EngineError
from rig.worker.engines.retention import Retained
from rig.worker.outputs import output_is

MAX_CONSECUTIVE_ERRORS = 3
SEQUENTIAL_CHUNKS = 10  # the fixed count's requests read as this many windows (not stored) for its trend


def sequential_requests(
    engine: Engine,
    spec,
    inputs: dict,
    retain: str,
    kept: Retained,
    checks: dict,
    tick: Callable[[], None] | None = None,
) -> dict:
    """``spec.requests`` requests, one at a time, the models in turn; ``inputs``: model -> its
    entries, each model's k-th request carrying entry k mod N. The requests are read as up to
    ``SEQUENTIAL_CHUNKS`` windows of equal counts (``windows``: the trend's, never stored), and
    ``tick()`` is called as each begins and once at the end (the observers sample there)."""
    errors = 0
    timeouts = 0
    bad = 0
    first_error = None
    messages: dict[str, int] = {}
    t0 = time.monotonic()
    n = spec.requests
    sent = 0
    consecutive = 0
    turns = dict.fromkeys(spec.models, 0)
    per_chunk = max(10, -(-n // SEQUENTIAL_CHUNKS))
    done_ns: list[int] = []  # each request's end (monotonic ns), and its latency
    lat_ns: list[int] = []
    ok: list[bool] = []
    starts: list[int] = []  # each chunk's start, once its observers' tick is over (not the load's time)
    for i in range(n):
        if i % per_chunk == 0:
            if tick is not None:
                tick()
            starts.append(time.monotonic_ns())
        model = spec.models[i % len(spec.models)]
        entries = inputs[model]
        entry = entries[turns[model] % len(entries)]
        turns[model] += 1
        sent += 1
        t_req = time.monotonic_ns()
        try:
            r = engine.infer(model, entry, timeout_s=spec.request_timeout)
        except EngineError as e:
            done_ns.append(time.monotonic_ns())
            lat_ns.append(done_ns[-1] - t_req)
            ok.append(False)
            errors += 1
            consecutive += 1
            first_error = first_error or str(e)
            messages[str(e)] = messages.get(str(e), 0) + 1
            timeouts += e.code == "TIMEOUT"
            if e.code == "TIMEOUT" or consecutive >= MAX_CONSECUTIVE_ERRORS:
                break  # the model stopped answering (a dead stub, a stuck execute): stop sending
            continue
        done_ns.append(time.monotonic_ns())
        lat_ns.append(done_ns[-1] - t_req)
        ok.append(True)
        consecutive = 0
        if checks.get(model) and not output_is(checks[model], r.outputs()):
            bad += 1
        if i == n - 1:
            kept.keep(r, retain)
        else:
            r.release()
    wall = time.monotonic() - t0
    if tick is not None:
        tick()
    return {
        "requests": sent,
        "errors": errors,
        "timeouts": timeouts,
        "bad_outputs": bad,
        "lane": "sequential",
        "throughput": (sent - errors) / wall if wall > 0 else None,
        "detail": first_error,
        "error_messages": top_messages([messages]),
        "windows": chunks(int(t0 * 1e9), starts, done_ns, lat_ns, ok, per_chunk),
    }


def chunks(
    t0_ns: int, starts: list[int], done_ns: list[int], lat_ns: list[int], ok: list[bool], per_chunk: int
) -> list[dict]:
    """The fixed count's requests as windows of ``per_chunk`` requests each, each from its start
    (``starts``: after its tick) to its last request's end (the trend's figures: start and length
    in s, requests, errors, throughput, p50 and p99 in us, ``monotonic_end``)."""
    out = []
    for c, k in enumerate(range(0, len(done_ns), per_chunk)):
        start = starts[c] if c < len(starts) else done_ns[k - 1]
        end = done_ns[min(k + per_chunk, len(done_ns)) - 1]
        good = np.array([v for v, g in zip(lat_ns[k : k + per_chunk], ok[k : k + per_chunk]) if g], float) / 1000
        length = (end - start) / 1e9
        out.append(
            {
                "window": len(out) + 1,
                "start_s": (start - t0_ns) / 1e9,
                "length_s": length,
                "requests": int(good.size),
                "errors": int(len(ok[k : k + per_chunk]) - good.size),
                "throughput": good.size / length if length > 0 else None,
                "p50_us": float(np.percentile(good, 50)) if good.size else None,
                "p99_us": float(np.percentile(good, 99)) if good.size else None,
                "monotonic_end": end / 1e9,
            }
        )
    return out

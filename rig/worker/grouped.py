"""A cycle's fixed count of requests sent several at a time (``--requests-in-flight N``): each
group of N submitted at once, the next once all of them have ended, so that a batched model's
scheduler has N requests to put in one ``execute`` (one at a time, it never forms a batch above
one). The same figures as ``rig.worker.sequential`` (the trend's windows, never stored), and the
same retention: the last request's response is kept as the policy says."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from rig.common.text import top_messages
from rig.worker.engines.base import Engine, EngineError
from rig.worker.engines.retention import Retained
from rig.worker.outputs import output_is
from rig.worker.sequential import MAX_CONSECUTIVE_ERRORS, SEQUENTIAL_CHUNKS, chunks


class _Group:
    """One group's requests and how each ended (callbacks from the core's threads)."""

    def __init__(self, n: int):
        self.n = n
        self.ended: dict[int, tuple] = {}  # index -> (end ns, response or None, error or None)
        self.lock = threading.Lock()
        self.all_ended = threading.Event()

    def done(self, i: int) -> Callable:
        def on_end(response, error) -> None:
            with self.lock:
                if i in self.ended:  # a second call (a stream's later response): the first counts
                    if response is not None:
                        response.release()
                    return
                self.ended[i] = (time.monotonic_ns(), response, error)
                if len(self.ended) == self.n:
                    self.all_ended.set()

        return on_end


def grouped_requests(
    engine: Engine,
    spec,
    inputs: dict,
    retain: str,
    kept: Retained,
    checks: dict,
    group: int,
    tick: Callable[[], None] | None = None,
) -> dict:
    """``spec.requests`` requests, ``group`` at a time, the models in turn (as
    ``sequential_requests``); a request not ended within the request timeout counts as a
    timeout, and the load stops there (the model stopped answering)."""
    n = spec.requests
    per_chunk = max(10, -(-n // SEQUENTIAL_CHUNKS))
    turns = dict.fromkeys(spec.models, 0)
    starts: list[int] = []
    f = _Figures(retain, kept, checks)
    c, messages = f.c, f.messages
    t0 = time.monotonic()
    i = 0
    while i < n:
        size = min(group, n - i)
        if i // per_chunk != (i + size - 1) // per_chunk or i % per_chunk == 0 or not starts:
            if tick is not None:
                tick()
            starts.append(time.monotonic_ns())
        g = _Group(size)
        t_req = time.monotonic_ns()
        models = []
        for k in range(size):
            model = spec.models[(i + k) % len(spec.models)]
            entries = inputs[model]
            models.append(model)
            entry = entries[turns[model] % len(entries)]
            turns[model] += 1
            try:
                engine.infer_async(model, entry, g.done(k))
            except EngineError as e:  # refused at submission: it ended, as a failure
                g.done(k)(None, e)
        c["sent"] += size
        g.all_ended.wait(spec.request_timeout)
        last = i + size >= n
        stop = _tally(g, models, t_req, last, f)
        i += size
        if stop:
            break
    wall = time.monotonic() - t0
    if tick is not None:
        tick()
    first_error = next(iter(messages), None)
    return {
        "requests": c["sent"],
        "errors": c["errors"],
        "timeouts": c["timeouts"],
        "bad_outputs": c["bad"],
        "lane": f"grouped-{group}",
        "throughput": (c["sent"] - c["errors"]) / wall if wall > 0 else None,
        "detail": first_error,
        "error_messages": top_messages([messages]),
        "windows": chunks(int(t0 * 1e9), starts, f.done_ns, f.lat_ns, f.ok, per_chunk),
    }


@dataclasses.dataclass
class _Figures:
    """What the groups add up to (each request's end, latency and success, the errors' messages,
    the counts), and what is done with the last response (``retain``: kept in ``kept``)."""

    retain: str
    kept: Retained
    checks: dict
    done_ns: list[int] = dataclasses.field(default_factory=list)
    lat_ns: list[int] = dataclasses.field(default_factory=list)
    ok: list[bool] = dataclasses.field(default_factory=list)
    messages: dict[str, int] = dataclasses.field(default_factory=dict)
    c: dict[str, int] = dataclasses.field(
        default_factory=lambda: {"sent": 0, "errors": 0, "timeouts": 0, "bad": 0, "consecutive": 0}
    )


def _tally(g: _Group, models: list[str], t_req: int, last: bool, f: _Figures) -> bool:
    """Count one group's requests into the figures; True where the load must stop (a timeout, or
    errors in a row)."""
    done_ns, lat_ns, ok, messages, c, checks = f.done_ns, f.lat_ns, f.ok, f.messages, f.c, f.checks
    now = time.monotonic_ns()
    with g.lock:
        ended = dict(g.ended)
        for k in range(g.n):  # those not ended now never count again: their callback is dropped
            g.ended.setdefault(k, (now, None, None))
    stop = False
    for k in range(g.n):
        if k not in ended:
            done_ns.append(now)
            lat_ns.append(now - t_req)
            ok.append(False)
            c["errors"] += 1
            c["timeouts"] += 1
            messages["request timed out (no response within the request timeout)"] = (
                messages.get("request timed out (no response within the request timeout)", 0) + 1
            )
            stop = True
            continue
        t_end, response, error = ended[k]
        done_ns.append(t_end)
        lat_ns.append(t_end - t_req)
        if error is not None:
            ok.append(False)
            c["errors"] += 1
            c["consecutive"] += 1
            messages[str(error)] = messages.get(str(error), 0) + 1
            stop = stop or c["consecutive"] >= MAX_CONSECUTIVE_ERRORS * g.n
            continue
        ok.append(True)
        c["consecutive"] = 0
        if checks.get(models[k]) and not output_is(checks[models[k]], response.outputs()):
            c["bad"] += 1
        if last and k == g.n - 1:
            f.kept.keep(response, f.retain)
        else:
            response.release()
    return stop

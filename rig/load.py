"""Locust-driven sustained in-process load, inside the worker that hosts the server.

Locust is used as a library: an ``Environment`` with a local runner, a ``LoadTestShape`` from
``workloads/``, and ``TritonUser`` subclasses whose requests go to the in-process engine (no
HTTP). Each user owns a *lane*: requests kept in flight by the native fast path
(``rig.fastpath``), or by ``PyLane`` over the engine's async API where that is not available.
Completions never touch the hub from Triton's threads: the lanes collect exact latencies (ns)
on their own, and one greenlet (the sink's pump) drains every lane now and then into an HDR
histogram per window and into Locust's own stats, so Locust's percentiles, CSV history and web
UI work.

Closed loop: ``users`` x ``in_flight`` requests outstanding. Open loop: a seeded Poisson (or
constant) schedule of send times; latency counts from the scheduled time (MLPerf LoadGen's rule),
so a stalled server cannot hide behind coordinated omission.
"""

from __future__ import annotations

import base64
import collections
import os
import sys
import time
from typing import Callable

import gevent  # locust depends on gevent; imported by the worker before the core loads
import gevent.socket
import greenlet
import locust.stats
import numpy as np
from hdrh.histogram import HdrHistogram
from locust import LoadTestShape, User, constant, task
from locust.env import Environment

from rig import probes
from rig.schedule import arrival_times, stable
from rig.engines.base import Engine, EngineError

HDR_MAX_US = 60_000_000  # one minute
HDR_DIGITS = 3
# How often the sink's pump drains every lane. One greenlet for all lanes: each wake of the hub
# takes the GIL from the threads that complete requests (a greenlet per user, waking on each
# lane's eventfd at 100 Hz, cost the official engine a sixth of its throughput at 4 users).
DRAIN_PACE_S = 0.01

# ---------------------------------------------------------------- lanes

class PyLane:
    """Closed-loop lane over ``Engine.infer_async`` (slower; for engines without the fast path)."""

    def __init__(self, engine: Engine, model: str, inputs: dict, in_flight: int = 1):
        self.engine, self.model, self.inputs, self.in_flight = engine, model, inputs, in_flight
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._lat: list[int] = []
        self._errors = 0
        self._first_error = None
        self._running = False
        self._outstanding = 0

    def _submit(self):
        t0 = time.monotonic_ns()
        self._outstanding += 1

        def done(response, error, t0=t0):
            t1 = time.monotonic_ns()
            self._outstanding -= 1
            if error is not None:
                self._errors += 1
                self._first_error = self._first_error or str(error)
            else:
                self._lat.append(t1 - t0)
                response.release()
            try:
                os.eventfd_write(self._fd, 1)
            except OSError:
                pass
            if self._running and error is None:
                self._submit()

        try:
            self.engine.infer_async(self.model, self.inputs, done)
        except EngineError as e:
            self._outstanding -= 1
            self._errors += 1
            self._first_error = self._first_error or str(e)

    def start_closed(self):
        self._running = True
        for _ in range(self.in_flight):
            self._submit()

    def stop(self, timeout_s: float = 30) -> bool:
        self._running = False
        deadline = time.monotonic() + timeout_s
        while self._outstanding > 0 and time.monotonic() < deadline:
            gevent.sleep(0.001)
        return self._outstanding == 0

    def drain(self):
        try:
            os.eventfd_read(self._fd)  # re-arm the wake-up, as the native lane's drain does
        except (BlockingIOError, OSError):
            pass
        lat, self._lat = self._lat, []
        errors, self._errors = self._errors, 0
        return np.asarray(lat, dtype=np.int64), errors

    def fileno(self):
        return self._fd

    def first_error(self):
        return self._first_error

    def close(self, timeout_s: float = 30):
        self.stop(timeout_s)
        os.close(self._fd)
        return True


def make_lane(engine: Engine, model: str, inputs: dict, in_flight: int):
    """The engine's own lane (capi: native; tritonserver: its asyncio loop), else ``PyLane``."""
    return engine.lane(model, inputs, in_flight) or PyLane(engine, model, inputs, in_flight=in_flight)


# ---------------------------------------------------------------- measurement

def record_many(hist: HdrHistogram, values: np.ndarray) -> None:
    """``hist.record_value(v)`` for every ``v`` in ``values`` (integers in the histogram's range),
    in numpy: the same bucket arithmetic as ``hdrh``'s ``_counts_index_for``, added into its
    counts array in place. Per value in Python it cost most of the drain's time on the hub."""
    if values.size == 0:
        return
    v = values.astype(np.int64, copy=False)
    bits = np.frexp((v | hist.sub_bucket_mask).astype(np.float64))[1]  # bit length (exact below 2**53)
    bucket = bits - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub_bucket = v >> (bucket + hist.unit_magnitude)
    index = ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + (sub_bucket - hist.sub_bucket_half_count)
    np.add.at(np.ctypeslib.as_array(hist.counts), index, 1)
    hist.total_count += int(v.size)
    hist.min_value = min(hist.min_value, int(v.min()))
    hist.max_value = max(hist.max_value, int(v.max()))


class Window:
    """Exact latencies of one measurement window: an HDR histogram in microseconds."""

    def __init__(self, index: int, start_s: float):
        self.index = index
        self.start_s = start_s
        self.hist = HdrHistogram(1, HDR_MAX_US, HDR_DIGITS)
        self.requests = 0
        self.errors = 0
        self.hub_block_max_s = 0.0
        self._sum_ns = 0  # the exact mean (the histogram's own walks every bucket in Python)

    def record(self, latencies_ns: np.ndarray, errors: int):
        self.errors += errors
        if latencies_ns.size == 0:
            return
        record_many(self.hist, np.clip((latencies_ns + 500) // 1000, 1, HDR_MAX_US))
        self.requests += int(latencies_ns.size)
        self._sum_ns += int(latencies_ns.sum())

    def row(self, length_s: float, **tags) -> dict:
        h = self.hist
        n = h.get_total_count()
        # one pass over the counts for all percentiles (each lookup alone walks ~27k buckets)
        table = h.get_percentile_to_value_dict([50, 90, 99, 99.9]) if n else {}

        def pct(p):
            return float(table[p]) if n else None

        stats = probes.process_stats()
        gpu = probes.gpu()
        return dict(window=self.index, start_s=self.start_s, length_s=length_s,
                    gpu_memory_bytes=gpu.memory_used(), gpu_utilization=gpu.utilization(),
                    requests=self.requests, errors=self.errors,
                    throughput=self.requests / length_s if length_s > 0 else 0.0,
                    p50_us=pct(50), p90_us=pct(90), p99_us=pct(99), p999_us=pct(99.9),
                    max_us=float(h.get_max_value()) if n else None,
                    mean_us=self._sum_ns / self.requests / 1000.0 if self.requests else None,
                    hub_block_max_ms=self.hub_block_max_s * 1000.0,
                    worker_rss_bytes=stats["rss_bytes"],
                    histogram=base64.b64encode(h.encode()).decode() if n else None, **tags)


class HubMonitor:
    """The hub's longest block: the longest time any greenlet ran without switching back to the
    hub (which could not serve its loop meanwhile). Measured at every greenlet switch through
    ``greenlet.settrace``, so it needs no wake-ups of its own and catches every block, however
    short. A previous tracer (gevent's monitor thread, say) is chained, and restored by ``stop``."""

    def __init__(self):
        self.max_block_s = 0.0
        self._hub = gevent.get_hub()
        self._last = time.perf_counter()
        self._previous = greenlet.settrace(self._trace)

    def _trace(self, event, args):
        if event in ("switch", "throw"):
            now = time.perf_counter()
            if args[0] is not self._hub and now - self._last > self.max_block_s:
                self.max_block_s = now - self._last
            self._last = now
        if self._previous is not None:
            self._previous(event, args)

    def take(self) -> float:
        m, self.max_block_s = self.max_block_s, 0.0
        return m

    def stop(self):
        greenlet.settrace(self._previous)


# ---------------------------------------------------------------- Locust users

def _locust_buckets(ms: np.ndarray) -> np.ndarray:
    """``locust.stats.bucket_response_time`` over an array (about two significant digits)."""
    return np.where(ms < 100, np.round(ms), np.where(ms < 1000, np.round(ms, -1),
                    np.where(ms < 10000, np.round(ms, -2), np.round(ms, -3)))).astype(np.int64)


_STOCK_BUCKETS = locust.stats.bucket_response_time


def log_to_locust(stats, name: str, ms: np.ndarray, request_type: str = "infer") -> None:
    """Record successful requests in Locust's stats (``RequestStats``) as Locust's own
    ``request`` event would, one entry and the total, but for a whole drain at once: per request
    it costs Python time on the cores the server needs. The figures are the same: count,
    sum, min/max, the per-second counts and the bucketed response times that Locust's
    percentiles, CSV history and web UI read."""
    if ms.size == 0:
        return
    now = time.time()
    second = int(now)
    if locust.stats.bucket_response_time is _STOCK_BUCKETS:
        keys, counts = np.unique(_locust_buckets(ms), return_counts=True)
        buckets = list(zip(keys.tolist(), counts.tolist()))
    else:  # replaced at runtime by the user: honour it
        buckets = list(collections.Counter(locust.stats.bucket_response_time(v) for v in ms.tolist()).items())
    n, total, lo, hi = int(ms.size), float(ms.sum()), float(ms.min()), float(ms.max())
    for entry in (stats.total, stats.get(name, request_type)):
        if entry.use_response_times_cache and entry.last_request_timestamp \
                and second > int(entry.last_request_timestamp):
            entry._cache_response_times(second - 1)
        entry.num_requests += n
        entry.num_reqs_per_sec[second] += n
        entry.last_request_timestamp = now
        entry.total_response_time += total
        entry.min_response_time = lo if entry.min_response_time is None else min(entry.min_response_time, lo)
        entry.max_response_time = max(entry.max_response_time, hi)
        for key, count in buckets:
            entry.response_times[key] += count


class TritonUser(User):
    """A Locust user whose client is an in-process Triton lane. The lane keeps its requests in
    flight by itself; the sink's pump drains it. Concrete users only set fields."""

    abstract = True
    wait_time = constant(0)
    # Set by ``run_locust`` on a subclass made per run:
    engine: Engine = None
    model: str = ""
    inputs: dict = {}
    in_flight: int = 1
    sink: "Sink" = None

    def on_start(self):
        self.lane = make_lane(self.engine, self.model, self.inputs, self.in_flight)
        self.lane.start_closed()
        self.sink.add(self.lane, self.model)

    @task
    def hold(self):
        gevent.sleep(3600)  # Locust stops a user by killing this greenlet; on_stop then runs

    def on_stop(self):
        self.lane.stop()
        self.sink.remove(self.lane)
        self.lane.close()


class Sink:
    """Where lanes' completions go: the current window's histogram and Locust's stats. One pump
    greenlet drains every lane each ``DRAIN_PACE_S``; a window boundary drains them all first,
    so a completion lands in the window in which it was drained, at most one pace late."""

    def __init__(self, env: Environment | None = None):
        self.window: Window | None = None
        self.env = env
        self.lanes: dict = {}  # lane -> model name
        self.total = 0
        self.errors = 0
        self.first_error: str | None = None
        self._pump = None

    def summary(self, wall_s: float, rows: list[dict]) -> dict:
        return {"requests": self.total + self.errors, "errors": self.errors,
                "throughput": self.total / wall_s if wall_s > 0 else None, "detail": self.first_error,
                "windows": rows}

    def add(self, lane, name: str) -> None:
        self.lanes[lane] = name

    def remove(self, lane) -> None:
        name = self.lanes.pop(lane, None)
        if name is not None:
            self.take(lane, name)

    def take(self, lane, name: str) -> None:
        lat, errors = lane.drain()
        if errors:
            self.first_error = self.first_error or lane.first_error()
        self.total += int(lat.size)
        self.errors += errors
        if self.window is not None:
            self.window.record(lat, errors)
        if self.env is not None:
            log_to_locust(self.env.stats, name, lat / 1e6)
            if errors:
                error = EngineError(lane.first_error() or "error")
                for _ in range(errors):
                    self.env.events.request.fire(request_type="infer", name=name, response_time=None,
                                                 response_length=0, exception=error, context=None)

    def take_all(self) -> None:
        for lane, name in list(self.lanes.items()):
            self.take(lane, name)

    def switch(self, window: Window | None) -> Window | None:
        """Drain every lane into the current window, then make ``window`` current; returns the
        window closed."""
        self.take_all()
        old, self.window = self.window, window
        return old

    def start_pump(self) -> None:
        def pump():
            while True:
                gevent.sleep(DRAIN_PACE_S)
                self.take_all()

        self._pump = gevent.spawn(pump)

    def stop_pump(self) -> None:
        if self._pump is not None:
            self._pump.kill()
            self._pump = None
        self.take_all()


def load_shape(name: str, users: int, seconds: float) -> LoadTestShape | None:
    """The shape of ``workloads/<name>.py`` for this many users over this many seconds."""
    from rig.workloads import shapes

    return shapes.make(name, users=users, seconds=seconds)


def run_locust(engine: Engine, models: list[str], inputs: dict, *, users: int, in_flight: int,
               seconds: float, window_seconds: float, shape: str = "steady",
               emit: Callable[[dict], None], tags: dict, csv_prefix: str | None = None,
               web_port: int | None = None) -> dict:
    """Closed loop under a Locust shape; one window row per ``window_seconds``. ``inputs`` maps
    each model to its inputs; users are spread over the models."""
    shape_obj = load_shape(shape, users, seconds)
    # One user class per model, equal weights: Locust spreads the users over the models.
    user_classes = [type(f"TritonUser_{i}", (TritonUser,), {
        "engine": engine, "model": m, "inputs": inputs[m], "in_flight": in_flight, "weight": 1})
        for i, m in enumerate(models)]
    env = Environment(user_classes=user_classes, shape_class=shape_obj)
    sink = Sink(env)
    for cls in user_classes:
        cls.sink = sink
    runner = env.create_local_runner()
    web = None
    if web_port:
        import argparse

        from locust.argument_parser import default_args_dict

        # The UI reads Locust's options; give it the defaults, never the worker's own argv
        # (its page handler parses sys.argv for extra options: the worker's are done with).
        env.parsed_options = argparse.Namespace(**default_args_dict())
        sys.argv = sys.argv[:1]
        web = env.create_web_ui(host="127.0.0.1", port=web_port)
    writer = None
    if csv_prefix:
        from locust.stats import StatsCSVFileWriter

        writer = StatsCSVFileWriter(env, [], csv_prefix, full_history=True)
        gevent.spawn(writer)
    hub = HubMonitor()
    sink.start_pump()
    t0 = time.monotonic()
    if shape_obj is not None:
        runner.start_shape()
    else:
        runner.start(users, spawn_rate=max(users, 1) * 100)
    rows = _windows(sink, hub, t0, seconds, window_seconds, emit, tags,
                    conc=lambda: runner.user_count * in_flight)
    runner.quit()
    sink.stop_pump()
    if writer:
        writer.close_files()
    if web:
        web.stop()
    hub.stop()
    return sink.summary(time.monotonic() - t0, rows)


def run_open(engine: Engine, model: str, inputs: dict, *, rate: float, seconds: float,
             window_seconds: float, arrivals: str, seed: int, emit: Callable[[dict], None],
             tags: dict) -> dict:
    """Open loop: one lane submits on a seeded schedule; latency from the scheduled time."""
    lane = engine.lane(model, inputs, 1)
    if lane is None or not hasattr(lane, "start_open"):
        raise EngineError(f"open-loop load needs a lane of the engine's own ({engine.name} has none "
                          "here: the capi engine needs a C compiler)", "UNSUPPORTED")
    sink = Sink()
    hub = HubMonitor()
    t0 = time.monotonic()
    start_ns = time.monotonic_ns() + 5_000_000
    lane.start_open(arrival_times(rate, seconds, start_ns, arrivals, seed))
    sink.add(lane, model)
    sink.start_pump()
    rows = _windows(sink, hub, t0, seconds, window_seconds, emit, tags, conc=lambda: None, rate=rate)
    sink.stop_pump()
    lane.stop()
    sink.remove(lane)
    lane.close()
    hub.stop()
    return sink.summary(time.monotonic() - t0, rows)


def _windows(sink: Sink, hub: HubMonitor, t0: float, seconds: float, window_seconds: float,
             emit, tags, conc, rate=None) -> list[dict]:
    rows = []
    n = max(1, int(round(seconds / window_seconds)))
    sink.switch(Window(1, time.monotonic() - t0))
    hub.take()
    for i in range(n):
        gevent.sleep(max(0.0, t0 + (i + 1) * window_seconds - time.monotonic()))
        # The next window opens in the same step as this one closes: no drain falls between.
        now = time.monotonic() - t0
        w = sink.switch(Window(i + 2, now) if i + 1 < n else None)
        w.hub_block_max_s = hub.take()
        length = now - w.start_s
        # Percentiles and encoding walk the whole histogram: off the hub, in a native thread.
        row = gevent.get_hub().threadpool.apply(w.row, (length,), dict(concurrency=conc(), rate=rate, **tags))
        row["stable"] = stable(rows + [row])
        rows.append(row)
        emit(row)
    return rows


# ---------------------------------------------------------------- inside a soak cycle

def make_cycle_workload(wcfg: dict, emit_window: Callable[..., None]):
    """A workload function for ``cycle.run_cycle``: Locust load for ``seconds`` on every model,
    then the retention policy applied to one last request."""

    def workload(engine: Engine, spec, inputs: dict, kept, cycle: int) -> dict:
        from rig.cycle import apply_retention

        model = spec.models[0]
        tags = {"mode": "open" if wcfg.get("rate") else "closed", "cycle": cycle}

        def emit(row):
            emit_window(**row)

        if wcfg.get("rate"):
            out = run_open(engine, model, inputs[model], rate=float(wcfg["rate"]),
                           seconds=float(wcfg["seconds"]), window_seconds=float(wcfg["window_seconds"]),
                           arrivals=wcfg.get("arrivals", "poisson"), seed=int(wcfg.get("seed", 0)),
                           emit=emit, tags=tags)
        else:
            csv = os.path.join(spec.log_dir, f"locust-c{cycle:06d}") if spec.log_dir else None
            out = run_locust(engine, list(spec.models), inputs, users=int(wcfg["users"]),
                             in_flight=int(wcfg["in_flight"]), seconds=float(wcfg["seconds"]),
                             window_seconds=float(wcfg["window_seconds"]), shape=wcfg.get("name", "steady"),
                             emit=emit, tags=tags, csv_prefix=csv, web_port=wcfg.get("web_port"))
        out.pop("windows", None)
        apply_retention(engine, model, inputs[model], spec.retain, kept, spec.request_timeout)
        return out

    return workload

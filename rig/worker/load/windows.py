"""Measurement windows: exact latencies per window in an HDR histogram, and the hub's longest
block, one row per window. For a streaming (decoupled) model a window also holds the time to each
request's first response and the gaps between responses, in HDR histograms of their own, and the
responses per request; other windows leave those columns null (nothing is kept or encoded)."""

from __future__ import annotations

import time

import gevent
import greenlet
import numpy as np
from hdrh.histogram import HdrHistogram

from rig.common import hdr, probes
from rig.common.hdr import HIGHEST_US as HDR_MAX_US
from rig.common.stability import stable
from rig.worker.engines import memory


def distinct(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``v`` (int64) and how often each comes: a count per value over the
    span between the least and the greatest, where that span is short (a drain's latencies in µs
    cluster: O(n), no sort), else ``np.unique``."""
    lo, hi = int(v.min()), int(v.max())
    if hi - lo < 1 << 16:
        counts = np.bincount(v - lo)
        seen = np.flatnonzero(counts)
        return seen + lo, counts[seen]
    return np.unique(v, return_counts=True)


def record_many(hist: HdrHistogram, values: np.ndarray) -> None:
    """``hist.record_value(v)`` for every ``v`` in ``values`` (integers in the histogram's range),
    in numpy: the same bucket arithmetic as ``hdrh``'s ``_counts_index_for``, added into its
    counts array in place, once per distinct value. Per value in Python it cost most of the
    drain's time on the hub; per value in numpy (``np.add.at``), 4 ms a drain of 15,000
    latencies, on the worker's main thread, which shares the cores with the server (issue 54)."""
    if values.size == 0:
        return
    v = values.astype(np.int64, copy=False)
    distinct_, times = distinct(v)
    bits = np.frexp((distinct_ | hist.sub_bucket_mask).astype(np.float64))[1]  # bit length (exact below 2**53)
    bucket = bits - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub_bucket = distinct_ >> (bucket + hist.unit_magnitude)
    index = ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + (sub_bucket - hist.sub_bucket_half_count)
    counts = np.ctypeslib.as_array(hist.counts)
    np.add.at(counts, index, times.astype(counts.dtype))
    hist.total_count += int(v.size)
    hist.min_value = min(hist.min_value, int(distinct_[0]))
    hist.max_value = max(hist.max_value, int(distinct_[-1]))


def _us(ns: np.ndarray) -> np.ndarray:
    """Nanoseconds as the histograms' microseconds, within their range (a stream's figures are
    not counted in ``clipped``, which counts requests' latencies)."""
    return np.clip((ns + 500) // 1000, 1, HDR_MAX_US)


# Histograms of closed windows, reset, for the next windows: a new one each window (136 KiB of
# counts) grew the worker's memory by that much a window until the allocator settled (measured:
# +150 KB/s of load for 14 s), which the growth verdict read as the worker leaking.
_SPARE: list[HdrHistogram] = []


def _histogram() -> HdrHistogram:
    return _SPARE.pop() if _SPARE else hdr.new()


class Window:
    """Exact latencies of one measurement window: an HDR histogram in microseconds."""

    def __init__(self, index: int, start_s: float):
        self.index = index
        self.start_s = start_s
        self.hist = _histogram()
        self.error_hist: HdrHistogram | None = None  # failed requests, apart
        self.requests = 0
        self.errors = 0
        self.hub_block_max_s = 0.0
        self._sum_ns = 0  # the exact mean (the histogram's own walks every bucket in Python)
        self.bad_outputs = 0
        self.timeouts = 0  # of the errors, requests unanswered within the request timeout
        self.lost_samples = 0
        self.clipped = 0
        self.scheduled: int | None = None  # open loop (set by the runner)
        self.dropped: int | None = None
        # streaming requests (record_stream): made on the first one, so other windows pay nothing
        self.first_hist: HdrHistogram | None = None  # submission to the first data response
        self.gap_hist: HdrHistogram | None = None  # between consecutive data responses
        self.responses = 0  # data responses of the streaming requests answered in this window

    def recycle(self) -> None:
        """Hand its histograms back for later windows, once its row is made."""
        for h in (self.hist, self.error_hist, self.first_hist, self.gap_hist):
            if h is not None:
                h.reset()
                _SPARE.append(h)
        self.hist = self.error_hist = self.first_hist = self.gap_hist = None  # type: ignore[assignment]

    def record(self, latencies_ns: np.ndarray, errors: int, failed_ns: np.ndarray | None = None):
        """Completed requests' latencies, the count of failed ones, and the latencies of those
        failed requests that had one (a request refused at submission has none)."""
        self.errors += errors
        if failed_ns is not None and failed_ns.size:
            if self.error_hist is None:
                self.error_hist = _histogram()
            self._add(self.error_hist, failed_ns)
        if latencies_ns.size == 0:
            return
        self._add(self.hist, latencies_ns)
        self.requests += int(latencies_ns.size)
        self._sum_ns += int(latencies_ns.sum())

    def record_stream(self, first_ns: np.ndarray, gaps_ns: np.ndarray, counts: np.ndarray) -> None:
        """Streaming requests answered: each one's time to its first data response and its count
        of data responses (one of each per request, as their latencies are recorded), and the
        gaps between data responses that came meanwhile."""
        if first_ns.size:
            if self.first_hist is None:
                self.first_hist = _histogram()
            record_many(self.first_hist, _us(first_ns))
            self.responses += int(counts.sum())
        if gaps_ns.size:
            if self.gap_hist is None:
                self.gap_hist = _histogram()
            record_many(self.gap_hist, _us(gaps_ns))

    def _add(self, hist: HdrHistogram, latencies_ns: np.ndarray) -> None:
        us = (latencies_ns + 500) // 1000
        self.clipped += int(np.count_nonzero(us > HDR_MAX_US))
        record_many(hist, np.clip(us, 1, HDR_MAX_US))

    def _stream_columns(self) -> dict:
        """The streaming columns: null unless a streaming request was answered in the window (or a
        gap came). Responses per request: over the requests whose first response was recorded."""
        f, g = self.first_hist, self.gap_hist
        nf = f.get_total_count() if f is not None else 0
        ng = g.get_total_count() if g is not None else 0
        ft = f.get_percentile_to_value_dict([50, 99]) if nf else {}
        gt = g.get_percentile_to_value_dict([50, 99]) if ng else {}
        return dict(
            first_response_histogram=hdr.encode(f) if nf else None,
            first_p50_us=float(ft[50]) if nf else None,
            first_p99_us=float(ft[99]) if nf else None,
            gap_histogram=hdr.encode(g) if ng else None,
            gap_p50_us=float(gt[50]) if ng else None,
            gap_p99_us=float(gt[99]) if ng else None,
            responses=self.responses if nf else None,
            responses_per_request=self.responses / nf if nf else None,
        )

    def row(self, length_s: float, **tags) -> dict:
        h, e = self.hist, self.error_hist
        n = h.get_total_count()
        # one pass over the counts for all percentiles (each lookup alone walks ~27k buckets)
        table = h.get_percentile_to_value_dict([50, 90, 99, 99.9]) if n else {}

        def pct(p):
            return float(table[p]) if n else None

        stats = probes.process_stats()
        gpu = probes.gpu()
        return dict(
            window=self.index,
            start_s=self.start_s,
            length_s=length_s,
            gpu_memory_bytes=gpu.memory_used(),
            gpu_utilization=gpu.utilization(),
            requests=self.requests,
            errors=self.errors,
            throughput=self.requests / length_s if length_s > 0 else 0.0,
            p50_us=pct(50),
            p90_us=pct(90),
            p99_us=pct(99),
            p999_us=pct(99.9),
            max_us=float(h.get_max_value()) if n else None,
            mean_us=self._sum_ns / self.requests / 1000.0 if self.requests else None,
            hub_block_max_ms=self.hub_block_max_s * 1000.0,
            bad_outputs=self.bad_outputs,
            timeouts=self.timeouts,
            lost_samples=self.lost_samples,
            clipped=self.clipped,
            scheduled=self.scheduled,
            dropped=self.dropped,
            worker_rss_bytes=stats["rss_bytes"],
            histogram=hdr.encode(h) if n else None,
            error_histogram=hdr.encode(e) if e else None,
            error_max_us=float(e.get_max_value()) if e else None,
            **self._stream_columns(),
            **tags,
        )


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


def memory_columns(lanes) -> dict:
    """Where the window's tensors lived: the inputs' placement, and the outputs' memory as the
    allocators handed it out (the native lane's allocator gives host memory only)."""
    out = memory.OUTPUTS.take()
    if "native" in lanes:
        out = ",".join(sorted(set(out.split(",") if out else ()) | {"cpu"}))
    return {"input_memory": memory.PLACEMENT.label, "output_memory": out}


def run_windows(
    sink,
    hub: HubMonitor,
    seconds: float,
    window_seconds: float,
    emit,
    tags,
    conc,
    rate=None,
    start=None,
    finish=None,
    before_close=None,
    server=None,
) -> tuple[list[dict], float]:
    """One row per window; returns the rows and the wall time. The first window opens before
    ``start()`` starts the load, and ``finish()`` ends it once the last window's time is up: it
    stops sending and waits for the requests in flight, which land in the last window (whose
    length grows by that wait). So every completion falls in a window. ``before_close(window,
    end_ns)`` sees each window as it closes (``end_ns`` None for the last). ``server``: Triton's
    statistics (``rig.worker.serverstats.ServerStats``), read as the first window opens and at
    each close, in the step that switches windows (None: not read)."""
    rows = []
    n = max(1, int(round(seconds / window_seconds)))
    if server is not None:
        server.begin()
    t0 = time.monotonic()
    sink.switch(Window(1, 0.0))
    hub.take()
    if start is not None:
        start()
    for i in range(n):
        gevent.sleep(max(0.0, t0 + (i + 1) * window_seconds - time.monotonic()))
        concurrency = conc()
        last = i + 1 == n
        block = hub.take()  # the load's own period: the teardown of the load is not counted
        if last and finish is not None:
            finish(sink.window)
            hub.take()
        if before_close is not None:
            before_close(sink.window, None if last else time.monotonic_ns())
        # The next window opens in the same step as this one closes: no drain falls between.
        now = time.monotonic() - t0
        w = sink.switch(None if last else Window(i + 2, now))
        seen = server.take() if server is not None else {}  # what the server saw of the same requests
        w.hub_block_max_s = block
        length = now - w.start_s
        # Percentiles and encoding walk the whole histogram: off the hub, in a native thread.
        row = gevent.get_hub().threadpool.apply(w.row, (length,), dict(concurrency=concurrency, rate=rate, **tags))
        w.recycle()
        row.update(seen)
        row["stable"] = stable(rows + [row])
        row["monotonic_end"] = t0 + now  # when it closed, on the worker's clock (not stored: the samples' x)
        row["lane"] = sink.lane_label()
        row.update(memory_columns(sink.kinds))
        rows.append(row)
        emit(row)
    return rows, time.monotonic() - t0

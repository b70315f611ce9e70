"""A run's cycles as people read them: the running tally (``Tally``) behind the progress bar, the
summary and the JUnit XML, one line per cycle (``cycle_line``) and the summary table."""

from __future__ import annotations

import collections
import dataclasses
import typing

from rig.common.text import num
from rig.contract import server_stats, verdicts
from rig.contract.rows import CycleRow, WindowRow
from rig.scenarios import shapes

# what "where the time goes" reads of a window
_SERVER_KEYS = ("requests", "mean_us", *server_stats.ALL_COLUMNS, *server_stats.SPLIT_COLUMNS)


@dataclasses.dataclass
class Tally:
    """Running figures of a run, for the progress bar and the summary."""

    rows: list[CycleRow] = dataclasses.field(default_factory=list)
    p50_us: dict = dataclasses.field(default_factory=dict)  # cycle -> the median p50 of its windows
    server: list = dataclasses.field(default_factory=list)  # the rig's windows' server columns (and client mean)

    def add(self, row: CycleRow, windows: tuple[WindowRow, ...] = ()):
        self.rows.append(row)
        self.server.extend(
            {k: getattr(w, k) for k in _SERVER_KEYS}
            for w in windows
            if w.tool == "rig" and w.server_success is not None
        )
        p50 = [w.p50_us for w in windows if w.p50_us is not None and w.tool == "rig"]
        if p50:
            import statistics

            self.p50_us[row.cycle] = statistics.median(p50)

    def run_trend(self) -> dict:
        """The trend across the run's cycles, in order: throughput and p50 against the load run so
        far (``rig.common.trends.run_trend``); empty with fewer than 4 measured cycles."""
        from rig.common import trends

        rows = sorted((r for r in self.rows if r.throughput and r.workload_s), key=lambda r: r.cycle)
        if len(rows) < trends.MIN_POINTS:
            return {}
        load, at = [], 0.0
        for r in rows:
            at += r.workload_s
            load.append(at)
        return trends.run_trend(
            load, [r.throughput for r in rows], [self.p50_us.get(r.cycle, float("nan")) for r in rows]
        )

    @property
    def outcomes(self) -> collections.Counter:
        return collections.Counter(verdicts.tally(self.rows, "outcome"))

    @property
    def load_outcomes(self) -> collections.Counter:
        return collections.Counter(verdicts.tally(self.rows, "load_outcome"))

    @property
    def growth_outcomes(self) -> collections.Counter:
        return collections.Counter(verdicts.tally(self.rows, "growth_outcome"))

    @property
    def finalize_success(self) -> float | None:
        return verdicts.finalize_success(self.rows)

    @property
    def stop_latencies(self) -> list[float]:
        return [r.stop_latency_s for r in self.rows if r.stop_latency_s is not None]

    @property
    def leaks(self) -> tuple[int, int]:
        return (sum(r.stubs_killed or 0 for r in self.rows), sum(r.shm_regions_leaked or 0 for r in self.rows))


@dataclasses.dataclass
class Judged:
    """A run as it is judged and reported (the JUnit file, the summary JSON, an interruption):
    the prepared run (``orchestrator.Prepared``: its config, runtime, engine, model), its cycles
    so far, the verdicts it allows, the command, and when it started (a timestamp and the
    monotonic clock)."""

    p: typing.Any  # rig.parent.orchestrator.Prepared
    tally: Tally
    allowed: tuple[str, ...]
    command: str
    started: tuple[str, float]

    @property
    def cfg(self):
        return self.p.config


def cycle_line(r: CycleRow) -> str:
    """The one-line human summary of a cycle."""
    f = num
    parts = [
        f"cycle {r.cycle}: {r.outcome}",
        f"load {r.load_outcome or '-'}",
        *([f"growth {r.growth_outcome}"] if r.growth_outcome else []),
        f"start {f(r.start_latency_s)} s",
        f"stop {f(r.stop_latency_s)} s",
        (
            f"finalize {f(r.finalize_before_stop, '{}')}/{f(r.finalize_expected, '{}')} before stop, "
            f"{f(r.finalize_after_stop, '{}')} after"
        ),
    ]
    if r.finalize_errors:
        parts.append(f"{r.finalize_errors} finalize raised")
    parts.append(f"stubs alive after stop {f(r.stubs_alive_after_stop, '{}')}")
    if r.stubs_killed:
        parts.append(f"stubs killed {r.stubs_killed}")
    if r.shm_regions_leaked:
        parts.append(f"shm leaked {r.shm_regions_leaked}")
    if r.stub_crashes:
        parts.append(
            f"stub crashes {r.stub_crashes}"
            + (f" ({r.stub_exit_aborts} at exit, after its finalize)" if r.stub_exit_aborts else "")
        )
    if r.in_flight:  # what a scenario's client saw (rig.worker.clients.clientside)
        parts.append(
            f"in flight at stop {r.in_flight}: {r.in_flight_answered or 0} answered, "
            f"{r.in_flight_failed or 0} failed, {r.in_flight_lost or 0} lost"
        )
    if r.refused:
        parts.append(f"{r.refused} refused at submission")
    if r.loading_at_stop:
        parts.append(f"{r.loading_at_stop} loading at stop")
    if r.ready_after_load is False:
        parts.append("not ready after the load")
    if r.cleanup and r.cleanup != "ok":
        parts.append(f"cleanup {r.cleanup}")
    if r.throughput:
        parts.append(f"{r.throughput:,.0f} infer/s")
    if r.errors:
        parts.append(f"{r.errors} request errors" + (f" ({r.timeouts} unanswered)" if r.timeouts else ""))
    parts.extend(growth_parts(r))
    if r.bad_outputs:
        parts.append(f"{r.bad_outputs} wrong outputs")
    # Each verdict's reason, the stop's first: the load's own words must not hide the stop's.
    if r.outcome in verdicts.STOP_FAILED and r.stop_error:
        parts.append(f"(stop: {r.stop_error[:160]})")
    first = _first_message(r) if r.load_outcome not in (None, *verdicts.GOOD, verdicts.NOT_MEASURED) else None
    if first:
        parts.append(f"(load: {first[:160]})")
    elif r.outcome not in (*verdicts.GOOD, *verdicts.STOP_FAILED) and (r.detail or r.stop_error):
        parts.append(f"({(r.detail or r.stop_error)[:160]})")
    if r.growth_outcome in ("leaking", "slowing"):  # what passed its threshold, as the worker noted it
        notes = [n for n in (r.detail or "").split("; ") if n.startswith(("leaking: ", "slowing: "))]
        if notes:
            parts.append(f"({'; '.join(notes)[:240]})")
    return " | ".join(parts)


def growth_parts(r: CycleRow) -> list[str]:
    """What the growth verdict read: the process that grew most per 1,000 requests, and the load's
    slowdown, each where it was measured."""
    out = []
    if r.stub_growth_per_1k_b is not None:  # where the models live; the worker's is in the row
        out.append(f"stub {r.stub_growth_model} {r.stub_growth_per_1k_b / 1000:+,.1f} KB/1k req")
    if r.slowdown_pct is not None and (r.slowdown_low_pct or 0) > 0:  # the noise of a clean load is left out
        out.append(f"{r.slowdown_pct:+,.0f} % slower at the end (at least {r.slowdown_low_pct:+,.0f} %)")
    return out


def _first_message(r: CycleRow) -> str | None:
    """The load's most frequent error message, else the cycle's detail."""
    import json

    if r.error_messages:
        try:
            top = [m for m in json.loads(r.error_messages) if m != "(other messages)"]
            if top:
                return top[0]
        except ValueError:
            pass
    return r.detail


def summary_table(tally: Tally) -> str:
    import statistics

    lat = tally.stop_latencies
    fs = tally.finalize_success
    stubs, shm = tally.leaks
    tput = [r.throughput for r in tally.rows if r.throughput]
    over = [r.overhead_s for r in tally.rows if r.overhead_s is not None]
    lines = [
        f"cycles        {len(tally.rows)}",
        "outcomes      " + ", ".join(f"{k}={v}" for k, v in sorted(tally.outcomes.items())) + "  (lifecycle)",
        "load          " + (", ".join(f"{k}={v}" for k, v in sorted(tally.load_outcomes.items())) or "-"),
        *(
            [
                "growth        "
                + ", ".join(f"{k}={v}" for k, v in sorted(tally.growth_outcomes.items()))
                + "  (memory per 1k requests, slowdown over each load)"
            ]
            if tally.growth_outcomes
            else []
        ),
        "finalize      " + ("-" if fs is None else f"{fs:.1%} before stop returned"),
    ]
    if lat:
        q = sorted(lat)
        lines.append(f"stop latency  min {q[0]:.3f}  median {statistics.median(q):.3f}  max {q[-1]:.3f} s")
    if tput:
        lines.append(f"throughput    median {statistics.median(tput):,.0f} infer/s")
    if over:
        lines.append(
            f"rig overhead  median {statistics.median(over):.3f} s per cycle (beyond start, workload and stop)"
        )
    lines.append(f"leaks         {stubs} stub(s) killed, {shm} shared-memory region(s) removed")
    lines.extend(time_lines(tally))
    lines.extend(growth_lines(tally))
    return "\n".join(lines)


def time_lines(tally: Tally) -> list[str]:
    """Where the time goes over the run's windows (``server_stats.over_windows``): the client's mean
    latency, Triton's request time and its parts, the rig's own cost per request (``own_line``); and the batch
    sizes Triton formed, where a model is batched (or a batch of more than one was formed)."""
    t = server_stats.over_windows(tally.server)
    batched = any(shapes.dynamic(r.shape) for r in tally.rows)
    if not t or t["request_us"] is None:  # no window measured (a fixed count): each cycle's own batches
        sizes = server_stats.summed_batches([getattr(r, "batch_sizes", None) for r in tally.rows])
        if sizes and (batched or max(sizes) > 1):
            return [
                (
                    f"batches       {server_stats.batch_text(sizes)} (size x executions, over the cycles); mean "
                    f"{num(server_stats.mean_batch(sizes), '{:.2f}')} requests per execution"
                )
            ]
        return []

    def f(v, fmt="{:,.0f}"):
        return num(v, fmt)

    lines = [
        (
            f"per request   client {f(t['client_us'])} us; Triton {f(t['request_us'])} us = queue "
            f"{f(t['queue_us'])} + compute input {f(t['compute_input_us'])} + infer {f(t['compute_infer_us'])} + "
            f"output {f(t['compute_output_us'])} + overhead {f(t['overhead_us'])} (means over {t['windows']:,} windows)"
        ),
        own_line(t),
    ]
    if batched or any(size > 1 for size in t["batch_sizes"]):
        lines.append(
            f"batches       {server_stats.batch_text(t['batch_sizes'])} (size x executions); "
            f"mean {f(t['mean_batch_size'], '{:.2f}')} requests per execution"
        )
    return lines


# The streaming lane's own cost, measured apart on the template decoupled, answering inside execute
STREAMING_LANE = "the streaming lane's own cost, measured apart: under 2 us a request (docs/measurements/speed.md)"


def own_line(t: dict) -> str:
    """The client's time beyond Triton's: the rig's own where Triton's statistics cover the request,
    else the difference not split, and why (``server_stats.uncovered``)."""
    if t.get("uncovered"):
        lane = "decoupled" in t["uncovered"]  # the streaming lane's cost is in it: measured apart
        return f"              {server_stats.not_split(t.get('beyond_us'), t['uncovered'])}" + (
            f"; {STREAMING_LANE}" if lane else ""
        )
    return (
        f"              the rig's own: client - Triton = {num(t['own_us'], '{:,.0f}')} us (the client's time per "
        "request beyond Triton's, which ends when the backend reports it, just before the core releases the request)"
    )


GPU_SOURCES = {
    "process": "the cycle's processes by PID",
    "device": "each visible device's used memory (NVML's PIDs could not match the cycle's)",
}


def growth_lines(tally: Tally) -> list[str]:
    """The growth figures of the run: each process kind's median growth per 1,000 requests, the
    median slowdown within a cycle, and the trend across the cycles (``Tally.run_trend``)."""
    import statistics

    lines = []
    for label, key in (("worker", "worker_growth_per_1k_b"), ("stubs", "stub_growth_per_1k_b")):
        vals = [getattr(r, key) for r in tally.rows if getattr(r, key) is not None]
        if vals:
            lines.append(
                f"memory        {label}: median {statistics.median(vals) / 1000:+,.1f} KB per 1,000 requests "
                f"(max {max(vals) / 1000:+,.1f})"
            )
    gpu = [r for r in tally.rows if r.gpu_growth_per_1k_b is not None]
    if gpu:  # which memory it read: a device's used memory holds every process on it, not only the cycle's
        vals = [r.gpu_growth_per_1k_b for r in gpu]
        read = " and ".join(
            GPU_SOURCES.get(s, "an unknown source (a store before schema 16)")
            for s in sorted({r.gpu_memory_source for r in gpu}, key=str)
        )
        lines.append(
            f"memory        gpu: median {statistics.median(vals) / 1000:+,.1f} KB per 1,000 requests "
            f"(max {max(vals) / 1000:+,.1f}), read from {read}"
        )
    slow = [r.slowdown_pct for r in tally.rows if r.slowdown_pct is not None]
    if slow:
        lines.append(
            f"slowdown      within a cycle: median {statistics.median(slow):+,.1f} % (max {max(slow):+,.1f} %)"
        )
    trend = tally.run_trend()
    if trend.get("slowdown_pct") is not None:
        per_min = trend.get("pct_per_min")
        lines.append(
            f"              across {trend['cycles']} cycles: {trend['slowdown_pct']:+,.1f} % slower at the end "
            f"(at least {trend['slowdown_low_pct']:+,.1f} %"
            + (f"; {per_min:+,.2f} % per minute of load)" if per_min is not None else ")")
        )
    return lines

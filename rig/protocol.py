"""What crosses between the worker and the orchestrator, and what they hand the store: the
rows of the results tables (``RunRow``, ``CycleRow``, ``WindowRow``, ``FleetRow``) and the
result of a cycle.

Schema history (``schema_version`` column):
  1: first version (runs, cycles, windows).
  2: scheduled, dropped, bad_outputs, lane (cycles, windows); lost_samples, clipped (windows).
  3: instances (windows): the model instances of a bench point; error_histogram, error_max_us
     (windows) and error_messages (cycles): failed requests' latencies and messages.
  4: host (cycles, windows): the node that measured the row (``--node``, default the hostname);
     the table ``fleet``: a distributed run's rounds, one row per node and round (``rig fleet``).
  5: cpu_idle (runs): how a bench held the CPUs out of idle while it measured (``rig.cpuidle``).
  6: two verdicts per cycle: ``outcome`` is the lifecycle's alone (``infer_error`` and
     ``wrong_output`` are gone from it) and ``load_outcome`` the load's (cycles; see
     ``cycle.LOAD_OUTCOMES``); ``timeouts`` (cycles, windows): requests unanswered within the
     request timeout, counted in ``errors`` too. Older cycles read as two verdicts
     (``cycle.upgrade_legacy``).
  7: streaming (decoupled) models (windows): ``first_response_histogram`` (submission to each
     answered request's first response with data, or to its final flag where none had data),
     ``gap_histogram`` (between consecutive data responses of a request), both HDR like
     ``histogram``, with ``first_p50_us``, ``first_p99_us``, ``gap_p50_us``, ``gap_p99_us``,
     ``responses`` and ``responses_per_request``; null in windows of models that do not stream
     (and in older files).
  8: HDR columns (windows' ``histogram``, ``error_histogram``, ``first_response_histogram``,
     ``gap_histogram``; fleet's ``histogram``) hold HdrHistogram's standard encoding, decodable as
     stored by any HdrHistogram library (older files, base64 of it, still read: ``rig.hdr``);
     runs: the versions of the packages that shape a figure (locust, numpy in the worker and in
     the stubs, pyarrow, the tritonserver bindings).
"""

from __future__ import annotations

import dataclasses
import datetime as dt


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


SCHEMA_VERSION = 8  # see the history above


@dataclasses.dataclass(frozen=True)
class RunRow:
    """One soak, bench or cycle command: what ran, where, how."""

    run_id: str
    started_at: str            # ISO 8601, UTC
    command: str               # cycle | soak | bench
    host: str
    cpu: str
    gpu: str | None
    engine: str
    runtime: str               # embedded-0.7.0 | container
    model: str
    config: str                # the whole effective config, TOML text
    rig_version: str
    python_version: str
    cpu_idle: str | None = None  # bench: os | pm_qos | poll (rig.cpuidle); None: not set
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class CycleRow:
    """One lifecycle cycle: start, load, stop, verify. Every cycle yields one, whatever happened."""

    run_id: str
    cycle: int
    engine: str
    model: str
    retain: str                # none | last-response | last-array
    outcome: str               # the lifecycle's verdict: see cycle.OUTCOMES
    restart: str               # fresh-process | same-process
    stop_strategy: str         # stop | unload-then-stop
    started_at: str
    start_latency_s: float | None
    stop_latency_s: float | None
    finalize_expected: int | None
    finalize_before_stop: int | None
    finalize_after_stop: int | None
    finalize_errors: int | None
    stubs_alive_after_stop: int | None
    stubs_killed: int | None
    shm_regions_leaked: int | None
    requests: int | None
    errors: int | None
    outputs_ok: bool | None           # the template model's answer checked (None: not checkable)
    throughput: float | None          # infer/s during the cycle's workload
    workload_s: float | None          # how long the requests/workload ran
    worker_pid: int | None
    worker_rss_bytes: int | None
    worker_fds: int | None
    worker_threads: int | None
    stub_rss_bytes: int | None
    gpu_memory_bytes: int | None
    cycle_wall_s: float | None        # the whole cycle as the parent saw it
    overhead_s: float | None          # cycle_wall_s less start, workload and stop: the rig's own cost
    stop_error: str | None
    cleanup: str | None               # ok | close failed/blocked | crashed: SIG... | hung (after stop)
    detail: str | None                # signal, phase that hung, first error, ...
    scheduled: int | None = None      # open loop: sends the schedule held
    dropped: int | None = None        # open loop: scheduled but never sent before the end
    bad_outputs: int | None = None    # responses whose checked output was wrong (see outputs.reference_output)
    lane: str | None = None           # how the load was sent: native | asyncio | python | tasks (and why not native)
    error_messages: str | None = None  # the most frequent error messages of failed requests: JSON {message: count}
    host: str | None = None           # the node that ran the cycle (--node, default the hostname)
    load_outcome: str | None = None   # the load's verdict: see cycle.LOAD_OUTCOMES
    timeouts: int | None = None       # requests with no final response within the request timeout (in errors too)
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class WindowRow:
    """One measurement window of a workload (a bench point or a slice of a soak cycle)."""

    run_id: str
    cycle: int
    window: int
    engine: str
    model: str
    tool: str                  # rig | perf_analyzer
    start_s: float             # since the workload started
    length_s: float
    mode: str                  # closed | open
    concurrency: int | None
    rate: float | None
    requests: int
    errors: int
    throughput: float
    p50_us: float | None
    p90_us: float | None
    p99_us: float | None
    p999_us: float | None
    max_us: float | None
    mean_us: float | None
    stable: bool | None        # perf_analyzer's rule: this and the 2 windows before within 10 %
    hub_block_max_ms: float | None
    worker_rss_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_utilization: float | None
    histogram: str | None      # HDR histogram, base64 (hdrhistogram's encode), microseconds
    scheduled: int | None = None     # open loop: sends scheduled within this window
    dropped: int | None = None       # open loop: scheduled but never sent (the last window)
    bad_outputs: int | None = None   # responses with a wrong checked output
    lost_samples: int | None = None  # latencies a lane could not keep (a full buffer): counted, not lost
    clipped: int | None = None       # latencies above the histogram's range (60 s), recorded as 60 s
    lane: str | None = None
    instances: int | None = None     # bench: model instances the point ran with (None: not set by the rig)
    error_histogram: str | None = None  # failed requests' latencies (HDR, base64, microseconds), apart from the others'
    error_max_us: float | None = None
    host: str | None = None             # the node that measured the window (--node, default the hostname)
    timeouts: int | None = None         # requests unanswered within the request timeout (in errors too)
    # Streaming (decoupled) models only; null elsewhere. ``histogram`` is the time to the final flag.
    first_response_histogram: str | None = None  # to each answered request's first data response (HDR, base64, us)
    first_p50_us: float | None = None
    first_p99_us: float | None = None
    gap_histogram: str | None = None    # between consecutive data responses of a request (HDR, base64, us)
    gap_p50_us: float | None = None
    gap_p99_us: float | None = None
    responses: int | None = None        # data responses of the streaming requests answered in the window
    responses_per_request: float | None = None  # responses / those requests (0: answered by the final flag alone)
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class FleetRow:
    """One node's part in one round of a distributed run (``rig fleet``), or the round's total
    (``node`` = ``*``). ``run_id`` is the fleet's (the master's) run; ``node_run_id`` the node's."""

    run_id: str
    round: int
    node: str                  # the node's name, or * for the round's total over its nodes
    outcome: str               # ok | lost (joined, never reported) | absent (expected, never joined) | refused
    started_at: str
    users: int | None          # the master's users at the round's peak (the total row)
    seconds: float | None
    node_run_id: str | None
    node_cycle: int | None
    requests: int | None
    errors: int | None
    throughput: float | None   # infer/s: the node's; the total row, the sum over the nodes that reported
    p50_us: float | None
    p99_us: float | None
    max_us: float | None
    histogram: str | None      # HDR, base64, microseconds: the node's windows merged; the total, all nodes'
    locust_requests: int | None  # the total row: requests as Locust's master counted them from worker reports
    detail: str | None
    schema_version: int = SCHEMA_VERSION


def window_row(run_id: str, engine: str, model: str, msg: dict, tool: str = "rig") -> WindowRow:
    """A ``WindowRow`` from a worker's window message (or perf_analyzer's figures), with the
    run's tags and defaults for what the message lacks."""
    fields = {f.name for f in dataclasses.fields(WindowRow)} - {"schema_version"}
    row = {k: msg.get(k) for k in fields}
    row.update(run_id=run_id, engine=engine, model=model, tool=msg.get("tool", tool),
               cycle=int(msg.get("cycle") or 0), mode=msg.get("mode") or "closed")
    for k in ("requests", "errors"):
        row[k] = int(row.get(k) or 0)
    row["throughput"] = float(row.get("throughput") or 0.0)
    row["start_s"] = float(row.get("start_s") or 0.0)
    row["length_s"] = float(row.get("length_s") or 0.0)
    row["window"] = int(row.get("window") or 0)
    return WindowRow(**row)


@dataclasses.dataclass(frozen=True)
class CycleResult:
    """What one cycle leaves: its row and its windows, stored together (windows first)."""

    row: CycleRow
    windows: tuple[WindowRow, ...] = ()

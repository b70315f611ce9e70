"""What the worker and the orchestrator hand the store: the rows of the results tables
(``RunRow``, ``CycleRow``, ``WindowRow``, ``FleetRow``, ``MemoryRow``), typed (``typed_row``),
and the result of a cycle. The worker's messages that carry them are ``rig.contract.messages``.

Schema history (``schema_version`` column):
  1: first version (runs, cycles, windows).
  2: scheduled, dropped, bad_outputs, lane (cycles, windows); lost_samples, clipped (windows).
  3: instances (windows): the model instances of a bench point; error_histogram, error_max_us
     (windows) and error_messages (cycles): failed requests' latencies and messages.
  4: host (cycles, windows): the node that measured the row (``--node``, default the hostname);
     the table ``fleet``: a distributed run's rounds, one row per node and round (``rig fleet``).
  5: cpu_idle (runs): how a bench held the CPUs out of idle while it measured (``rig.common.cpuidle``).
  6: two verdicts per cycle: ``outcome`` is the lifecycle's alone (``infer_error`` and
     ``wrong_output`` are gone from it) and ``load_outcome`` the load's (cycles; see
     ``verdicts.LOAD_OUTCOMES``); ``timeouts`` (cycles, windows): requests unanswered within the
     request timeout, counted in ``errors`` too. Older cycles read as two verdicts
     (``verdicts.upgrade_legacy``).
  7: streaming (decoupled) models (windows): ``first_response_histogram`` (submission to each
     answered request's first response with data, or to its final flag where none had data),
     ``gap_histogram`` (between consecutive data responses of a request), both HDR like
     ``histogram``, with ``first_p50_us``, ``first_p99_us``, ``gap_p50_us``, ``gap_p99_us``,
     ``responses`` and ``responses_per_request``; null in windows of models that do not stream
     (and in older files).
  8: HDR columns (windows' ``histogram``, ``error_histogram``, ``first_response_histogram``,
     ``gap_histogram``; fleet's ``histogram``) hold HdrHistogram's standard encoding, decodable as
     stored by any HdrHistogram library (older files, base64 of it, still read: ``rig.common.hdr``);
     runs: the versions of the packages that shape a figure: ``locust_version`` (null where the
     run sends no Locust load), ``numpy_version`` (the worker's), ``stub_numpy_version`` (the
     numpy the backend stubs import: the rig's numpy-1 folder for an embedded core, else the
     worker's), ``pyarrow_version`` (that wrote the files), ``tritonserver_version`` (the
     bindings; null unless the engine is ``tritonserver``); null in older files.
  9: cycles: ``scenario``, the lifecycle scenario a cycle ran under (``rig.parent.scenarios``; a run
     given only ``--fault``/``--retain`` is filed under the scenario built from them, neither
     under ``baseline``), and ``control``, true for a scenario's negative control; null in
     older files.
  10: cycles, what a scenario's client or restart mode measured (null where it did not run):
     ``stub_crashes`` (backend stubs that died of a signal of their own: SIGSEGV, SIGABRT, ...),
     ``in_flight`` (requests outstanding when ``stop()`` was called) and how they ended:
     ``in_flight_answered``, ``in_flight_failed``, ``in_flight_lost`` (no answer nor error by the
     end of the cycle); ``refused`` (requests refused at submission); ``loading_at_stop`` (models
     still loading when ``stop()`` was called); ``shm_bytes`` (bytes of files in /dev/shm when the
     load ended); ``traced_bytes`` (the worker's Python allocations, tracemalloc, when the load
     ended); ``rss_per_1k_requests_b``, ``traced_per_1k_requests_b`` (least-squares growth of the
     worker's RSS and Python allocations over the load, per 1,000 requests); ``ready_after_load``
     (whether the server and every model the load used still said ready when the load ended: a
     dead stub's model may). ``restart`` may be ``reload`` (one server; the models unloaded and
     loaded again each cycle).
  11: what sustained load did to the processes where the models live, and its verdict (cycles):
     ``growth_outcome`` (the third verdict: ok | leaking | slowing | not_measured,
     ``verdicts.GROWTH_OUTCOMES``), ``memory_samples`` (samples taken per process over the load),
     each process kind's memory growth per 1,000 requests by a Theil-Sen slope with its 95 %
     interval after the warm-up (``worker_growth_per_1k_b``/``_low_b``/``_high_b``, and per second
     of load ``worker_growth_per_s_b``; the stubs',
     per model, the largest: ``stub_growth_*`` and ``stub_growth_model``; ``gpu_growth_per_1k_b``),
     the requests they are read over (``growth_requests``), every process's in ``growth_by_process`` (JSON ``{process: [per_1k, low, high]}``); the trend
     over the load's windows: ``throughput_change_pct``, ``p50_change_pct``, ``p99_change_pct``
     (Theil-Sen change from the load's start to its end, in % of the start), ``slowdown_pct`` and
     ``slowdown_low_pct`` (how much slower the end is than the start: p50's rise or throughput's
     fall, the larger, and its interval's lower bound), ``p50_us_per_1k`` and ``trend_windows``.
     The table ``memory``: every process's memory through the load, one row per process and sample
     (``MemoryRow``).
  12: cycles: ``shape``, the model shape the cycle served (``rig.parent.shapes``: unbatched, batched,
     instances-2, decoupled, joined with commas where several apply; a scenario's, the template
     model's, or read from a repository's config.pbtxt); null in older files (read: unbatched
     where a scenario ran).
  13: runs: the node's share of the machine (``rig.common.cpushare``): ``cpu_share`` (the CPUs the run
     could use: its affinity's, or a cgroup quota's where fewer), ``cpus`` (its affinity, as
     ``0-3,8``) and ``cpu_share_from`` (``--cpus``, ``cgroup``, ``affinity``, ``machine``); null
     in older files.
  14: windows, Triton's own statistics of the run's models over the window (``rig.contract.server_stats``;
     perf_analyzer's: its summary's averages; null with ``--server-stats off`` or a failed read): ``server_*``
     counts and summed ns, ``batch_sizes`` (JSON ``{size: executions}``) and ``mean_batch_size``.
  15: cycles, Triton's statistics of the cycle's models over the whole cycle, whether or not a
     window was measured: ``batch_sizes`` (JSON ``{size: executions}``, failed executions counted
     at their size), ``mean_batch_size``, ``server_executions`` and ``server_failures`` (requests
     Triton counted failed: a raising ``execute``'s); null where not read or older.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import functools
import types
import typing


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


SCHEMA_VERSION = 15  # see the history above


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
    cpu_idle: str | None = None  # bench: os | pm_qos | poll (rig.common.cpuidle); None: not set
    # The packages that shape a figure (schema 8; None: not installed, not used, or an older file)
    locust_version: str | None = None        # None where the run sends no Locust load
    numpy_version: str | None = None         # the worker's
    stub_numpy_version: str | None = None    # the backend stubs'
    pyarrow_version: str | None = None
    tritonserver_version: str | None = None  # the bindings, with --engine tritonserver only
    # The node's share of the machine (schema 13; rig.common.cpushare): --cpus, a cgroup quota, or all of it
    cpu_share: float | None = None           # CPUs the run could use (a quota's may be fractional)
    cpus: str | None = None                  # its affinity: 0-3,8
    cpu_share_from: str | None = None        # --cpus | cgroup | affinity | machine
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class CycleRow:
    """One lifecycle cycle: start, load, stop, verify. Every cycle yields one, whatever happened."""

    run_id: str
    cycle: int
    engine: str
    model: str
    retain: str                # none | last-response | last-array
    outcome: str               # the lifecycle's verdict: see verdicts.OUTCOMES
    restart: str               # fresh-process | same-process | reload
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
    load_outcome: str | None = None   # the load's verdict: see verdicts.LOAD_OUTCOMES
    timeouts: int | None = None       # requests with no final response within the request timeout (in errors too)
    scenario: str | None = None       # the lifecycle scenario (rig.parent.scenarios): baseline, retained-response, ...
    control: bool | None = None       # the scenario's negative control (its fault off)
    shape: str | None = None          # the model shape served (rig.parent.shapes): unbatched, batched, instances-2, ...
    stub_crashes: int | None = None   # stubs that died of a signal of their own (rig/worker/hook/crash.c)
    in_flight: int | None = None      # requests outstanding when stop() was called (stop-in-flight)
    in_flight_answered: int | None = None
    in_flight_failed: int | None = None
    in_flight_lost: int | None = None  # neither answered nor failed by the end of the cycle
    refused: int | None = None        # requests refused at submission (refused-request)
    loading_at_stop: int | None = None  # models still loading when stop() was called (stop-while-loading)
    shm_bytes: int | None = None      # bytes of files in /dev/shm when the load ended
    traced_bytes: int | None = None   # the worker's Python allocations (tracemalloc) when the load ended
    rss_per_1k_requests_b: float | None = None     # the worker's RSS growth over the load (memory)
    traced_per_1k_requests_b: float | None = None  # its Python allocations' growth (memory)
    ready_after_load: bool | None = None  # the server and the load's models still said ready when it ended
    # What sustained load did (schema 11): the third verdict, and the figures it is judged from
    growth_outcome: str | None = None  # ok | leaking | slowing | not_measured: see verdicts.GROWTH_OUTCOMES
    memory_samples: int | None = None  # samples of each process's memory over the load
    worker_growth_per_1k_b: float | None = None  # the worker's memory (RSS) per 1,000 requests, Theil-Sen
    worker_growth_low_b: float | None = None     # its 95 % interval
    worker_growth_high_b: float | None = None
    worker_growth_per_s_b: float | None = None   # the same per second of load (the worker's floor is judged in it)
    stub_growth_per_1k_b: float | None = None    # the model whose stubs grew most (its instances summed)
    stub_growth_low_b: float | None = None
    stub_growth_high_b: float | None = None
    stub_growth_model: str | None = None
    gpu_growth_per_1k_b: float | None = None     # GPU memory of the cycle's processes (NVML), where there is one
    growth_requests: float | None = None         # requests the growth is read over (after the warm-up)
    growth_by_process: str | None = None         # JSON {"worker" | "stub <model>" | "gpu": [per_1k, low, high]}
    throughput_change_pct: float | None = None   # over the load's windows, end against start (Theil-Sen)
    p50_change_pct: float | None = None
    p99_change_pct: float | None = None
    slowdown_pct: float | None = None            # how much slower the end than the start: p50 up or throughput down
    slowdown_low_pct: float | None = None        # its 95 % interval's lower bound (what is judged)
    p50_us_per_1k: float | None = None           # p50's trend in microseconds per 1,000 requests
    trend_windows: int | None = None             # windows the trend is read from (after the warm-up)
    # schema 15: Triton's statistics over the whole cycle (rig.worker.serverstats)
    batch_sizes: str | None = None               # JSON {size: executions}, failed executions included
    mean_batch_size: float | None = None         # requests an execute, over the cycle
    server_executions: int | None = None
    server_failures: int | None = None           # requests Triton counted failed
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
    histogram: str | None      # HDR histogram in HdrHistogram's standard encoding (rig.common.hdr), microseconds
    scheduled: int | None = None     # open loop: sends scheduled within this window
    dropped: int | None = None       # open loop: scheduled but never sent (the last window)
    bad_outputs: int | None = None   # responses with a wrong checked output
    lost_samples: int | None = None  # latencies a lane could not keep (a full buffer): counted, not lost
    clipped: int | None = None       # latencies above the histogram's range (60 s), recorded as 60 s
    lane: str | None = None
    instances: int | None = None     # bench: model instances the point ran with (None: not set by the rig)
    error_histogram: str | None = None  # failed requests' latencies (HDR, standard encoding, microseconds), apart from the others'
    error_max_us: float | None = None
    host: str | None = None             # the node that measured the window (--node, default the hostname)
    timeouts: int | None = None         # requests unanswered within the request timeout (in errors too)
    # Streaming (decoupled) models only; null elsewhere. ``histogram`` is the time to the final flag.
    first_response_histogram: str | None = None  # to each answered request's first data response (HDR, standard encoding, us)
    first_p50_us: float | None = None
    first_p99_us: float | None = None
    gap_histogram: str | None = None    # between consecutive data responses of a request (HDR, standard encoding, us)
    gap_p50_us: float | None = None
    gap_p99_us: float | None = None
    responses: int | None = None        # data responses of the streaming requests answered in the window
    responses_per_request: float | None = None  # responses / those requests (0: answered by the final flag alone)
    server_success: int | None = None   # Triton's statistics over the window (schema 14): successful requests
    server_failures: int | None = None  # failed requests
    server_inferences: int | None = None  # batch items run (inference_count)
    server_executions: int | None = None  # model executions (execution_count): inferences / executions = mean batch
    server_request_ns: int | None = None  # summed over the successful requests: their whole time in the server
    server_queue_ns: int | None = None
    server_compute_input_ns: int | None = None
    server_compute_infer_ns: int | None = None
    server_compute_output_ns: int | None = None
    batch_sizes: str | None = None      # the batches formed: JSON {size: executions} (batch_stats)
    mean_batch_size: float | None = None
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
    histogram: str | None      # HDR, standard encoding, microseconds: the node's windows merged; the total, all nodes'
    locust_requests: int | None  # the total row: requests as Locust's master counted them from worker reports
    detail: str | None
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class MemoryRow:
    """One process's memory at one sample of a cycle's load (the table ``memory``): the worker
    (the core and the in-process API) and every backend stub, by model and instance."""

    run_id: str
    cycle: int
    sample: int                # 0, 1, ... in the order taken
    t_s: float                 # since the load started
    requests: float | None     # requests completed by then (from the windows; None: unknown)
    process: str               # worker | stub
    model: str | None          # a stub's model (None: the worker)
    instance: str | None       # a stub's instance (numpy_0_0, ...)
    pid: int
    rss_bytes: int | None      # resident set size (/proc/PID/statm: no page walk, so free to sample)
    gpu_bytes: int | None      # the process's GPU memory (NVML), None without a GPU
    host: str | None = None
    schema_version: int = SCHEMA_VERSION


def window_row(run_id: str, engine: str, model: str, msg: dict, tool: str = "rig") -> WindowRow:
    """A ``WindowRow`` from a worker's window figures (or perf_analyzer's), with the run's tags
    and defaults for what the figures lack."""
    row = {**msg, "run_id": run_id, "engine": engine, "model": model, "tool": msg.get("tool", tool),
           "mode": msg.get("mode") or "closed"}
    for k in ("cycle", "window", "requests", "errors", "throughput", "start_s", "length_s"):
        row[k] = row.get(k) or 0
    return typed_row(WindowRow, row)


@functools.cache
def _hints(cls: type) -> dict[str, type]:
    return typing.get_type_hints(cls)


def _coerce(value, hint):
    """``value`` as the type ``hint`` names (``int``, ``float | None``, ``tuple[str, ...]``, ...):
    JSON and pandas give 2.0 for 2 and numpy scalars for numbers. ``TypeError`` or
    ``ValueError`` where it cannot be."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
    if value is None:
        raise TypeError("None where a value is required")
    base = typing.get_origin(hint) or hint
    if base is bool:
        return bool(value)
    if base in (int, float, str):
        return base(value)
    if base is tuple:
        return tuple(_coerce(v, args[0]) for v in value)
    if base is dict and not isinstance(value, dict):
        raise TypeError(f"not an object: {value!r}")
    return value


def typed_row(cls: type, values: dict):
    """An instance of the dataclass ``cls`` (a table's row) from ``values``: keys that are not
    its fields dropped, each value made its field's type (``typing.get_type_hints``), a missing
    or null one left to its default (else None: a lost cycle has no figures)."""
    hints = _hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        value = values.get(f.name)
        if value is not None:
            out[f.name] = _coerce(value, hints[f.name])
        elif f.default is dataclasses.MISSING:
            out[f.name] = None
    return cls(**out)


CYCLE_FIELDS = tuple(f.name for f in dataclasses.fields(CycleRow))


def cycle_fields(values: dict) -> dict:
    """The ``CycleRow`` fields of a worker's row (a row so far: any of them), typed as the row's."""
    hints = _hints(CycleRow)
    return {k: _coerce(v, hints[k]) for k, v in values.items() if k in hints}


def joined(detail: str | None, note: str | None, first: bool = False) -> str | None:
    """The one way a note joins a cycle's detail: ``"; "`` between them, the note last (or
    ``first``: a cause ahead of what it caused); nothing to add leaves the detail as it was."""
    if not note:
        return detail
    if not detail:
        return note
    return f"{note}; {detail}" if first else f"{detail}; {note}"


class CycleDraft(collections.abc.MutableMapping):
    """A cycle's row while the worker, then the parent, measure it: ``CycleRow``'s fields and no
    other (a misspelt one raises ``KeyError`` where it is set), each value made its field's type as
    it is set (``_coerce``); ``note`` adds to the detail, ``merge`` takes an observer's figures,
    ``row`` gives the frozen ``CycleRow``. Read and written like the dict it replaces."""

    __slots__ = ("_v",)

    def __init__(self, values=(), **more):
        self._v: dict = {}
        self.update(values, **more)

    @classmethod
    def blank(cls, **values) -> "CycleDraft":
        """Every field present and null, then ``values``: the parent's rows start so."""
        draft = cls(dict.fromkeys(CYCLE_FIELDS))
        draft.update(values)
        return draft

    def __setitem__(self, key: str, value) -> None:
        hint = _hints(CycleRow).get(key)
        if hint is None:
            raise KeyError(f"{key!r} is not a field of CycleRow (rig/contract/rows.py)")
        self._v[key] = None if value is None else _coerce(value, hint | None)

    def __getitem__(self, key: str):
        return self._v[key]

    def __delitem__(self, key: str) -> None:
        del self._v[key]

    def __iter__(self):
        return iter(self._v)

    def __len__(self) -> int:
        return len(self._v)

    def __repr__(self) -> str:
        return f"CycleDraft({self._v!r})"

    def note(self, text: str | None, first: bool = False) -> None:
        self._v["detail"] = joined(self._v.get("detail"), text, first)

    def merge(self, figures: dict) -> None:
        """An observer's or the load's figures: each a field; their ``detail`` joins this one's."""
        figures = dict(figures)
        detail = figures.pop("detail", None)
        self.update(figures)
        self.note(detail)

    def row(self) -> CycleRow:
        return typed_row(CycleRow, self._v)


@dataclasses.dataclass(frozen=True)
class CycleResult:
    """What one cycle leaves: its row and its windows, stored together (windows first)."""

    row: CycleRow
    windows: tuple[WindowRow, ...] = ()
    memory: tuple[MemoryRow, ...] = ()

"""What the worker and the orchestrator hand the store: the rows of the results tables
(``RunRow``, ``CycleRow``, ``WindowRow``; the fleet's, memory's and bisections' in
``rig.contract.table_rows``), typed (``typed_row``),
and the result of a cycle. The worker's messages that carry them are ``rig.contract.messages``.

The schema's version and its history: ``rig.contract.schema``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import functools
import types
import typing

from rig.contract.schema import SCHEMA_VERSION
from rig.contract.table_rows import MemoryRow


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclasses.dataclass(frozen=True)
class RunRow:
    """One soak, bench or cycle command: what ran, where, how."""

    run_id: str
    started_at: str  # ISO 8601, UTC
    command: str  # cycle | soak | bench
    host: str
    cpu: str
    gpu: str | None
    engine: str
    runtime: str  # embedded-0.7.0 | container
    model: str
    config: str  # the whole effective config, TOML text
    rig_version: str
    python_version: str
    cpu_idle: str | None = None  # bench: os | pm_qos | poll (rig.common.cpuidle); None: not set
    # The packages that shape a figure (schema 8; None: not installed, not used, or an older file)
    locust_version: str | None = None  # None where the run sends no Locust load
    numpy_version: str | None = None  # the worker's
    stub_numpy_version: str | None = None  # the backend stubs'
    pyarrow_version: str | None = None
    tritonserver_version: str | None = None  # the bindings the workers import, with --engine tritonserver only
    # The node's share of the machine (schema 13; rig.common.cpushare): --cpus, a cgroup quota, or all of it
    cpu_share: float | None = None  # CPUs the run could use (a quota's may be fractional)
    cpus: str | None = None  # its affinity: 0-3,8
    cpu_share_from: str | None = None  # --cpus | cgroup | affinity | machine
    gpu_notes: str | None = None  # JSON {probe: reason}: why a GPU probe gave null (schema 16)
    neighbour: str | None = None  # bench: none | burn:PCT beside the node (schema 18; rig.common.neighbour)
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class CycleRow:
    """One lifecycle cycle: start, load, stop, verify. Every cycle yields one, whatever happened."""

    run_id: str
    cycle: int
    engine: str
    model: str
    retain: str  # none | last-response | last-array
    outcome: str  # the lifecycle's verdict: see verdicts.OUTCOMES
    restart: str  # fresh-process | same-process | reload
    stop_strategy: str  # stop | unload-then-stop
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
    outputs_ok: bool | None  # the template model's answer checked (None: not checkable)
    throughput: float | None  # infer/s during the cycle's workload
    workload_s: float | None  # how long the requests/workload ran
    worker_pid: int | None
    worker_rss_bytes: int | None
    worker_fds: int | None
    worker_threads: int | None
    stub_rss_bytes: int | None
    gpu_memory_bytes: int | None
    cycle_wall_s: float | None  # the whole cycle as the parent saw it
    overhead_s: float | None  # cycle_wall_s less start, workload and stop: the rig's own cost
    stop_error: str | None
    cleanup: str | None  # ok | close failed/blocked | crashed: SIG... | hung (after stop)
    detail: str | None  # signal, phase that hung, first error, ...
    scheduled: int | None = None  # open loop: sends the schedule held
    dropped: int | None = None  # open loop: scheduled but never sent before the end
    bad_outputs: int | None = None  # responses whose checked output was wrong (see outputs.reference_output)
    lane: str | None = None  # how the load was sent: native | asyncio | python | tasks (and why not native)
    error_messages: str | None = None  # the most frequent error messages of failed requests: JSON {message: count}
    host: str | None = None  # the node that ran the cycle (--node, default the hostname)
    load_outcome: str | None = None  # the load's verdict: see verdicts.LOAD_OUTCOMES
    timeouts: int | None = None  # requests with no final response within the request timeout (in errors too)
    scenario: str | None = None  # the lifecycle scenario (rig.scenarios.catalog): baseline, retained-response, ...
    control: bool | None = None  # the scenario's negative control (its fault off)
    shape: str | None = None  # the model shape served (rig.scenarios.shapes): unbatched, batched, instances-2, ...
    stub_crashes: int | None = None  # stubs that died of a signal of their own (rig/worker/hook/crash.c)
    in_flight: int | None = None  # requests outstanding when stop() was called (stop-in-flight)
    in_flight_answered: int | None = None
    in_flight_failed: int | None = None
    in_flight_lost: int | None = None  # neither answered nor failed by the end of the cycle
    refused: int | None = None  # requests refused at submission (refused-request)
    loading_at_stop: int | None = None  # models still loading when stop() was called (stop-while-loading)
    shm_bytes: int | None = None  # bytes of files in /dev/shm when the load ended
    traced_bytes: int | None = None  # the worker's Python allocations (tracemalloc) when the load ended
    rss_per_1k_requests_b: float | None = None  # the worker's RSS growth over the load (memory)
    traced_per_1k_requests_b: float | None = None  # its Python allocations' growth (memory)
    ready_after_load: bool | None = None  # the server and the load's models still said ready when it ended
    # What sustained load did (schema 11): the third verdict, and the figures it is judged from
    growth_outcome: str | None = None  # ok | leaking | slowing | not_measured: see verdicts.GROWTH_OUTCOMES
    memory_samples: int | None = None  # samples of each process's memory over the load
    worker_growth_per_1k_b: float | None = None  # the worker's memory (RSS) per 1,000 requests, Theil-Sen
    worker_growth_low_b: float | None = None  # its 95 % interval
    worker_growth_high_b: float | None = None
    worker_growth_per_s_b: float | None = None  # the same per second of load (the worker's floor is judged in it)
    stub_growth_per_1k_b: float | None = None  # the model whose stubs grew most (its instances summed)
    stub_growth_low_b: float | None = None
    stub_growth_high_b: float | None = None
    stub_growth_model: str | None = None
    gpu_growth_per_1k_b: float | None = None  # GPU memory of the cycle's processes (NVML), where there is one
    growth_requests: float | None = None  # requests the growth is read over (after the warm-up)
    growth_by_process: str | None = None  # JSON {"worker" | "stub <model>" | "gpu": [per_1k, low, high]}
    throughput_change_pct: float | None = None  # over the load's windows, end against start (Theil-Sen)
    p50_change_pct: float | None = None
    p99_change_pct: float | None = None
    slowdown_pct: float | None = None  # how much slower the end than the start: p50 up or throughput down
    slowdown_low_pct: float | None = None  # its 95 % interval's lower bound (what is judged)
    p50_us_per_1k: float | None = None  # p50's trend in microseconds per 1,000 requests
    trend_windows: int | None = None  # windows the trend is read from (after the warm-up)
    # schema 15: Triton's statistics over the whole cycle (rig.worker.serverstats)
    batch_sizes: str | None = None  # JSON {size: executions}, failed executions included
    mean_batch_size: float | None = None  # requests an execute, over the cycle
    server_executions: int | None = None
    server_failures: int | None = None  # requests Triton counted failed
    # schema 15: worker-killed, what a worker the parent SIGKILLed left (rig.parent.orchestrator.reap)
    orphan_stubs: int | None = None  # backend stubs alive once the killed worker was dead and reaped
    orphan_stubs_gone_s: float | None = (
        None  # from its death until the last of them was gone (null: one outlived the bound)
    )
    orphan_stubs_outlived: int | None = None  # still alive 10 s after its death: killed by the rig
    orphan_shm_regions: int | None = None  # its server's regions still in /dev/shm: removed by the rig
    orphan_stubs_left: int | None = None  # after the rig's cleanup (0 expected)
    orphan_shm_left: int | None = None
    # schema 15: ready-stub-dead, readiness asked once the load is over (rig.worker.clients.scenes.StubKilled)
    server_ready_at_probe: bool | None = (
        None  # the server's last answer, 2 s after the model's stub died (control: alive)
    )
    model_ready_at_probe: bool | None = None  # every model's, likewise
    # schema 15: sequence-at-stop, sequences open at the stop (rig.worker.clients.sequences)
    sequences_open: int | None = None  # sequences the client started and left open at the stop (control: 0)
    sequences_reaped: int | None = None  # of those left idle past the idle timeout, ended by the batcher's reaper
    sequence_states_left: int | None = None  # states the stateful model still held at its finalize (null: none ran)
    input_copies: int | None = None  # CPU inputs the model copied to its device (schema 16; null: not counted)
    stub_exit_aborts: int | None = None  # of stub_crashes, stubs that died after every finalize of theirs (at exit)
    gpu_memory_source: str | None = None  # process | device: what the GPU memory figures read (null: no GPU)
    # schema 19: the official engine's tritonserver bindings (null with capi; rig.parent.runtime.official_bindings)
    tritonserver_version: str | None = None  # the bindings' version, as the run's: 2.71.0 (PyPI's) over older cores
    bindings_own: bool | None = None  # whether they are the core's release's own (built from its core/python)
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class WindowRow:
    """One measurement window of a workload (a bench point or a slice of a soak cycle)."""

    run_id: str
    cycle: int
    window: int
    engine: str
    model: str
    tool: str  # rig | perf_analyzer
    start_s: float  # since the workload started
    length_s: float
    mode: str  # closed | open
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
    stable: bool | None  # perf_analyzer's rule: this and the 2 windows before within 10 %
    hub_block_max_ms: float | None
    worker_rss_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_utilization: float | None
    histogram: str | None  # HDR histogram in HdrHistogram's standard encoding (rig.common.hdr), microseconds
    scheduled: int | None = None  # open loop: sends scheduled within this window
    dropped: int | None = None  # open loop: scheduled but never sent (the last window)
    bad_outputs: int | None = None  # responses with a wrong checked output
    lost_samples: int | None = None  # latencies a lane could not keep (a full buffer): counted, not lost
    clipped: int | None = None  # latencies above the histogram's range (60 s), recorded as 60 s
    lane: str | None = None
    instances: int | None = None  # bench: model instances the point ran with (None: not set by the rig)
    error_histogram: str | None = (
        None  # failed requests' latencies (HDR, standard encoding, microseconds), apart from the others'
    )
    error_max_us: float | None = None
    host: str | None = None  # the node that measured the window (--node, default the hostname)
    timeouts: int | None = None  # requests unanswered within the request timeout (in errors too)
    # Streaming (decoupled) models only; null elsewhere. ``histogram`` is the time to the final flag.
    first_response_histogram: str | None = (
        None  # to each answered request's first data response (HDR, standard encoding, us)
    )
    first_p50_us: float | None = None
    first_p99_us: float | None = None
    gap_histogram: str | None = None  # between consecutive data responses of a request (HDR, standard encoding, us)
    gap_p50_us: float | None = None
    gap_p99_us: float | None = None
    responses: int | None = None  # data responses of the streaming requests answered in the window
    responses_per_request: float | None = None  # responses / those requests (0: answered by the final flag alone)
    server_success: int | None = None  # Triton's statistics over the window (schema 14): successful requests
    server_failures: int | None = None  # failed requests
    server_inferences: int | None = None  # batch items run (inference_count)
    server_executions: int | None = None  # model executions (execution_count): inferences / executions = mean batch
    server_request_ns: int | None = None  # summed over the successful requests: their whole time in the server
    server_queue_ns: int | None = None
    server_compute_input_ns: int | None = None
    server_compute_infer_ns: int | None = None
    server_compute_output_ns: int | None = None
    batch_sizes: str | None = None  # the batches formed: JSON {size: executions} (batch_stats)
    mean_batch_size: float | None = None
    input_memory: str | None = None  # where the rig's inputs lived: cpu | gpu:N (schema 16)
    output_memory: str | None = None  # where the outputs lived, as the allocator handed them out: cpu | gpu:N[,...]
    server_uncovered: str | None = None  # why Triton's statistics end before the answer (schema 17; server_stats)
    schema_version: int = SCHEMA_VERSION


def window_row(run_id: str, engine: str, model: str, msg: dict, tool: str = "rig") -> WindowRow:
    """A ``WindowRow`` from a worker's window figures (or perf_analyzer's), with the run's tags
    and defaults for what the figures lack."""
    row = {
        **msg,
        "run_id": run_id,
        "engine": engine,
        "model": model,
        "tool": msg.get("tool", tool),
        "mode": msg.get("mode") or "closed",
    }
    for k in ("cycle", "window", "requests", "errors", "throughput", "start_s", "length_s"):
        row[k] = row.get(k) or 0
    return typed_row(WindowRow, row)


@functools.cache
def field_hints(cls: type) -> dict[str, type]:
    return typing.get_type_hints(cls)


def coerce(value, hint):
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
        return tuple(coerce(v, args[0]) for v in value)
    if base is dict and not isinstance(value, dict):
        raise TypeError(f"not an object: {value!r}")
    return value


def typed_row(cls: type, values: dict):
    """An instance of the dataclass ``cls`` (a table's row) from ``values``: keys that are not
    its fields dropped, each value made its field's type (``typing.get_type_hints``), a missing
    or null one left to its default (else None: a lost cycle has no figures)."""
    hints = field_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        value = values.get(f.name)
        if value is not None:
            out[f.name] = coerce(value, hints[f.name])
        elif f.default is dataclasses.MISSING:
            out[f.name] = None
    return cls(**out)


CYCLE_FIELDS = tuple(f.name for f in dataclasses.fields(CycleRow))


def cycle_fields(values: collections.abc.Mapping) -> dict:
    """The ``CycleRow`` fields of a worker's row (a row so far: any of them), typed as the row's."""
    hints = field_hints(CycleRow)
    return {k: coerce(v, hints[k]) for k, v in values.items() if k in hints}


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
    it is set (``coerce``); ``note`` adds to the detail, ``merge`` takes an observer's figures,
    ``row`` gives the frozen ``CycleRow``. Read and written like the dict it replaces."""

    __slots__ = ("_v",)

    def __init__(self, values=(), **more):
        self._v: dict = {}
        self.update(values, **more)

    @classmethod
    def blank(cls, **values) -> CycleDraft:
        """Every field present and null, then ``values``: the parent's rows start so."""
        draft = cls(dict.fromkeys(CYCLE_FIELDS))
        draft.update(values)
        return draft

    def __setitem__(self, key: str, value) -> None:
        hint = field_hints(CycleRow).get(key)
        if hint is None:
            raise KeyError(f"{key!r} is not a field of CycleRow (rig/contract/rows.py)")
        self._v[key] = None if value is None else coerce(value, hint | None)

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

    def copy(self) -> CycleDraft:
        """A draft of its own with the same values (what a message sends while this one goes on)."""
        return CycleDraft(self._v)

    @classmethod
    def received(cls, values: collections.abc.Mapping) -> CycleDraft:
        """The draft a worker's message carries, read back: its ``CycleRow`` fields typed as the
        row's, any other key (a newer worker's) dropped."""
        return cls(cycle_fields(values))

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

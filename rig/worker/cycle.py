"""One lifecycle cycle, inside a worker: start → load → workload → retain → stop → verify.

The worker hosts the server; the parent only watches. ``phase`` calls tell the parent which
phase runs and how long it may take, so a hang costs one cycle. Every cycle ends in a
``rig.contract.messages.CycleDone`` (its row: ``CycleRow`` fields), whatever happened, and once stop has
returned sends a ``Partial``; the parent adds what only it can see (hung, crashed,
leftovers after the worker is gone). The verdicts are ``rig.contract.verdicts``' (re-exported here).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rig.common import probes, trends
from rig.contract import server_stats, verdicts
from rig.contract.evidence import never_finalized, read_markers, summarize_markers, triton_error
from rig.contract.fleet import NODE_WAIT_S, RELEASE_WAIT_S
from rig.contract.messages import CycleDone, Partial, Samples
from rig.contract.rows import CycleDraft
from rig.contract.spec import CycleSpec, repository_models
from rig.contract.verdicts import (
    UNANSWERED,
    growth_reasons,
    never_called,
    raised_and_held,
)
from rig.worker import observers as observers_mod
from rig.worker import serverstats
from rig.worker.cycle_reference import add_reference, references
from rig.worker.cycle_teardown import teardown, unload_all
from rig.worker.engines.base import Engine, EngineError, ServerOptions
from rig.worker.engines.retention import Retained
from rig.worker.grouped import grouped_requests
from rig.worker.quiet import Quiet
from rig.worker.sequential import sequential_requests

GRACE_AFTER_STOP_S = 5.0


class Held:
    """``--restart reload``: one server for all of a worker's cycles. Each cycle loads the models
    (its start), runs its load, and unloads them (its stop); the server stops when the worker's
    cycles are done (``close``)."""

    def __init__(self) -> None:
        self.engine: Engine | None = None

    def close(self, phase: Callable[[str, float], None], spec: CycleSpec) -> None:
        if self.engine is None:
            return
        phase("stop", spec.exit_timeout + 60)
        self.engine.stop()
        teardown(self.engine, phase, spec)
        probes.kill_processes(probes.stubs_of(os.getpid()))
        self.engine = None


def run_cycle(
    make_engine: Callable[[], Engine],
    spec: CycleSpec,
    cycle: int,
    phase: Callable[[str, float], None],
    workload: Callable | None = None,
    partial: Callable[[Partial], None] | None = None,
    held: Held | None = None,
    send: Callable[[Samples], None] | None = None,
) -> CycleDone:
    """Run one cycle; its row holds ``CycleRow`` fields (``outcome`` set). ``held``: the server
    kept across cycles (``--restart reload``); ``send``: where the memory samples go (the
    worker's channel). What runs beside the load and around the stop are observers of its
    phases (``rig.worker.observers``)."""
    evidence = Path(spec.evidence_dir) / f"c{cycle:06d}"
    if evidence.exists():  # a cycle cut short by a killed run, now run again
        shutil.rmtree(evidence, ignore_errors=True)
    evidence.mkdir(parents=True, exist_ok=True)
    os.environ["RIG_EVIDENCE_DIR"] = str(evidence)
    if spec.hook:
        os.environ["RIG_EVIDENCE_HOOK"] = spec.hook
    row = CycleDraft(
        cycle=cycle,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        worker_pid=os.getpid(),
        stop_error=None,
        detail=None,
    )
    reload = held is not None
    unload_first = spec.stop_strategy == "unload-then-stop"
    watchers = observers_mod.for_spec(spec, sample=spec.sample_memory)
    explicit = unload_first or reload or any(o.explicit_model_control for o in watchers)
    options = ServerOptions(
        model_repository=spec.model_repository,
        backend_directory=spec.runtime.backend_dir,
        exit_timeout_s=spec.exit_timeout,
        model_control="explicit" if explicit else "none",
        startup_models=("*",) if explicit else (),
        # Strict (the API's default) unless a model has no config.pbtxt: then it completes it, ~1 s
        strict_model_config=all(
            (Path(spec.model_repository) / m / "config.pbtxt").exists()
            for m in repository_models(Path(spec.model_repository))
        ),
        log_file=str(Path(spec.log_dir) / f"triton-c{cycle:06d}.log") if spec.log_dir else None,
        backend_config=(("python", "shm-region-prefix-name", probes.own_shm_prefix()),),
    )

    quiet = Quiet()  # beside other cells of a matrix: start and load one at a time (rig.worker.quiet)
    try:
        if "start" in spec.quiet:
            _enter_quiet(quiet, phase)
        phase("start", spec.startup_timeout + 10)
        engine, t0 = _start(make_engine, spec, options, held, evidence, row, phase)
        if engine is None:
            return CycleDone(row)
        if "load" in spec.quiet:
            if quiet.waits:
                _enter_quiet(quiet, phase)
                phase("start", spec.startup_timeout + 10)  # the time left before the load: the start's bound
        else:
            quiet.leave()  # a load that only waits overlaps
        means = Means(spec, cycle, row, evidence, watchers, phase, workload, partial, send, reload, unload_first, quiet)
        return _cycle_after_start(engine, t0, means)
    finally:
        quiet.leave()


QUEUE_S = 4 * 3600.0  # the bound of a wait for the quiet section: a matrix's --cell-timeout ends a cell sooner


def _enter_quiet(quiet: Quiet, phase: Callable[[str, float], None]) -> None:
    """Wait for the quiet section as the phase ``queue``: its wait is the other cells' turns, not
    this cycle's hang, so it is not held to the start's bound."""
    if quiet.waits:
        phase("queue", QUEUE_S)
    quiet.enter()


@dataclasses.dataclass(frozen=True)
class Means:
    """What ``run_cycle`` made for one cycle and hands on once its server is up: its spec and number,
    its row, its evidence folder, its observers, how it reports its phases, its workload (None: the
    fixed count), where partial rows and memory samples go, the restart and stop modes, the quiet
    section it holds."""

    spec: CycleSpec
    cycle: int
    row: CycleDraft
    evidence: Path
    watchers: list
    phase: Callable[[str, float], None]
    workload: Callable | None
    partial: Callable[[Partial], None] | None
    send: Callable[[Samples], None] | None
    reload: bool
    unload_first: bool
    quiet: Quiet


def _cycle_after_start(engine: Engine, t0: float, means: Means) -> CycleDone:
    """``run_cycle`` once the server is up: the load, the client's scene, the stop, the release."""
    spec, cycle, row, evidence, watchers, phase = (
        means.spec,
        means.cycle,
        means.row,
        means.evidence,
        means.watchers,
        means.phase,
    )
    workload, partial, send = means.workload, means.partial, means.send
    reload, unload_first, quiet = means.reload, means.unload_first, means.quiet
    row["start_latency_s"] = time.monotonic() - t0
    version = engine.server_version()  # the core's own word
    _check_hook(spec, evidence, row)
    inputs, checks, reference = references(engine, spec, row)
    pids = [os.getpid()] + [p.pid for p in probes.stubs_of(os.getpid())]
    regions = probes.shm_regions_mapped(pids)

    kept = Retained()
    ctx = observers_mod.Context(engine, spec, inputs, cycle, lambda timeout: unload_all(engine, timeout), send)
    _load(ctx, row, watchers, phase, workload, kept, checks)
    add_reference(row, reference)
    row.update(serverstats.over_cycle(engine, spec.models, spec.server_stats))
    regions |= _probe_after_load(engine, spec, row, pids)

    # The scene a scenario's client sets for the stop (rig.worker.observers, rig.worker.clients.clientside),
    # out of the quiet section: it measures no speed, and a scene that waits (a load that never
    # ends, a reaper's idle timeout, a hung reload) must not hold up the other cells' loads
    quiet.leave()
    if any(o.sets_scene for o in watchers):
        phase("client", 60 + spec.startup_timeout + 2 * spec.request_timeout)
    for o in watchers:
        o.before_stop(ctx, row)

    phase("stop", spec.exit_timeout + 60)
    t_ret, before = _stop(engine, spec, row, evidence, reload, unload_first)
    verdicts.judge(row, spec.max_memory_growth, spec.max_slowdown)
    if partial is not None:  # a crash or hang in teardown must not lose what stop did, nor hide
        partial(Partial(row.copy(), tuple(sorted(regions))))  # the shared memory it would leave
    for o in watchers:  # the stop kept: a client may end the process here (exit-after-stop)
        o.stopped(ctx, row)

    # What a careful user's process does next: drop its references, let the models unload,
    # then free the server. (Freeing it first, or dropping the last response right after
    # ServerDelete, crashed core 2.51 with a double free: docs/measurements/lifecycle.md.)
    phase("release", spec.exit_timeout + 60)
    kept.clear()
    row.update(_released(spec, evidence, t_ret, watchers))
    row["finalize_before_stop"] = before["finalize_before_stop"]
    for o in watchers:  # counted before the server is freed: a request lost is one with no word by now
        o.released(ctx, row)
    row["cleanup"] = "ok" if reload else teardown(engine, phase, spec)
    row["stubs_killed"] = probes.kill_processes(probes.stubs_of(os.getpid()))
    leaked = probes.shm_regions_present(regions)
    row["shm_regions_leaked"] = len(leaked)
    probes.remove_shm_regions(leaked)
    verdicts.judge(row, spec.max_memory_growth, spec.max_slowdown)
    uncalled = never_finalized(read_markers(evidence)) if row.get("outcome") == "finalize_missing" else 0
    for note in (
        raised_and_held(row),
        never_called(row, uncalled),
        UNANSWERED if row.get("timeouts") else None,
        "; ".join(
            growth_reasons(
                row,
                spec.max_memory_growth,
                spec.max_slowdown,
                server_stats.growth_text(server_stats.part_growth(ctx.windows)),
            )
        )
        or None,
    ):
        row.note(note)
    return CycleDone(row, version)


def _check_hook(spec: CycleSpec, evidence: Path, row: CycleDraft) -> None:
    """Say so in the row where the stubs of Python models left no marker: the hook did not run."""
    if not summarize_markers(read_markers(evidence), None)["finalize_expected"] and _has_python_models(
        spec.model_repository, spec.models
    ):
        row["detail"] = (
            "no finalize evidence: the backend stubs did not run the rig's hook "
            "(a custom EXECUTION_ENV_PATH?); finalize columns read 0"
        )


def _load(
    ctx: observers_mod.Context,
    row: CycleDraft,
    watchers: list,
    phase: Callable[[str, float], None],
    workload: Callable | None,
    kept: Retained,
    checks: dict,
) -> None:
    """The cycle's load: the workload (or the fixed count of requests), its observers told as it
    starts and ends, its figures and its trend over its windows into the row."""
    spec = ctx.spec
    ctx.t_load = time.monotonic()
    ctx.paced = workload is None  # the fixed count ticks its observers; a workload's load does not
    for o in watchers:
        o.load_started(ctx)
    if workload is not None:
        assert spec.workload is not None  # a workload is made from the spec's (rig.worker.main)
        # a fleet's node waits for its round, then the master's length (up to the same bound)
        fleet = 2 * NODE_WAIT_S + RELEASE_WAIT_S if getattr(spec.workload, "master", None) else 0.0
        # the last window waits up to the request timeout for requests still in flight
        phase("infer", spec.workload.seconds * 3 + 60 + fleet + 2 * spec.request_timeout)
        out = workload(ctx.engine, spec, ctx.inputs, kept, ctx.cycle, checks)
    else:
        phase("infer", 60 + spec.requests * 0.1 + 2 * spec.request_timeout)
        tick = lambda: [o.tick(ctx) for o in watchers]  # noqa: E731
        group = spec.requests_in_flight or 1
        out = (
            grouped_requests(ctx.engine, spec, ctx.inputs, spec.retain, kept, checks, group, tick=tick)
            if group > 1
            else sequential_requests(ctx.engine, spec, ctx.inputs, spec.retain, kept, checks, tick=tick)
        )
    ctx.windows = out.pop("windows", None) or []
    row.merge(out)
    ctx.t_load_end = time.monotonic()
    row["workload_s"] = ctx.t_load_end - ctx.t_load
    row.update(trends.window_trend(ctx.windows))
    for o in watchers:
        o.load_ended(ctx, row)


def _start(
    make_engine: Callable[[], Engine],
    spec: CycleSpec,
    options: ServerOptions,
    held: Held | None,
    evidence: Path,
    row: CycleDraft,
    phase: Callable[[str, float], None],
) -> tuple[Engine | None, float]:
    """Start the server (with ``held``, its models' load) and wait until it and the models say
    ready; (the engine, when the start began). A start that fails is the cycle's verdict
    (``load_failed``), its server freed (or kept for the next load): (None, ...)."""
    reload = held is not None
    reloading = reload and held.engine is not None
    engine = held.engine if reloading else make_engine()
    t0 = time.monotonic()
    try:
        if reloading:  # the server is up: this cycle's start is the models' load
            for m in repository_models(Path(spec.model_repository)):
                engine.load_model(m)
        else:
            if reload:
                held.engine = engine
            engine.start(options)
            for note in engine.start_notes() if engine is not None else ():
                row.note(note)
        deadline = t0 + spec.startup_timeout
        while not (engine.is_ready() and all(engine.model_ready(m) for m in spec.models)):
            if time.monotonic() > deadline:
                raise EngineError(f"not ready after {spec.startup_timeout} s: {engine.model_states()}", "UNAVAILABLE")
            time.sleep(0.005)
    except EngineError as e:
        why = triton_error(options.log_file)
        row.update(
            outcome="load_failed",
            load_outcome="not_measured",
            growth_outcome="not_measured",
            detail=(f"{e}: {why}" if why and why not in str(e) else str(e))[:2000],
            **summarize_markers(read_markers(evidence), None),
        )
        row["finalize_before_stop"] = row["finalize_after_stop"] = None
        if reload and _all_ready(engine, []):  # the server stays for the next cycle's load
            row["cleanup"] = unload_all(engine, spec.exit_timeout) or "ok"
        else:
            if reload:
                held.engine = None
            row["cleanup"] = teardown(engine, phase, spec)
        row["stubs_killed"] = probes.kill_processes(probes.stubs_of(os.getpid()))
        return None, t0
    return engine, t0


def _probe_after_load(engine: Engine, spec: CycleSpec, row: CycleDraft, pids: list[int]) -> set[str]:
    """What the load left: stubs that died during it, the stubs' and the worker's memory, fds and
    threads, GPU memory, /dev/shm, whether all still say ready; the shared-memory regions the
    stubs map now."""
    stubs = probes.stubs_of(os.getpid())
    died = sorted(set(pids[1:]) - {p.pid for p in stubs})
    if died:
        row.note(f"stub pid(s) {', '.join(map(str, died))} died during the workload", first=True)
    row["stub_rss_bytes"] = probes.total_rss(stubs)
    stats = probes.process_stats()
    row.update(
        worker_rss_bytes=stats["rss_bytes"],
        worker_fds=stats["fds"],
        worker_threads=stats["threads"],
        gpu_memory_bytes=probes.gpu().memory_used(),
        shm_bytes=probes.dev_shm_bytes(),
        ready_after_load=_all_ready(engine, spec.models),
    )
    return probes.shm_regions_mapped([p.pid for p in stubs])


def _stop(
    engine: Engine, spec: CycleSpec, row: CycleDraft, evidence: Path, reload: bool, unload_first: bool
) -> tuple[float, dict]:
    """The stop (with ``reload``: the models' unload), timed; the finalize markers seen by the
    time it returned go into the row. Returns (when it returned, those markers)."""
    t_stop = time.monotonic()
    if reload:  # the server stays up: this cycle's stop is the models' unload
        unload_err, err = unload_all(engine, spec.exit_timeout, "exit timeout expired: "), None
    else:
        unload_err = unload_all(engine, spec.exit_timeout) if unload_first else None
        err = engine.stop()
    t_ret = time.monotonic()
    row["stop_error"] = "; ".join(e for e in (unload_err, err) if e) or None
    row["stop_latency_s"] = t_ret - t_stop
    row["stubs_alive_after_stop"] = len(probes.stubs_of(os.getpid()))
    before = summarize_markers(read_markers(evidence), t_ret)
    row.update(before)
    row["finalize_after_stop"] = 0
    return t_ret, before


def _released(spec: CycleSpec, evidence: Path, t_ret: float, watchers: list) -> dict:
    """Once the references are dropped: wait (up to the exit timeout, at least
    ``GRACE_AFTER_STOP_S``) for every finalize, the stubs' exit and the observers' requests;
    the finalize markers then."""
    deadline = time.monotonic() + max(GRACE_AFTER_STOP_S, spec.exit_timeout)
    while time.monotonic() < deadline:
        s = summarize_markers(read_markers(evidence), t_ret)
        if (
            s["finalize_before_stop"] + s["finalize_after_stop"] >= s["finalize_expected"]
            and not probes.stubs_of(os.getpid())
            and all(o.settled() for o in watchers)
        ):
            break
        time.sleep(0.02)
    return summarize_markers(read_markers(evidence), t_ret)


def _all_ready(engine: Engine, models: Sequence[str]) -> bool | None:
    """Whether the server and every model still say ready (None: the server would not answer)."""
    try:
        return engine.is_ready() and all(engine.model_ready(m) for m in models)
    except EngineError:
        return None


def _has_python_models(repository: str, names: Sequence[str]) -> bool:
    for name in names:
        mdir = Path(repository) / name
        cfg = mdir / "config.pbtxt"
        text = cfg.read_text() if cfg.exists() else ""
        if "python" in text or any(mdir.glob("*/model.py")):
            return True
    return False

"""Observers of a cycle's phases: what runs beside the load and around ``stop()`` without being
the lifecycle itself. The cycle (``rig.worker.cycle``) calls every observer at each phase, in order, and
knows none of them by name, as the load knows its lanes only through ``Lane``:

- ``load_started``: the server and its models are ready and answered, the load begins;
- ``tick``: a fixed count of requests (no workload) is a tenth further (``ctx.paced``);
- ``load_ended``: the load is over (its windows in ``ctx.windows``); figures go into the row;
- ``before_stop``: set the scene for the stop (``sets_scene``: the cycle announces a phase);
- ``stopped``: the stop is measured and kept (its ``Partial`` sent), the references still held;
- ``settled``: whether the release may end (requests still due an answer hold it);
- ``released``: the references are dropped and the models unloaded; last figures into the row.

The observers: ``ProcessMemory`` (always: every process's memory through the load, and the
growth per 1,000 requests that the growth verdict reads) and, for a scenario's client
(``spec.client``, ``rig.worker.clients.clientside``), ``Tracemalloc`` (memory), ``InFlightAtStop``
(stop-in-flight), ``LoadingAtStop`` (stop-while-loading) and ``RefusedRequests``
(refused-request).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rig.common import probes, trends
from rig.contract.messages import Samples
from rig.contract.spec import CycleSpec, repository_models
from rig.worker.clients import clientside, scenes, sequences
from rig.worker.engines.base import Engine
from rig.worker.unpatched import original

SAMPLE_EVERY_S = 0.25  # how often ProcessMemory samples, at least
MAX_SHARE = 0.05  # of one core: a sample that took 10 ms waits at least 0.2 s for the next


@dataclasses.dataclass
class Context:
    """What an observer may use: the cycle's server, spec, models and inputs, its row so far,
    the load's windows once it ended, and the cycle's own means (``unload_all``, ``send``)."""

    engine: Engine
    spec: CycleSpec
    inputs: dict
    cycle: int
    unload_all: Callable[[float], str | None]
    send: Callable[[Samples], None] | None = None  # the worker's channel (a Samples message)
    windows: list = dataclasses.field(default_factory=list)
    t_load: float = 0.0  # monotonic: the load's start and end
    t_load_end: float = 0.0
    paced: bool = False  # the load calls ``tick`` (a fixed count of requests, no workload)


class CycleObserver(Protocol):
    """One observer of a cycle's phases (see the module's docstring). Every method is called;
    one with nothing to do does nothing (``Observer``'s defaults)."""

    sets_scene: bool
    explicit_model_control: bool  # the server must start with explicit model control (it unloads and loads)

    def load_started(self, ctx: Context) -> None: ...

    def tick(self, ctx: Context) -> None: ...

    def load_ended(self, ctx: Context, row: dict) -> None: ...

    def before_stop(self, ctx: Context, row: dict) -> None: ...

    def stopped(self, ctx: Context, row: dict) -> None: ...

    def settled(self) -> bool: ...

    def released(self, ctx: Context, row: dict) -> None: ...


class Observer:
    """Does nothing at every phase: observers override what they need."""

    sets_scene = False
    explicit_model_control = False

    def load_started(self, ctx: Context) -> None:
        pass

    def tick(self, ctx: Context) -> None:
        pass

    def load_ended(self, ctx: Context, row: dict) -> None:
        pass

    def before_stop(self, ctx: Context, row: dict) -> None:
        pass

    def stopped(self, ctx: Context, row: dict) -> None:
        pass

    def settled(self) -> bool:
        return True

    def released(self, ctx: Context, row: dict) -> None:
        pass


class ProcessMemory(Observer):
    """Every process where the models live, sampled from a kernel thread through the load: the
    worker (the core, the in-process API, the load) and each backend stub by model and instance
    (RSS, ``probes.rss_of``: why not USS is said there), and each one's GPU memory where NVML sees a GPU. At the
    load's end: the samples to the ``memory`` table (a ``Samples`` message) and the growth per
    1,000 requests of each process kind, after the warm-up, to the row (``rig.common.trends``).

    Its cost is bounded: a sample waits ``SAMPLE_EVERY_S``, or ``1 / MAX_SHARE`` times the CPU
    time the last one took (a process of many GiB takes longer to read), whichever is longer; the
    thread holds the GIL only to parse one short file per process."""

    def __init__(self) -> None:
        self.samples: list[dict] = []
        self._run = False
        self._done: list[int] = []
        self._who: dict[int, tuple[str | None, str | None]] = {}
        self._procs: list = []
        self._k = 0
        self._threaded = False
        self._gpu_source: str | None = None  # process | device: fixed by the first GPU figure read

    def load_started(self, ctx: Context) -> None:
        import psutil

        self._me = psutil.Process(os.getpid())
        self._find()
        if ctx.paced:  # a fixed count of requests: a sample at each tick, at an exact count
            return
        self._run = self._threaded = True
        original("_thread", "start_new_thread")(self._loop, ())

    def tick(self, ctx: Context) -> None:
        if not self._run and hasattr(self, "_me"):
            self._sample()

    def _find(self) -> None:
        self._procs = probes.stubs_of(os.getpid())
        for p in self._procs:
            if p.pid not in self._who:
                self._who[p.pid] = probes.stub_identity(p)

    def _sample(self) -> None:
        t = time.monotonic()
        mem = probes.gpu().memory_of([self._me.pid, *(p.pid for p in self._procs)], self._gpu_source)
        if mem.source is not None:  # one cycle's GPU series reads one source, never both
            self._gpu_source = mem.source
        gpu = mem.by_pid
        k, self._k = self._k, self._k + 1
        # the devices' used memory (where PIDs cannot match) belongs to no process: it rides on the
        # worker's sample for the growth, and stays out of the memory table's per-process rows
        taken = [
            dict(
                sample=k,
                t=t,
                process="worker",
                model=None,
                instance=None,
                pid=self._me.pid,
                rss_bytes=probes.rss_of(self._me),
                gpu_bytes=gpu.get(self._me.pid),
                device_gpu_bytes=mem.device_bytes,
            )
        ]
        gone = False
        for p in self._procs:
            rss = probes.rss_of(p)
            if rss is None:
                gone = True
                continue
            model, instance = self._who.get(p.pid, (None, None))
            taken.append(
                dict(
                    sample=k,
                    t=t,
                    process="stub",
                    model=model,
                    instance=instance,
                    pid=p.pid,
                    rss_bytes=rss,
                    gpu_bytes=gpu.get(p.pid),
                )
            )
        self.samples.extend(taken)
        if gone:  # a stub died (or restarted): look again for the next sample
            self._find()

    def _loop(self) -> None:
        sleep = original("time", "sleep")  # a kernel thread: never gevent's sleep
        while self._run:
            cpu = time.thread_time()  # what the sample costs a core (the wait for the GIL costs none)
            try:
                self._sample()
            except Exception:  # noqa: BLE001, S110
                pass
            sleep(max(SAMPLE_EVERY_S, (time.thread_time() - cpu) / MAX_SHARE))
        self._done.append(1)

    def load_ended(self, ctx: Context, row: dict) -> None:
        if not hasattr(self, "_me"):
            return
        self._run = False
        deadline = time.monotonic() + 2 * SAMPLE_EVERY_S + 1
        while self._threaded and not self._done and time.monotonic() < deadline:
            time.sleep(0.01)
        ends = [w["monotonic_end"] for w in ctx.windows if w.get("monotonic_end") is not None]
        # the load's end: its last window's (the workload's teardown after it allocates in the
        # worker, and none of it is the load's); without windows, when the requests ended
        end = max(ends) if ends else ctx.t_load_end
        self.samples = [s for s in self.samples if s["t"] <= end + 0.05]
        counts = [
            (w.get("requests") or 0) + (w.get("errors") or 0) for w in ctx.windows if w.get("monotonic_end") is not None
        ]
        times = [s["t"] for s in self.samples]
        done = trends.requests_at(times, ends, counts, ctx.t_load, end, row.get("requests"))
        for s, r in zip(self.samples, done if done is not None else [None] * len(times)):
            s["requests"] = None if r is None else float(r)
        row["memory_samples"] = len({s["sample"] for s in self.samples})
        growth = trends.process_growth(self.samples, trends.warmup_end(ctx.t_load, end, ends))
        span = end - trends.warmup_end(ctx.t_load, end, ends)
        rate = (
            (done[-1] - done[0]) / (times[-1] - times[0])
            if done is not None and len(times) > 1 and times[-1] > times[0]
            else None
        )
        row.update(trends.growth_columns(growth, rate if span > 0 else None))
        if self._gpu_source is not None:
            row["gpu_memory_source"] = self._gpu_source
        if ctx.send is not None:
            ctx.send(
                Samples(
                    ctx.cycle,
                    tuple(
                        {
                            **{k: v for k, v in s.items() if k not in ("t", "device_gpu_bytes")},
                            "t_s": s["t"] - ctx.t_load,
                        }
                        for s in self.samples
                    ),
                )
            )


class Tracemalloc(Observer):
    """``memory``: the worker's Python allocations (tracemalloc) beside its RSS over the load."""

    def load_started(self, ctx: Context) -> None:
        self._sampler = clientside.MemorySampler()

    def load_ended(self, ctx: Context, row: dict) -> None:
        row.update(self._sampler.finish(row.get("requests"), row.get("workload_s") or 0.0))


class RefusedRequests(Observer):
    """``refused-request``: requests with an unknown input, refused at submission, before the stop."""

    sets_scene = True

    def before_stop(self, ctx: Context, row: dict) -> None:
        row.merge(clientside.refuse(ctx.engine, ctx.spec.models))


class LoadingAtStop(Observer):
    """``stop-while-loading``: the models unloaded, loaded again from a thread, the stop called
    while a load is under way."""

    sets_scene = True
    explicit_model_control = True

    def before_stop(self, ctx: Context, row: dict) -> None:
        spec = ctx.spec
        unloaded = ctx.unload_all(spec.startup_timeout)
        if unloaded:
            row.merge({"detail": f"before the load under way at stop: {unloaded[:300]}"})
        loader = clientside.load_in_thread(
            ctx.engine, repository_models(Path(spec.model_repository)), spec.startup_timeout
        )
        row["loading_at_stop"] = clientside.loading(ctx.engine)
        if loader.get("errors"):
            row.merge({"detail": f"the load under way at stop failed: {loader['errors'][0][:300]}"})


class InFlightAtStop(Observer):
    """``stop-in-flight``: requests submitted just before the stop; how each ended, counted once
    the release is over (a request lost is one with no word by then)."""

    sets_scene = True

    def __init__(self) -> None:
        self.flight: clientside.InFlight | None = None

    def before_stop(self, ctx: Context, row: dict) -> None:
        self.flight = clientside.start_in_flight(
            ctx.engine, clientside.entry_models(ctx.engine, ctx.spec.models), ctx.inputs, ctx.spec.in_flight_at_stop
        )

    def settled(self) -> bool:
        return self.flight is None or self.flight.ended() >= self.flight.submitted

    def released(self, ctx: Context, row: dict) -> None:
        if self.flight is not None:
            row.merge(self.flight.figures())


CLIENT_OBSERVERS: dict[str, type[Observer]] = {
    "memory": Tracemalloc,
    "refused-request": RefusedRequests,
    "stop-while-loading": LoadingAtStop,
    "stop-in-flight": InFlightAtStop,
    **scenes.SCENES,  # the 2026 scenarios' scenes: rig.worker.clients.scenes
    **sequences.SCENES,
}


def for_spec(spec, sample: bool = True) -> list[CycleObserver]:
    """The observers of a cycle of ``spec``: the process sampler (unless ``sample`` is False)
    and the observer of the scenario's client, if it has one."""
    out: list[CycleObserver] = [ProcessMemory()] if sample else []
    if spec.client in CLIENT_OBSERVERS:
        scene = CLIENT_OBSERVERS[spec.client]()
        if hasattr(scene, "before_start"):  # a scene that left the repository otherwise puts it back
            scene.before_start(spec)
        out.append(scene)
    return out

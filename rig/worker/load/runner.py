"""Running a workload: Locust's local runner over the workload's users (closed loop), or one
lane on a seeded schedule (open loop), with one window row per ``window_seconds``."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import gevent
import numpy as np
from locust.env import Environment

from rig.contract.rows import joined
from rig.contract.spec import ClosedLoop, OpenLoop
from rig.worker import serverstats
from rig.worker.engines.base import Engine, EngineError, as_entries
from rig.worker.load import locust_api
from rig.worker.load.lanes import stop_lane
from rig.worker.load.schedule import arrival_times
from rig.worker.load.sink import Sink
from rig.worker.load.users import Workload, load_workload, run_classes, size_shape
from rig.worker.load.windows import HubMonitor, run_windows

locust_api.quiet_spawn_rate_warning()  # the rig starts its users at once, on purpose


def run_locust(
    engine: Engine,
    models: list[str],
    inputs: dict,
    load: ClosedLoop,
    *,
    emit: Callable[[dict], None],
    tags: dict,
    workload: Workload | None = None,
    csv_prefix: str | None = None,
    request_timeout: float,
    checks: dict | None = None,
    fleet: dict | None = None,
    server_stats: bool,
) -> dict:
    """Closed loop (``load``): the workload's users (``load.name``, a built-in name or a locustfile;
    ``workload``: it loaded already) under its shape, or ``load.users`` of them from the start.
    ``inputs`` maps each model to its entries (a list of dicts name -> array, cycled request by
    request; one dict is one entry). With ``fleet``
    (``{"master": "HOST:PORT", "hello": {...}}``) the users, the shape and the length come from
    a ``rig fleet`` master instead (``rig.contract.fleet``). ``server_stats``: each window also
    holds Triton's statistics of ``models`` (``rig.worker.serverstats``)."""
    loaded = workload if workload is not None else load_workload(load.name)
    users, seconds, web_port = load.users, load.seconds, load.web_port
    shape = size_shape(loaded.shape, users, seconds)
    sink = Sink()
    classes = run_classes(
        loaded,
        engine=engine,
        models=models,
        inputs=inputs,
        in_flight=load.in_flight,
        request_timeout=request_timeout,
        sink=sink,
        checks=checks,
    )
    env = Environment(user_classes=classes, shape_class=shape)
    sink.env = env

    def task_error(user_instance, exception, tb, **_):
        if not getattr(exception, "_rig_counted", False):  # infer() counted its own failures
            user = getattr(user_instance, "user", user_instance)  # Locust passes the TaskSet
            sink.task_error(f"{type(user).__name__}: {type(exception).__name__}: {exception}")

    env.events.user_error.add_listener(task_error)
    server = serverstats.reader(engine, models, server_stats)
    if fleet is not None:
        return _run_node(env, sink, fleet, classes, emit, tags, server)
    runner = env.create_local_runner()
    web = None
    if web_port:
        # The UI reads Locust's options; give it the defaults, never the worker's own argv
        # (its page handler parses sys.argv for extra options: the worker's are done with).
        locust_api.give_web_ui_defaults(env)
        sys.argv = sys.argv[:1]
        web = env.create_web_ui(host="127.0.0.1", port=web_port)
    writer = None
    if csv_prefix:
        writer = locust_api.csv_writer(env, csv_prefix)
        gevent.spawn(writer)
    hub = HubMonitor()
    sink.start_pump()

    def start():
        if shape is not None:
            runner.start_shape()
        else:
            runner.start(users, spawn_rate=max(users, 1) * 100)

    rows, wall = run_windows(
        sink,
        hub,
        seconds,
        load.window_seconds,
        emit,
        tags,
        conc=lambda: sum(lane.in_flight for lane in sink.lanes),
        start=start,
        finish=lambda last: runner.quit(),
        server=server,
    )  # lanes wait, drained
    sink.stop_pump()
    if writer:
        writer.close_files()
    if web:
        web.stop()
    hub.stop()
    return _noted(sink.summary(wall, rows), server)


def _noted(out: dict, server) -> dict:
    """The load's figures, with the first failed read of the server's statistics in its detail."""
    if server is not None and server.note:
        out["detail"] = joined(out.get("detail"), server.note)
    return out


def _run_node(env, sink: Sink, fleet: dict, classes: list, emit, tags: dict, server=None) -> dict:
    """This cycle's load as a node of a fleet: join the master, wait for the round, keep the
    windows while the master's users run here, report, leave."""
    from rig.contract.fleet import node_figures
    from rig.worker.load.node import NodeLink, node_hello

    hello = node_hello(fleet, classes, fleet.get("hello", {}))
    link = None
    try:
        link = NodeLink(env, fleet["master"], hello)
        rnd = link.wait_round()
    except EngineError as e:  # recorded as the cycle's error: no round, no requests
        if link is not None:
            link.leave()
        return {"requests": 0, "errors": 0, "throughput": None, "detail": str(e), "windows": []}
    hub = HubMonitor()
    sink.start_pump()
    rows, wall = run_windows(
        sink,
        hub,
        float(rnd["seconds"]),
        float(rnd["window_seconds"]),
        emit,
        tags,
        conc=lambda: sum(lane.in_flight for lane in sink.lanes),
        finish=lambda last: link.finish(),
        server=server,
    )  # lanes wait, drained
    sink.stop_pump()
    hub.stop()
    out = _noted(sink.summary(wall, rows), server)
    link.done(node_figures(hello, out, rows))
    return out


def run_open(
    engine: Engine,
    model: str,
    inputs,
    load: OpenLoop,
    *,
    emit: Callable[[dict], None],
    tags: dict,
    check: dict | None = None,
    server_stats: bool,
) -> dict:
    """Open loop: one lane submits on a seeded schedule; latency from the scheduled time.
    ``inputs``: the model's entries (or one), send k carrying entry k mod N. Every
    scheduled send is accounted: each window holds the sends scheduled in it (``scheduled``),
    and the last one those never sent (``dropped``); so over the windows,
    scheduled = requests + errors + dropped."""
    rate, seconds, window_seconds = load.rate, load.seconds, load.window_seconds
    lane = engine.lane(model, as_entries(inputs), 1)
    if lane is None or not lane.supports_open_loop:
        raise EngineError(
            f"open-loop load needs a lane of the engine's own ({engine.name} has none "
            "here: the capi engine needs a C compiler)",
            "UNSUPPORTED",
        )
    lane.set_check(check)
    server = serverstats.reader(engine, [model], server_stats)
    sink = Sink()
    hub = HubMonitor()
    sink.add(lane, model)
    sink.start_pump()
    schedule = np.empty(0, dtype=np.int64)
    opened = [0]  # sends counted into windows so far

    def start():
        nonlocal schedule
        schedule = arrival_times(rate, seconds, time.monotonic_ns() + 5_000_000, load.arrivals, load.seed)
        lane.start_open(schedule)

    def scheduled_until(window, end_ns: int | None) -> None:
        upto = len(schedule) if end_ns is None else int(np.searchsorted(schedule, end_ns, side="left"))
        window.scheduled = upto - opened[0]
        opened[0] = upto

    def finish(last):
        if len(schedule):  # the schedule runs to its end (it started a few ms after the windows)
            gevent.sleep(max(0.0, (int(schedule[-1]) - time.monotonic_ns()) / 1e9 + 0.002))
        stop_lane(lane)  # no more sends; the requests in flight return into this window
        sink.remove(lane)
        stats = lane.stats()
        last.dropped = len(schedule) - stats["issued"]  # never sent: cut by the stop, or refused

    rows, wall = run_windows(
        sink,
        hub,
        seconds,
        window_seconds,
        emit,
        tags,
        conc=lambda: None,
        rate=rate,
        start=start,
        finish=finish,
        before_close=lambda w, end_ns: scheduled_until(w, end_ns),  # noqa: PLW0108
        server=server,
    )
    sink.stop_pump()
    lane.close()
    hub.stop()
    out = _noted(sink.summary(wall, rows), server)
    out.update(scheduled=len(schedule), dropped=int(sum(r.get("dropped") or 0 for r in rows)))
    return out


def make_cycle_workload(wcfg: ClosedLoop | OpenLoop, emit_window: Callable[..., None]):
    """A workload function for ``cycle.run_cycle``: Locust load for ``seconds`` on every model,
    then the retention policy applied to one last request."""

    loaded: list = []  # the locustfile, loaded once for all the cycles of this worker

    def workload(engine: Engine, spec, inputs: dict, kept, cycle: int, checks: dict | None = None) -> dict:
        from rig.worker.engines.retention import apply_retention

        model = spec.models[0]
        tags = {"mode": wcfg.kind, "cycle": cycle}
        stats_on = spec.server_stats  # --server-stats

        def emit(row):
            emit_window(**row)

        if isinstance(wcfg, OpenLoop):
            out = run_open(
                engine,
                model,
                inputs[model],
                wcfg,
                emit=emit,
                tags=tags,
                check=(checks or {}).get(model),
                server_stats=stats_on,
            )
        else:
            csv = os.path.join(spec.log_dir, f"locust-c{cycle:06d}") if spec.log_dir else None
            with _in_folder(spec.cwd):  # a locustfile may open files relative to where it was started
                if not loaded:
                    loaded.append(load_workload(wcfg.name))
                out = run_locust(
                    engine,
                    list(spec.models),
                    inputs,
                    wcfg,
                    workload=loaded[0],
                    emit=emit,
                    tags=tags,
                    csv_prefix=csv,
                    request_timeout=spec.request_timeout,
                    checks=checks,
                    fleet=_fleet(wcfg, spec, cycle),
                    server_stats=stats_on,
                )
        why: dict = {}  # the windows stay in ``out``: the cycle reads the load's trend from them
        failed = apply_retention(engine, model, inputs[model], spec.retain, kept, spec.request_timeout, why)
        if failed:
            out["requests"] += 1
            out["errors"] += 1
            out["timeouts"] = out.get("timeouts", 0) + (why.get("code") == "TIMEOUT")
            out["detail"] = joined(out.get("detail"), failed)
        if out["requests"] == 0:
            out["detail"] = joined(out.get("detail"), "the workload completed no request")
        return out

    return workload


def _fleet(wcfg: ClosedLoop, spec, cycle: int) -> dict | None:
    if not wcfg.master:
        return None
    return {
        "master": wcfg.master,
        "node": wcfg.node,
        "hello": {
            "run_id": spec.run_id,
            "cycle": cycle,
            "engine": spec.engine,
            "model": spec.model_label,
            "triton_version": spec.runtime.triton_version,
        },
    }


class _in_folder:
    """``os.chdir(folder)`` for a block, and back (``contextlib.chdir`` from 3.11 on)."""

    def __init__(self, folder: str):
        self.folder, self.before = folder, None

    def __enter__(self):
        if self.folder and os.path.isdir(self.folder):
            self.before = os.getcwd()
            os.chdir(self.folder)

    def __exit__(self, *exc):
        if self.before is not None:
            os.chdir(self.before)

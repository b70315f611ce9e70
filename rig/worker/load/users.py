"""Locust users that load Triton in-process, and workloads as locustfiles.

A workload is a locustfile, loaded as ``locust -f`` loads one (``locust_api.load_locustfile``):
its user classes, subclasses of ``TritonUser``, and its ``LoadTestShape``, if it has one. The
built-in workloads (``steady``, ``soak``, ``ramp``, ``step``, ``spike``) are such files in the
project's ``workloads/`` folder.

A ``TritonUser`` without tasks of its own keeps ``in_flight`` requests in flight through the
engine's lane, the fast path. One with ``@task`` methods sends its own requests with
``self.infer(...)``, which waits cooperatively, times the request and counts it like every
other, and returns copies of the outputs for the task to check. An exception that a task raises
(a failed check, say) counts as an error of the run.
"""

from __future__ import annotations

import time
from pathlib import Path

import gevent
import numpy as np
from locust import LoadTestShape, User, constant

from rig.common.errors import RigError
from rig.contract.spec import WORKLOADS
from rig.worker.crossthread import Signal
from rig.worker.engines.base import Engine, EngineError, as_entries
from rig.worker.load.lanes import TaskLane, make_lane, stop_lane

BUILTIN = WORKLOADS


class RigShape(LoadTestShape):
    """A shape that the rig sizes: ``users`` (the peak) and ``seconds`` (the run's length) come
    from ``--users`` and ``--workload-seconds`` before the first tick. A subclass says how many
    users run ``t`` seconds in (``users_at``); the shape ends after ``seconds``."""

    abstract = True
    users = 1
    seconds = 10.0

    def users_at(self, t: float) -> int:
        return self.users

    def tick(self):
        t = self.get_run_time()
        if t >= self.seconds:
            return None
        return max(1, round(self.users_at(t))), max(100, self.users * 100)


def _hold(user):
    """The task of a lane user: the lane keeps the requests in flight; the sink drains it.
    Locust stops a user by killing this greenlet; ``on_stop`` then runs."""
    gevent.sleep(3600)


class TritonUser(User):
    """A Locust user whose client is the in-process Triton engine."""

    abstract = True
    wait_time = constant(0)
    # Set by the rig on a subclass made per run:
    engine: Engine = None
    model: str = ""  # this user's model (lane users: one subclass per model)
    models: tuple = ()  # every model of the run
    inputs_by_model: dict = {}  # the rig's entries for each model (a list of dicts name -> array)  # noqa: RUF012
    in_flight: int = 1
    request_timeout: float  # the run option's (rig.contract.option_table), set per run
    checks: dict = {}  # model -> reference output every lane response is held to  # noqa: RUF012
    sink = None

    def on_start(self):
        if self.tasks == [_hold]:
            self.lane = make_lane(
                self.engine, self.model, self.inputs_by_model[self.model], self.in_flight, self.request_timeout
            )
            self.lane.set_check(self.checks.get(self.model))
            self.lane.start_closed()
        else:
            self.lane = TaskLane()
        self.sink.add(self.lane, self.model)

    def on_stop(self):
        # The lane waits for its requests up to the request timeout; those still unanswered
        # then are counted as timeouts (the lane's own scan), and close() waits no longer.
        stop_lane(self.lane, self.request_timeout)
        self.sink.remove(self.lane)
        self.lane.close(0)

    def inputs_for(self, model: str | None = None) -> dict[str, np.ndarray]:
        """The rig's next inputs for ``model`` (this user's by default): its entries in turn
        (``--input-data``: the file's, one per call; else one built from its metadata)."""
        model = model or self.model
        entries = self.inputs_by_model[model]
        turns = self.__dict__.setdefault("_turns", {})  # per user: each user walks the entries
        k = turns.get(model, 0)
        turns[model] = k + 1
        return entries[k % len(entries)]

    def infer(
        self, inputs: dict | None = None, model: str | None = None, timeout_s: float | None = None
    ) -> dict[str, np.ndarray]:
        """Send one request and wait for it (other users run meanwhile); returns copies of the
        outputs. Timed from the submission until the response is released, and counted in the
        window and in Locust's stats. A failed request raises ``EngineError``."""
        model = model or self.model
        if inputs is None:  # the model's next entry
            if model not in self.inputs_by_model:
                raise EngineError(
                    f"no inputs given for {model!r}, which is not one of the run's models ({', '.join(self.models)})",
                    "INVALID_ARG",
                )
            inputs = self.inputs_for(model)
        done = Signal()

        def complete(response, error):
            outputs = None
            if response is not None:
                try:
                    outputs = response.outputs()
                except EngineError as e:
                    error = e
                finally:
                    response.release()
            done.set((outputs, error, time.monotonic_ns()))

        t0 = time.monotonic_ns()
        self.engine.infer_async(model, inputs, complete)
        timeout = self.request_timeout if timeout_s is None else timeout_s
        if not done.wait(timeout):
            error = EngineError(f"no response from {model} within {timeout:g} s", "TIMEOUT")
            t1 = time.monotonic_ns()
        else:
            outputs, error, t1 = done.value
        if error is not None:
            self.lane.fail(str(error), t1 - t0, timeout=getattr(error, "code", None) == "TIMEOUT")
            error._rig_counted = True  # the user_error listener must not count it twice
            raise error
        self.lane.record(t1 - t0)
        return outputs


# ---------------------------------------------------------------- locustfiles


def bundled_workloads() -> Path:
    """``workloads/`` of a checkout, or the same files installed with the rig."""
    here = Path(__file__).resolve().parents[2]  # the rig package
    for candidate in (here.parent / "workloads", here / "_workloads"):
        if (candidate / "steady.py").exists():
            return candidate
    raise RigError("the rig's built-in workloads are missing; reinstall the rig (pip install .)")


def workload_path(name: str) -> Path:
    """The locustfile of a built-in workload name, or the path given."""
    if name in BUILTIN:
        return bundled_workloads() / f"{name}.py"
    path = Path(name).expanduser()
    if path.suffix != ".py":
        raise RigError(
            f"unknown workload {name!r}: give one of {', '.join(BUILTIN)}, none, or the path of a locustfile (*.py)"
        )
    if not path.is_file():
        raise RigError(f"workload file {path} does not exist")
    return path.resolve()


class Workload:
    """A loaded locustfile: its Triton user classes and its shape (or None)."""

    def __init__(self, path: Path, users: list[type], shape: LoadTestShape | None):
        self.path, self.users, self.shape = path, users, shape

    def describe(self) -> dict:
        return {
            "path": str(self.path),
            "users": [u.__name__ for u in self.users],
            "task_users": [u.__name__ for u in self.users if u.tasks],
            "shape": type(self.shape).__name__ if self.shape is not None else None,
        }


def load_workload(name: str) -> Workload:
    """Load a workload's locustfile; any fault in it is one ``RigError`` line."""
    from rig.worker.load.locust_api import load_locustfile

    path = workload_path(name)
    try:
        classes, shapes = load_locustfile(str(path))
    except BaseException as e:  # noqa: BLE001 - SyntaxError, ImportError, SystemExit, a raise in the file
        raise RigError(f"workload {path.name}: {type(e).__name__}: {e}") from None
    others = [n for n, c in classes.items() if not issubclass(c, TritonUser)]
    if others:
        raise RigError(
            f"workload {path.name}: user class(es) {', '.join(others)} must subclass "
            "rig.worker.load.TritonUser (the rig sends requests in-process, not over HTTP)"
        )
    if len(shapes) > 1:
        raise RigError(f"workload {path.name}: {len(shapes)} LoadTestShape classes; keep one")
    users = list(classes.values()) or [TritonUser]
    return Workload(path, users, shapes[0] if shapes else None)


def run_classes(
    workload: Workload,
    *,
    engine: Engine,
    models: list[str],
    inputs: dict,
    in_flight: int,
    request_timeout: float,
    sink,
    checks: dict | None = None,
) -> list[type]:
    """Subclasses of the workload's users made for one run. A user without tasks of its own (a
    lane user) gets one subclass per model, so Locust spreads such users over the models."""
    made = []
    inputs = {m: as_entries(v) for m, v in inputs.items()}
    common = {
        "engine": engine,
        "models": tuple(models),
        "inputs_by_model": inputs,
        "in_flight": in_flight,
        "request_timeout": request_timeout,
        "sink": sink,
        "checks": checks or {},
    }
    for cls in workload.users:
        if cls.tasks:
            made.append(type(cls.__name__, (cls,), {**common, "model": models[0], "abstract": False}))
        else:
            for m in models:
                made.append(
                    type(
                        f"{cls.__name__}_{m}",
                        (cls,),
                        {
                            **common,
                            "model": m,
                            "tasks": [_hold],
                            "abstract": False,
                            "weight": getattr(cls, "weight", 1),
                        },
                    )
                )
    return made


def size_shape(shape: LoadTestShape | None, users: int, seconds: float) -> LoadTestShape | None:
    if isinstance(shape, RigShape):
        shape.users, shape.seconds = users, seconds
    return shape

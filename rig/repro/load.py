"""The cell's requests: random inputs of each model's metadata, the fixed count or the closed loop
(round-robin over the models, as the rig's load), the template model's check of each answer, and
what the client keeps across ``stop()``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from rig.capi.core import NUMPY_OF, CoreError
from rig.capi.server import as_array
from rig.repro.head import MAX_CONSECUTIVE_ERRORS
from rig.repro.server import Pending, ReproServer

# The models the requests go to, in turn, each with its inputs; and a check of a model's answer.
Targets = list[tuple[str, dict[str, np.ndarray]]]
Check = Callable[[ReproServer, int], bool]


class _ResponseOwner:
    """The base of a numpy array over a response's output: the response is deleted when the last
    array over it goes (what a DLPack consumer's array does)."""

    def __init__(self, server: ReproServer, response: int, arr: np.ndarray):
        self.server = server
        self.response = response
        self.__array_interface__ = arr.__array_interface__

    def __del__(self) -> None:
        self.server.delete_response(self.response)


class Kept:
    """What the client keeps referenced across stop(): the last response, an array over its output, or nothing."""

    def __init__(self) -> None:
        self.response = 0
        self.array: np.ndarray | None = None
        self.what = "nothing"

    def keep(self, server: ReproServer, response: int, retain: str) -> None:
        if retain == "last-response":
            self.response = response
            self.what = "the last response (its TRITONSERVER_InferenceResponse not deleted)"
        elif retain == "last-array":
            name, (dtype, shape, base, size) = next(iter(server.outputs(response).items()))
            self.array = np.asarray(_ResponseOwner(server, response, as_array(dtype, shape, base, size)))
            self.what = f"a numpy array over the last response's {name} (the response deleted only when the array goes)"
        else:
            server.delete_response(response)

    def release(self, server: ReproServer) -> None:
        self.array = None  # its owner deletes the response
        if self.response:
            server.delete_response(self.response)
            self.response = 0


# ---------------------------------------------------------------- the load


class Load:
    """What the cell's requests came to."""

    def __init__(self) -> None:
        self.sent = 0
        self.errors = 0
        self.timeouts = 0
        self.bad_outputs = 0
        self.messages: dict[str, int] = {}
        self.lock = threading.Lock()

    def failed(self, message: str, timeout: bool = False) -> None:
        with self.lock:
            self.errors += 1
            self.timeouts += timeout
            self.messages[message] = self.messages.get(message, 0) + 1

    def merge(self, other: Load) -> None:
        """``other``'s figures added to these."""
        self.sent += other.sent
        self.errors += other.errors
        self.timeouts += other.timeouts
        self.bad_outputs += other.bad_outputs
        for message, count in other.messages.items():
            self.messages[message] = self.messages.get(message, 0) + count

    def verdict(self) -> str:
        """The rig's load verdict (rig.contract.verdicts.classify_load) of these figures."""
        if self.timeouts:
            return "timeouts"
        if self.errors:
            return "errors"
        if self.sent == 0:
            return "nothing_completed"
        if self.bad_outputs:
            return "wrong_outputs"
        return "ok"


def weights(size: int) -> np.ndarray:
    """The rig's template model's W (models/numpy/1/model.py): OUTPUT = INPUT @ W."""
    return (np.arange(size * size, dtype=np.float32).reshape(size, size) / (size * size)).astype(np.float32)


def make_inputs(spec: list[tuple[str, str, list[int]]], seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the model's metadata, as the rig makes them: variable dimensions (and a
    batched model's batch dimension, -1 in its metadata) 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dtype, dims in spec:
        shape = [1 if d < 0 else d for d in dims]
        dt = np.dtype(np.float32 if dtype == "BYTES" else NUMPY_OF.get(dtype, np.float32))  # numbers only
        arr = rng.random(shape).astype(dt) if dt.kind == "f" else rng.integers(0, 8, shape).astype(dt)
        out[name] = arr
    return out


def _answer(server: ReproServer, pending: Pending, timeout_s: float, load: Load, check: Check | None) -> int:
    """The response of one request (0 where it failed, counted in ``load``)."""
    if not pending.done.wait(timeout_s):
        load.failed("request timed out (no response within the request timeout)", timeout=True)
        return 0
    if pending.error is not None:
        load.failed(str(pending.error))
        return 0
    if check is not None and pending.response and not check(server, pending.response):
        with load.lock:
            load.bad_outputs += 1
    return pending.response


def fixed_count(
    server: ReproServer, targets: Targets, n: int, group: int, timeout_s: float, checks: dict[str, Check]
) -> tuple[Load, int]:
    """``n`` requests, ``group`` at a time (each group submitted at once, the next once all ended:
    batches form in a batched model, every instance runs), to the models in turn: the rig's fixed
    count. Returns the figures and the last response (0 where it failed), every other response deleted."""
    load = Load()
    last = 0
    consecutive = 0
    i = 0
    while i < n:
        size = min(group, n - i)
        waiting = []
        for k in range(size):
            model, inputs = targets[(i + k) % len(targets)]
            try:
                waiting.append((model, server.submit(model, inputs)))
            except CoreError as e:
                load.failed(str(e))
        load.sent += size
        timed_out = False
        for k, (model, pending) in enumerate(waiting):
            timeouts, errors = load.timeouts, load.errors
            response = _answer(server, pending, timeout_s, load, checks.get(model))
            timed_out = timed_out or load.timeouts > timeouts
            consecutive = consecutive + 1 if load.errors > errors else 0
            if i + size >= n and k == len(waiting) - 1:
                last = response
            else:
                server.delete_response(response)
        i += size
        if timed_out or consecutive >= MAX_CONSECUTIVE_ERRORS * group:
            break  # the model stopped answering (a dead stub, a stuck execute): stop sending
    return load, last


def closed_loop(
    server: ReproServer, targets: Targets, users: int, seconds: float, timeout_s: float, checks: dict[str, Check]
) -> Load:
    """``users`` clients, each sending its next request (to the models in turn) once the last
    ended, for ``seconds`` (the rig's steady workload's shape, without Locust)."""
    load = Load()
    deadline = time.monotonic() + seconds

    def user() -> None:
        turn = 0
        while time.monotonic() < deadline:
            model, inputs = targets[turn % len(targets)]
            turn += 1
            with load.lock:
                load.sent += 1
            try:
                pending = server.submit(model, inputs)
            except CoreError as e:
                load.failed(str(e))
                continue
            response = _answer(server, pending, timeout_s, load, checks.get(model))
            server.delete_response(response)
            if not response and load.timeouts:
                return

    threads = [threading.Thread(target=user, daemon=True) for _ in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout_s + 5)
    return load


def template_check(size: int, inputs: dict[str, np.ndarray]) -> Check:
    """The template model's answer, INPUT @ W, as a check of each response."""
    want = np.matmul(next(iter(inputs.values())), weights(size)).astype(np.float32)

    def check(server: ReproServer, response: int) -> bool:
        outs = server.outputs(response)
        if not outs:  # a decoupled model's final flag alone: answered without data
            return True
        dtype, shape, base, size_b = outs.get("OUTPUT", next(iter(outs.values())))
        got = as_array(dtype, shape, base, size_b)
        return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-5, atol=1e-5))

    return check

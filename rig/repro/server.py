"""The reproducer's own use of the rig's binding (``rig.capi.server.Server``): its options (the
rig's), its requests (each waited for, or read and let go at once), a stateful model's sequences,
readiness and the model index asked without raising, and a response's outputs by name."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from rig.capi.core import MEMORY_CPU, SEQUENCE_END, SEQUENCE_START, CoreError, CoreLibrary, datatype_of
from rig.capi.server import Input, Server

ONE_SHOT_IDS = 1 << 40  # a load's one-request sequences (a stateful model): their correlation ids start here


class Pending:
    """One request in flight: its input buffers live until the core releases it; it is done once
    both the final response and the release have come (as the rig's engine waits for both)."""

    def __init__(self, keep: list[Any]):
        self.keep: list[Any] | None = keep
        self.response = 0  # the latest response with data (a TRITONSERVER_InferenceResponse*)
        self.error: CoreError | None = None
        self.events = 2
        self.done = threading.Event()
        self.release_at_once = False  # each response deleted as it comes (none kept for the caller)


class ReproServer(Server):
    """One in-process server: start, requests, stop, delete; responses held until deleted."""

    def __init__(self, core: CoreLibrary):
        super().__init__(core)
        self._one_shot = ONE_SHOT_IDS

    def _responded(self, pending: Pending, response: int) -> None:
        if pending.release_at_once:  # what the rig's in-flight client does: read, then let go
            self.core.lib.TRITONSERVER_InferenceResponseDelete(response)
            return
        if pending.response:  # a decoupled model's earlier response: keep only the latest
            self.core.lib.TRITONSERVER_InferenceResponseDelete(pending.response)
        pending.response = response

    def _ended(self, pending: Pending) -> None:
        pending.done.set()

    # -- lifecycle
    def start(
        self, models: str, backends: str, exit_timeout: int, log_file: str, shm_prefix: str, explicit: bool = False
    ) -> None:
        """``TRITONSERVER_ServerNew`` with the rig's options: model control NONE (every model of the
        repository loaded at start; ``explicit``: model control EXPLICIT with every model loaded at
        start, for a client that unloads and loads), strict model config and readiness, no metrics,
        the Python backend's shared-memory regions named after this process."""
        self.start_server(
            models,
            backends,
            exit_timeout,
            "explicit" if explicit else "none",
            startup_models=["*"] if explicit else [],
            log_file=log_file,
            backend_config=[("python", "shm-region-prefix-name", shm_prefix)],
        )

    def server_ready(self) -> bool:
        """``TRITONSERVER_ServerIsReady`` (False where it fails)."""
        try:
            return self.is_ready()
        except CoreError:
            return False

    def ready(self, models: list[str]) -> bool:
        return self.server_ready() and all(self.model_ready(m) for m in models)

    def models_loaded(self) -> bool:
        """Whether a model is still loaded, loading or unloading (the repository index's states);
        False where the server no longer answers."""
        try:
            states = [m.get("state") for m in self.model_index()]
        except CoreError:
            return False
        return any(state in ("READY", "LOADING", "UNLOADING") for state in states)

    def model_states(self) -> dict[str, str]:
        """Each model of the repository index and its state (READY, LOADING, UNLOADING, UNAVAILABLE)."""
        try:
            index = self.model_index()
        except CoreError:
            return {}
        return {str(m.get("name")): str(m.get("state") or "UNAVAILABLE") for m in index}

    def inputs_of(self, model: str) -> list[tuple[str, str, list[int]]]:
        meta = self.metadata_of(model)
        return [(t["name"], t["datatype"], [int(d) for d in t.get("shape", [])]) for t in meta.get("inputs", [])]

    def platform(self, model: str) -> str:
        """The model's platform in its metadata (``ensemble``, ``python``); "" where the core does not say."""
        try:
            return str(self.metadata_of(model).get("platform", ""))
        except CoreError:
            return ""

    def sequence_of(self, model: str, sequence: tuple[int, int] | None) -> tuple[int, int] | None:
        """The (correlation id, flags) a request goes in: the caller's, or for a stateful model a
        sequence of its own (START and END, a fresh id: a load that knows nothing of sequences still
        reaches the model, as the rig's engines send it), else none."""
        if sequence is not None or not self.stateful(model):
            return sequence
        with self._id_lock:
            cid, self._one_shot = self._one_shot, self._one_shot + 1
        return cid, SEQUENCE_START | SEQUENCE_END

    def delete(self) -> None:
        self.delete_server()
        self.delete_allocator()

    # -- requests
    def submit(
        self,
        model: str,
        inputs: dict[str, np.ndarray],
        release_at_once: bool = False,
        sequence: tuple[int, int] | None = None,
    ) -> Pending:
        """One request (``Server.send``), its inputs in host memory; ``sequence``: its correlation id
        and flags (``SEQUENCE_START``, ``SEQUENCE_END``), a stateful model's default ``sequence_of``'s."""
        sequence = self.sequence_of(model, sequence)
        keep: list[Any] = []
        parts: list[Input] = []
        for name, arr in inputs.items():
            arr = np.ascontiguousarray(arr)
            keep.append(arr)
            parts.append((name, datatype_of(arr), arr.shape, arr.ctypes.data, arr.nbytes, MEMORY_CPU, 0))
        pending = Pending(keep)
        pending.release_at_once = release_at_once
        self.send(model, parts, sequence, pending)
        return pending

    def outputs(self, response: int) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
        """Each output of a response: (datatype, shape, address, bytes), still owned by it."""
        return {n: (d, s, b or 0, z) for n, d, s, b, z, _, _ in self.response_outputs(response)}

    def delete_response(self, response: int) -> None:
        if response:
            self.core.call("TRITONSERVER_InferenceResponseDelete", response)

"""What the cell's client does just before ``stop()``, as the rig's client does it
(``rig.worker.observers``, ``rig.worker.clients``): requests in flight at the stop
(``stop-in-flight``), requests refused at submission (``refused-request``), a load under way
(``stop-while-loading``), a model loaded again without its ``model.py`` (``load-missing``), a
model's stub killed and the server asked whether it is ready (``stub-killed``), sequences open on
a stateful model (``sequence-at-stop``). A scene acts on a
model whose config's ``fault`` parameter is not ``off`` (the scenario's models say ``on``, their
negative control ``off``): a scenario and its control run the same client."""

from __future__ import annotations

import functools
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rig.capi.core import SEQUENCE_END, SEQUENCE_START, CoreError
from rig.repro.env import stubs
from rig.repro.load import Targets
from rig.repro.server import Pending, ReproServer

_FAULT = re.compile(r'key:\s*"fault"\s*,?\s*value:\s*\{\s*string_value:\s*"(\w+)"')
REFUSED_INPUT = "RIG_NO_SUCH_INPUT"
LOAD_WAIT_S = 20.0  # load-missing: how long a load may run
UNLOAD_WAIT_S = 3.0  # load-missing: how long the unload of a model that did not load may take
PROBE_S = 2.0  # stub-killed: how long the server and the model are asked, once the stub is dead
DEAD_WAIT_S = 5.0  # stub-killed: how long a killed stub may take to be gone


def faulted(models: Path, model: str) -> bool:
    """Whether the client's fault applies to ``model``: its config's ``fault`` is not ``off``."""
    cfg = models / model / "config.pbtxt"
    m = _FAULT.search(cfg.read_text()) if cfg.exists() else None
    return not (m and m.group(1) == "off")


def in_thread(fn: Callable[[], None], wait_s: float) -> dict[str, Any]:
    """Run ``fn`` in a thread (a load that may never return must not block the script); returns
    after ``wait_s`` at most: ``{"done": seconds}`` once it returned, ``"error"`` where it raised."""
    box: dict[str, Any] = {}
    t0 = time.monotonic()

    def run() -> None:
        try:
            fn()
        except CoreError as e:
            box["error"] = " ".join(str(e).split())
        box["done"] = time.monotonic() - t0

    threading.Thread(target=run, daemon=True).start()
    while "done" not in box and time.monotonic() < t0 + wait_s:
        time.sleep(0.01)
    return box


def unload_all(server: ReproServer, timeout_s: float) -> str | None:
    """Every model unloaded, then polled until none is left loaded; a line where they were not."""
    try:
        for name, state in server.model_states().items():
            if state in ("READY", "LOADING"):
                server.unload_model(name)
    except CoreError as e:
        return f"unload: {e}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(s in ("READY", "LOADING", "UNLOADING") for s in server.model_states().values()):
            return None
        time.sleep(0.002)
    return f"unload: models still loaded after {timeout_s:g} s: {server.model_states()}"


class Scene:
    """Does nothing; a scene overrides what it needs."""

    explicit = False  # the server starts with explicit model control (the scene unloads and loads)
    copies = False  # the scene changes the models' files: the script serves a copy of models/

    def before_stop(self, server: ReproServer, models: Path, targets: Targets, startup_s: float) -> list[str]:
        return []

    def settled(self) -> bool:
        return True

    def after(self, server: ReproServer) -> dict[str, Any]:
        return {}

    def busy(self) -> bool:
        """Whether a call the scene made (a load) still runs in its thread: the server is not deleted under it."""
        return False

    def environment(self, work: Path) -> dict[str, str]:
        """Variables the models' stubs read (set before the server starts, which the stubs inherit)."""
        return {}


def entry_targets(server: ReproServer, targets: Targets) -> Targets:
    """The models a client calls: the ensembles where the repository has any (their steps are
    theirs to call), else every model (the rig's ``entry_models``)."""
    ensembles = [(m, inputs) for m, inputs in targets if server.platform(m) == "ensemble"]
    return ensembles or targets


class InFlight(Scene):
    """``stop-in-flight``: ``n`` requests submitted at once (to the models in turn), the stop called
    once the first had a moment to reach ``execute``; each answered, failed, or lost (no answer nor
    error once the stop and the release are over)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pending: list[Pending] = []
        self.refused: list[str] = []

    def before_stop(self, server: ReproServer, models: Path, targets: Targets, startup_s: float) -> list[str]:
        entry = entry_targets(server, targets)
        for i in range(self.n):
            model, inputs = entry[i % len(entry)]
            try:
                self.pending.append(server.submit(model, inputs, release_at_once=True))
            except CoreError as e:  # refused at once: it ended, as a failure
                self.refused.append(str(e))
        time.sleep(0.1)
        names = ", ".join(m for m, _ in entry)
        return [f"{self.n} request(s) submitted at once (to {names} in turn), stop() called 0.1 s later"]

    def settled(self) -> bool:
        return all(p.done.is_set() for p in self.pending)

    def after(self, server: ReproServer) -> dict[str, Any]:
        answered = sum(p.done.is_set() and p.error is None for p in self.pending)
        errors = [str(p.error) for p in self.pending if p.done.is_set() and p.error is not None]
        failed = len(errors) + len(self.refused)
        lost = self.n - answered - failed
        first = (self.refused + errors)[:1]
        note = f"in flight at stop: {self.n}: {answered} answered, {failed} failed, {lost} lost (no answer nor error)"
        return {"lost": lost, "notes": [note + (f"; first failure: {first[0][:200]}" if first else "")]}


class Refused(Scene):
    """``refused-request``: ``n`` requests per model with an input no model has, each of which
    should be refused at submission, before the stop."""

    def __init__(self, n: int) -> None:
        self.n = n

    def before_stop(self, server: ReproServer, models: Path, targets: Targets, startup_s: float) -> list[str]:
        refused = accepted = 0
        first = ""
        bad = {REFUSED_INPUT: np.ones(1, np.float32)}
        for model, _ in targets:
            for _ in range(self.n):
                try:
                    pending = server.submit(model, bad)
                except CoreError as e:
                    refused += 1
                    first = first or str(e)
                    continue
                pending.done.wait(10.0)
                if pending.error is not None:
                    refused += 1
                    first = first or str(pending.error)
                else:
                    accepted += 1
                server.delete_response(pending.response)
        note = f"{refused} request(s) with the unknown input {REFUSED_INPUT} refused" + (
            f" ({first[:200]})" if first else ""
        )
        return [note] + ([f"{accepted} request(s) with an unknown input answered, not refused"] if accepted else [])


class LoadingAtStop(Scene):
    """``stop-while-loading``: the models unloaded, loaded again from a thread, the stop called
    once a load is under way (a model LOADING and its stub up)."""

    explicit = True

    def __init__(self) -> None:
        self.box: dict[str, Any] = {}

    def busy(self) -> bool:
        return "done" not in self.box

    def before_stop(self, server: ReproServer, models: Path, targets: Targets, startup_s: float) -> list[str]:
        notes = [n for n in [unload_all(server, startup_s)] if n]
        deadline = time.monotonic() + startup_s
        while stubs() and time.monotonic() < deadline:  # the unloaded models' stubs gone
            time.sleep(0.01)
        box = self.box

        def load() -> None:
            for model, _ in targets:
                try:
                    server.load_model(model)
                except CoreError as e:
                    box.setdefault("errors", []).append(str(e))
            box["done"] = True

        threading.Thread(target=load, daemon=True).start()
        deadline = time.monotonic() + startup_s
        while time.monotonic() < deadline and "done" not in box:
            if any(s == "LOADING" for s in server.model_states().values()) and stubs():
                time.sleep(0.2)  # its initialize under way
                break
            time.sleep(0.01)
        loading = sum(s == "LOADING" for s in server.model_states().values())
        notes.append(f"the models unloaded, loaded again from a thread: {loading} model(s) LOADING at stop()")
        if box.get("errors"):
            notes.append(f"the load under way at stop failed: {box['errors'][0][:300]}")
        return notes


class LoadMissing(Scene):
    """``load-missing``: the models unloaded, the faulted ones' ``model.py`` taken away, the models
    loaded again (``LOAD_WAIT_S`` at most), the ones that did not load unloaded; then the stop."""

    explicit = True
    copies = True

    def before_stop(self, server: ReproServer, models: Path, targets: Targets, startup_s: float) -> list[str]:
        notes = [n for n in [unload_all(server, startup_s)] if n]
        taken = []
        for model in server.model_states():
            if faulted(models, model):
                for f in (models / model).glob("*/model.py"):
                    f.replace(f.with_name("model.py.taken"))
                    taken.append(f)
        for model in server.model_states():
            box = in_thread(functools.partial(server.load_model, model), LOAD_WAIT_S)
            state = server.model_states().get(model)
            how = "still loading" if "done" not in box else "failed" if "error" in box else "loaded"
            took = f"{box['done']:.1f} s" if "done" in box else f"{LOAD_WAIT_S:.0f} s"
            said = f" ({box['error'][:200]})" if "error" in box else ""
            notes.append(
                f"load of {model}{' without model.py' if taken else ''}: {how} after {took}, state {state}{said}"
            )
            if state != "READY":
                gone = in_thread(functools.partial(server.unload_model, model), UNLOAD_WAIT_S)
                time.sleep(0.5)
                said = "returned" if "done" in gone else f"still blocked after {UNLOAD_WAIT_S:.0f} s"
                notes.append(f"unload: {said}, state then {server.model_states().get(model)}")
        loading = sum(s == "LOADING" for s in server.model_states().values())
        notes.append(f"{loading} model(s) LOADING at stop()")
        return notes


class StubKilled(Scene):
    """``stub-killed``: the faulted models' stubs killed (SIGKILL) once the load is over, then the
    server and each model asked for ``PROBE_S`` whether they are ready."""

    def before_stop(self, server: ReproServer, models: Path, targets: Targets, startup_s: float) -> list[str]:
        names = [m for m, _ in targets]
        doomed = [m for m in names if faulted(models, m)]
        victims = [pid for pid, cmd in stubs().items() if any(f"/{m}/" in cmd for m in doomed)]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + DEAD_WAIT_S
        while set(victims) & set(stubs()) and time.monotonic() < deadline:
            time.sleep(0.01)
        t0, first = time.monotonic(), {}
        while True:
            said = {"server": server.server_ready(), "model": all(server.model_ready(m) for m in names)}
            for who, ready in said.items():
                if not ready and who not in first:
                    first[who] = time.monotonic() - t0
            if time.monotonic() - t0 >= PROBE_S or len(first) == 2:
                break
            time.sleep(0.02)
        what = f"{len(victims)} stub(s) killed (SIGKILL) after the load" if victims else "stub left alive"
        words = [
            f"{who} not ready after {first[who]:.2f} s" if who in first else f"{who} still ready after {PROBE_S:.0f} s"
            for who in ("server", "model")
        ]
        return [f"{what}: {'; '.join(words)}"]


class Sequences(Scene):
    """``sequence-at-stop``: on each stateful model, ``n`` sequences (correlation ids from
    ``first``), each a START request and one more: half of them first, left idle ``idle_s`` (past
    the batcher's 1 s idle timeout) and each asked to go on (a request without START, refused once
    the batcher's reaper ended it), then the other half, just before the stop; none ended. On a
    model whose ``fault`` is ``off`` (the control) each sequence is ended (END) as soon as it is
    open. The model writes the states it still holds at its finalize into ``$RIG_EVIDENCE_DIR``."""

    def __init__(self, n: int, first: int, idle_s: float, timeout_s: float) -> None:
        self.n, self.first, self.idle_s, self.timeout_s = n, first, idle_s, timeout_s
        self.counts: Path | None = None

    def environment(self, work: Path) -> dict[str, str]:
        self.counts = work / "sequences"
        self.counts.mkdir(exist_ok=True)
        for stale in self.counts.glob("sequences-*.count"):
            stale.unlink()
        return {"RIG_EVIDENCE_DIR": str(self.counts)}  # the name the scenario's model.py reads

    def _send(self, server: ReproServer, target: tuple[str, dict[str, np.ndarray]], cid: int, flags: int) -> str | None:
        """One request of sequence ``cid``, waited for; its error (None: answered)."""
        model, inputs = target
        try:
            pending = server.submit(model, inputs, sequence=(cid, flags))
        except CoreError as e:
            return str(e)
        if not pending.done.wait(self.timeout_s):
            return f"sequence {cid}: no answer within {self.timeout_s:g} s"
        server.delete_response(pending.response)
        return None if pending.error is None else str(pending.error)

    def _open(self, server: ReproServer, target: tuple[str, dict[str, np.ndarray]], end: bool) -> str:
        """The model's sequences opened (and ended at once where ``end``): what came of them, in one line."""
        ids = list(range(self.first, self.first + self.n))
        opened, reaped, errors, refusal = 0, 0, [], ""
        for k, half in enumerate([ids[: self.n // 2], ids[self.n // 2 :]]):
            for cid in half:
                said = self._send(server, target, cid, SEQUENCE_START)
                said = said or self._send(server, target, cid, SEQUENCE_END if end else 0)
                errors += [said] if said else []
                opened += not end and said is None
            if k == 0:
                time.sleep(self.idle_s)
                if not end:  # a request without START: refused once the reaper ended the sequence
                    refusals = [e for e in (self._send(server, target, cid, 0) for cid in half) if e]
                    reaped, refusal = len(refusals), (refusals or [""])[0]
        if end:
            what = f"{self.n} sequence(s) opened and each ended (END) at once: none open at stop()"
        else:
            what = (
                f"{opened} sequence(s) opened (START, then one more request) and never ended; the first "
                f"{self.n // 2} left idle {self.idle_s:g} s: {reaped} of them ended by the batcher meanwhile"
                + (f" (asked to go on: {refusal[:200]})" if refusal else "")
                + f"; {opened - reaped} open in the batcher at stop()"
            )
        return f"{target[0]}: {what}" + (f"; {len(errors)} request(s) failed: {errors[0][:200]}" if errors else "")

    def before_stop(self, server: ReproServer, models: Path, targets: Targets, startup_s: float) -> list[str]:
        return [self._open(server, t, end=not faulted(models, t[0])) for t in targets if server.stateful(t[0])]

    def after(self, server: ReproServer) -> dict[str, Any]:
        counts = []
        for f in sorted(self.counts.glob("sequences-*.count")) if self.counts else []:
            try:
                counts.append(int(f.read_text().strip()))
            except (OSError, ValueError):
                pass
        if not counts:
            return {"notes": ["no finalize wrote the sequence states it held"]}
        return {"notes": [f"the stateful model's finalize still held {sum(counts)} sequence state(s)"]}


def scene_of(cell: dict[str, Any]) -> Scene:
    """The scene the cell's client sets (none: ``Scene``)."""
    client = cell.get("client") or "none"
    if client == "stop-in-flight":
        return InFlight(int(cell.get("in_flight_at_stop") or 1))
    if client == "refused-request":
        return Refused(int(cell.get("refused") or 1))
    if client == "sequence-at-stop":
        seq = cell.get("sequences") or {}
        timeout_s = float(cell.get("request_timeout", 5.0))
        return Sequences(int(seq.get("n", 4)), int(seq.get("first", 1001)), float(seq.get("idle_s", 1.5)), timeout_s)
    scenes: dict[str, type[Scene]] = {
        "stop-while-loading": LoadingAtStop,
        "load-missing": LoadMissing,
        "stub-killed": StubKilled,
    }
    return scenes.get(client, Scene)()

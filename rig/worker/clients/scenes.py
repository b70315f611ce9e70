"""The scenes that the 2026 lifecycle scenarios' clients set after the load (``rig.scenarios.catalog``):
``stub-killed`` (ready-stub-dead), ``load-missing`` (missing-model-py), ``reload-in-place``
(metrics-reload) and ``exit-after-stop`` (shm-after-forced-stop). Each is an observer of the
cycle's phases with the methods ``rig.worker.observers.CycleObserver`` names, written here
without importing that module (which registers these): neither imports the other back.

A client acts on a model whose ``fault`` parameter is not ``off``: the scenario's own models say
``on``, their negative control ``off``, so a scenario and its control run the same client, and
a user's models, which have no such parameter, get the fault. What each saw goes into the
cycle's row (``loading_at_stop``, ``ready_after_load``, ``server_ready_at_probe``,
``model_ready_at_probe``, ``requests``/``errors``, a note in ``detail``), never a file of its own.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys
import time
from pathlib import Path

from rig.common import probes
from rig.common.text import top_messages
from rig.contract.spec import repository_models
from rig.worker.engines.base import EngineError
from rig.worker.unpatched import original

PROBE_S = 2.0  # stub-killed: how long the server and the model are asked, once the stub is dead
PROBE_EVERY_S = 0.02
DEAD_WAIT_S = 5.0  # stub-killed: how long a killed stub may take to be gone
LOAD_WAIT_S = 20.0  # load-missing, reload-in-place: how long a load may run (2.71.0 failed one after 10 s)
UNLOAD_WAIT_S = 3.0  # load-missing: how long the unload of the model that failed to load may take
AFTER_RELOAD = 200  # reload-in-place: requests per model to the reloaded instances
_FAULT = re.compile(r'key:\s*"fault"\s*,?\s*value:\s*\{\s*string_value:\s*"(\w+)"')


def faulted(repository: str, model: str) -> bool:
    """Whether the client's fault applies to ``model``: its config's ``fault`` is not ``off``."""
    cfg = Path(repository) / model / "config.pbtxt"
    m = _FAULT.search(cfg.read_text()) if cfg.exists() else None
    return not (m and m.group(1) == "off")


class Scene:
    """Does nothing at any phase; a scene overrides what it needs (``observers.Observer``'s shape,
    with ``stopped``: once the stop is measured and kept, before the references are dropped)."""

    sets_scene = True
    explicit_model_control = False

    def load_started(self, ctx) -> None:
        pass

    def tick(self, ctx) -> None:
        pass

    def load_ended(self, ctx, row) -> None:
        pass

    def before_stop(self, ctx, row) -> None:
        pass

    def stopped(self, ctx, row) -> None:
        pass

    def settled(self) -> bool:
        return True

    def released(self, ctx, row) -> None:
        pass


def _in_thread(fn, wait_s: float) -> dict:
    """Run ``fn`` in a kernel thread (a load or unload that may never return must not block the
    cycle); ``{"done": seconds}`` once it returned, ``{"error": message}`` if it raised."""
    box: dict = {}
    t0 = time.monotonic()

    def run():
        try:
            fn()
        except EngineError as e:
            box["error"] = str(e)
        box["done"] = time.monotonic() - t0

    original("_thread", "start_new_thread")(run, ())
    deadline = t0 + wait_s
    while "done" not in box and time.monotonic() < deadline:
        time.sleep(0.01)
    return box


def _asked(fn) -> bool | None:
    try:
        return bool(fn())
    except EngineError:
        return None


class StubKilled(Scene):
    """``ready-stub-dead``: the faulted models' stubs killed (SIGKILL) once the load is over, then
    the server and each model asked for ``PROBE_S`` whether they are ready; the row gets their
    last answers (``server_ready_at_probe``, ``model_ready_at_probe``, both in
    ``ready_after_load``) and when each first said not ready. Its control asks the same of a live stub."""

    def before_stop(self, ctx, row) -> None:
        engine, models = ctx.engine, list(dict.fromkeys(ctx.spec.models))
        doomed = [m for m in models if faulted(ctx.spec.model_repository, m)]
        victims = [p for p in probes.stubs_of(os.getpid()) if probes.stub_identity(p)[0] in doomed]
        for p in victims:
            try:
                p.kill()
            except Exception:  # noqa: BLE001, S110
                pass
        deadline = time.monotonic() + DEAD_WAIT_S
        while time.monotonic() < deadline and any(
            p.pid in {s.pid for s in probes.stubs_of(os.getpid())} for p in victims
        ):
            time.sleep(0.01)
        t0, first = time.monotonic(), {}
        server = model = None
        while True:
            server = _asked(engine.is_ready)
            model = _asked(lambda: all(engine.model_ready(m) for m in models))
            for who, said in (("server", server), ("model", model)):
                if said is not True and who not in first:
                    first[who] = time.monotonic() - t0
            if time.monotonic() - t0 >= PROBE_S or len(first) == 2:
                break
            time.sleep(PROBE_EVERY_S)
        row["server_ready_at_probe"], row["model_ready_at_probe"] = server, model
        row["ready_after_load"] = None if server is None or model is None else server and model
        said = "; ".join(
            f"{who} not ready after {first[who]:.2f} s" if who in first else f"{who} still ready after {PROBE_S:.0f} s"
            for who in ("server", "model")
        )
        what = f"{len(victims)} stub(s) killed (SIGKILL) after the load" if victims else "stub left alive"
        row.merge({"detail": f"{what}: {said}"})


class LoadMissing(Scene):
    """``missing-model-py``: the models unloaded, the faulted ones' ``model.py`` taken away, the
    models loaded again (``LOAD_WAIT_S`` at most), the ones that did not load unloaded; the row
    gets the models still loading at the stop (``loading_at_stop``) and what the load and the
    unload said. Each ``model.py`` is renamed ``model.py.taken`` and comes back once the stop is
    over; one a killed or hung cycle left away comes back before the next cycle's server starts
    (``before_start``), which would otherwise find no ``model.py`` and hang in its start."""

    explicit_model_control = True
    TAKEN = ".taken"

    def __init__(self) -> None:
        self.taken: list[Path] = []

    @classmethod
    def before_start(cls, spec) -> None:
        repository = getattr(spec, "model_repository", None)
        for away in Path(repository).glob(f"*/*/model.py{cls.TAKEN}") if repository else ():
            away.replace(away.with_name("model.py"))

    def before_stop(self, ctx, row) -> None:
        engine, spec = ctx.engine, ctx.spec
        models = repository_models(Path(spec.model_repository))
        notes = []
        unloaded = ctx.unload_all(spec.startup_timeout)
        if unloaded:
            notes.append(f"before the load: {unloaded[:200]}")
        for m in models:
            if faulted(spec.model_repository, m):
                for f in (Path(spec.model_repository) / m).glob("*/model.py"):
                    f.replace(f.with_name("model.py" + self.TAKEN))
                    self.taken.append(f)
        for m in models:
            box = _in_thread(lambda m=m: engine.load_model(m), LOAD_WAIT_S)
            state = engine.model_states().get(m)
            how = "still loading" if "done" not in box else "failed" if "error" in box else "loaded"
            took = f"{box['done']:.1f} s" if "done" in box else f"{LOAD_WAIT_S:.0f} s"
            notes.append(
                f"load of {m}{' without model.py' if self.taken else ''}: {how} after {took}, "
                f"state {state}" + (f" ({' '.join(box['error'].split())[:200]})" if "error" in box else "")
            )
            if state != "READY":
                gone = _in_thread(lambda m=m: engine.unload_model(m), UNLOAD_WAIT_S)
                time.sleep(0.5)
                said = (
                    f"still blocked after {UNLOAD_WAIT_S:.0f} s"
                    if "done" not in gone
                    else f"error {gone['error'][:120]}"
                    if "error" in gone
                    else "returned"
                )
                notes.append(f"unload: {said}, state then {engine.model_states().get(m)}")
        row["loading_at_stop"] = sum(s == "LOADING" for s in engine.model_states().values())
        row.merge({"detail": "; ".join(notes)})

    def released(self, ctx, row) -> None:
        for f in self.taken:
            f.with_name("model.py" + self.TAKEN).replace(f)
        self.taken.clear()


class ReloadInPlace(Scene):
    """``metrics-reload``: every model's files touched and the model loaded again while it is
    loaded (Triton loads the new instances beside the old, then unloads the old), then, once the
    old instances' stubs are gone, ``AFTER_RELOAD`` requests per model to the new instances,
    counted with the cycle's own (a worker that dies of them is the parent's ``crashed``)."""

    explicit_model_control = True

    def before_stop(self, ctx, row) -> None:
        engine, spec = ctx.engine, ctx.spec
        notes, failed, sent, messages = [], 0, 0, {}
        now, before = time.time() + 1, {s.pid for s in probes.stubs_of(os.getpid())}
        for m in repository_models(Path(spec.model_repository)):
            for f in (Path(spec.model_repository) / m).rglob("*"):
                os.utime(f, (now, now))
            box = _in_thread(lambda m=m: engine.load_model(m), LOAD_WAIT_S)
            notes.append(
                f"{m} reloaded in place: "
                + (
                    f"failed: {box['error'][:200]}"
                    if "error" in box
                    else f"{box['done']:.1f} s"
                    if "done" in box
                    else f"still loading after {LOAD_WAIT_S:.0f} s"
                )
            )
        deadline = time.monotonic() + LOAD_WAIT_S  # the old instances unloaded (finalized), their stubs gone
        while before & {s.pid for s in probes.stubs_of(os.getpid())} and time.monotonic() < deadline:
            time.sleep(0.02)
        for m in dict.fromkeys(spec.models):
            entries = ctx.inputs[m]
            for i in range(AFTER_RELOAD):
                sent += 1
                try:
                    engine.infer(m, entries[i % len(entries)], timeout_s=spec.request_timeout).release()
                except EngineError as e:
                    failed += 1
                    messages[str(e)[:300]] = messages.get(str(e)[:300], 0) + 1
        notes.append(f"{sent} requests after the reload, {failed} failed")
        row["requests"] = (row.get("requests") or 0) + sent
        if failed:
            row["errors"] = (row.get("errors") or 0) + failed
            old = json.loads(row["error_messages"]) if row.get("error_messages") else {}
            row["error_messages"] = top_messages([old, messages])
        row.merge({"detail": "; ".join(notes)})


class ExitAfterStop(Scene):
    """``shm-after-forced-stop``: once the stop is measured and kept (the ``Partial`` sent), the
    worker exits at once, as a process does after a forced shutdown: C ``exit(0)``, which runs the
    libraries' exit handlers (python_backend#450 adds one that removes its regions) but neither
    the release nor ``ServerDelete``. The parent then counts the regions left
    (``shm_regions_leaked``) and the stubs it had to kill; the cycle's ``cleanup`` says the worker ended."""

    def stopped(self, ctx, row) -> None:
        print(
            f"exit-after-stop: the worker exits right after stop() ({row.get('outcome')}), "
            "as a process does after a forced shutdown",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        ctypes.CDLL(None).exit(0)


SCENES = {
    "stub-killed": StubKilled,
    "load-missing": LoadMissing,
    "reload-in-place": ReloadInPlace,
    "exit-after-stop": ExitAfterStop,
}

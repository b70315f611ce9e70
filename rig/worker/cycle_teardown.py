"""A cycle's models unloaded and its server released (``rig.worker.cycle``): every model unloaded
under explicit model control, polled until none is left; the server freed in a thread, so a
``ServerDelete`` that blocks costs its timeout, not the cycle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rig.contract.spec import CycleSpec
from rig.worker.engines.base import Engine, EngineError


def unload_all(engine: Engine, timeout_s: float, timed_out: str = "") -> str | None:
    """Explicit model control: unload every model, then poll quickly until none is left loaded.
    ``timed_out`` heads the message when they are still loaded after ``timeout_s``."""
    try:
        states = engine.model_states()
        for name, state in states.items():
            if state in ("READY", "LOADING"):
                engine.unload_model(name)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not any(s in ("READY", "LOADING", "UNLOADING") for s in engine.model_states().values()):
                return None
            time.sleep(0.002)
        return f"unload: {timed_out}models still loaded after {timeout_s} s: {engine.model_states()}"
    except EngineError as e:
        return f"unload: {e}"


def teardown(engine: Engine, phase: Callable[[str, float], None], spec: CycleSpec) -> str:
    """Free the server in a thread: a ``ServerDelete`` that blocks must not block the cycle."""
    phase("cleanup", spec.exit_timeout + 60)
    box: list[str] = []
    t = threading.Thread(target=_close_quietly, args=(engine, box), daemon=True)
    t.start()
    t.join(spec.exit_timeout + 30)
    if t.is_alive():
        return f"close still blocked after {spec.exit_timeout + 30} s"
    return box[0] if box else "ok"


def _close_quietly(engine: Engine, box: list) -> None:
    try:
        engine.close()
        box.append("ok")
    except EngineError as e:
        box.append(f"close failed: {e}")

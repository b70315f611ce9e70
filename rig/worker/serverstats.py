"""Triton's own statistics of the run's models, read as each measurement window closes: one
``Engine.model_statistics`` call per model and window, differenced from the read before it
(``rig.contract.server_stats``), so that each window holds what the server saw in it.

Each window also says why the statistics cannot cover a request's life, where they cannot
(``server_uncovered``): the models that are decoupled (asked of the engine once) and those whose
``execute`` returned None (the evidence hook's marker in the cycle's folder, looked for as each
window closes until every model has one).

A read that fails never fails the load: that window's columns are null, and the first such
failure is kept (``note``) for the cycle's detail. ``--server-stats off`` makes no reader at all."""

from __future__ import annotations

import os
from collections.abc import Sequence

from rig.contract import server_stats
from rig.contract.evidence import answering_after_return
from rig.worker.engines.base import Engine, EngineError


class ServerStats:
    """The statistics of ``models`` (read through ``engine``) window by window: ``begin`` before
    the first window opens, ``take`` as each one closes (its columns)."""

    def __init__(self, engine: Engine, models: list[str]):
        self.engine = engine
        self.models = list(dict.fromkeys(models))
        self.note: str | None = None  # the first read that failed, for the cycle's detail
        self.unsupported = False  # the engine cannot ask: nothing to read, nothing to note
        self._last: dict[str, dict] = {}
        self._decoupled: list[str] | None = None  # asked once, at the first window
        self._after_return: set[str] = set()
        self._evidence = os.environ.get("RIG_EVIDENCE_DIR")  # the cycle's folder (rig.worker.cycle)

    def _read(self) -> dict[str, dict] | None:
        """Every model's cumulative figures now; None where one could not be read."""
        out = {}
        for m in self.models:
            try:
                message = self.engine.model_statistics(m)
                if message is None:
                    self.unsupported = True
                    return None
                out[m] = server_stats.totals(message)
            except (EngineError, ValueError, KeyError, TypeError) as e:
                self.note = self.note or f"server statistics of {m} not read ({type(e).__name__}: {str(e)[:160]})"
                return None
        return out

    def begin(self) -> None:
        self._last = (None if self.unsupported else self._read()) or {}

    def take(self) -> dict:
        """The closing window's columns: the models' figures since the last read, together. Null
        where this read failed, or the one before it (no start to difference from)."""
        now = None if self.unsupported else self._read()
        if now is None:
            self._last = {}
            return server_stats.window_columns(None)
        total = None
        complete = all(m in self._last for m in self.models)
        for m, figures in now.items():
            total = server_stats.add(total, server_stats.difference(figures, self._last.get(m)))
        self._last = now
        out = server_stats.window_columns(total if complete else None)
        out[server_stats.UNCOVERED] = self._uncovered() if complete else None
        return out

    def _uncovered(self) -> str | None:
        if self._decoupled is None:
            decoupled = getattr(self.engine, "decoupled", lambda m: False)  # as rig.worker.outputs asks it
            self._decoupled = [m for m in self.models if decoupled(m)]
        if len(self._after_return) < len(self.models):
            self._after_return |= answering_after_return(self._evidence) & set(self.models)
        return server_stats.uncovered_reason(self._decoupled, self._after_return)


def reader(engine: Engine, models: list[str], on: bool = True) -> ServerStats | None:
    """The run's reader (None with ``--server-stats off``)."""
    return ServerStats(engine, models) if on else None


def over_cycle(engine: Engine, models: Sequence[str], on: bool = True) -> dict:
    """Triton's statistics of a cycle's models since they loaded (schema 15: the batch sizes it
    formed, its executions and failed requests), whether or not a window was measured; null with
    ``--server-stats off`` or where a read failed (the load is never failed for it)."""
    if not on:
        return server_stats.cycle_columns(None)
    total = None
    for m in dict.fromkeys(models):
        try:
            message = engine.model_statistics(m)
            if message is None:
                return server_stats.cycle_columns(None)
            total = server_stats.add(total, server_stats.totals(message))
        except (EngineError, ValueError, KeyError, TypeError):
            return server_stats.cycle_columns(None)
    return server_stats.cycle_columns(total)

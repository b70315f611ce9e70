"""The worker's messages to the orchestrator (``Kind``; ``CycleStart``, ``Phase``, ``Window``,
``Partial``, ``CycleDone``, ``Samples``, ``Fatal``, ``Refused``), and a matrix cell's to the matrix
(``CellDone``, or ``Fatal``: docs/dev/matrix-cells.md), one JSON line each: ``encode()``
writes one, ``decode(line)`` reads one back (None: not a message). The rows they carry are
``rig.contract.rows``'s (docs/dev/architecture.md, "The worker protocol")."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import typing

from rig.contract.rows import CycleDraft, coerce, field_hints


class Kind(str, enum.Enum):  # noqa: UP042
    """The ``type`` of a worker's message (docs/dev/architecture.md, "The worker protocol")."""

    CYCLE_START = "cycle_start"
    PHASE = "phase"
    WINDOW = "window"
    PARTIAL = "partial"
    CYCLE = "cycle"
    SAMPLES = "samples"
    FATAL = "fatal"
    REFUSED = "refused"
    CELL_DONE = "cell_done"


class _Message:
    KIND: typing.ClassVar[Kind]

    def encode(self) -> str:
        """This message as one JSON line (no newline): ``{"type": KIND, field: value, ...}``."""
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        body = {k: dict(v) if isinstance(v, collections.abc.Mapping) else v for k, v in body.items()}  # a CycleDraft
        return json.dumps({"type": self.KIND.value, **body}, default=str)


@dataclasses.dataclass(frozen=True)
class CycleStart(_Message):
    """A cycle begins (``t``: the worker's monotonic clock)."""

    KIND = Kind.CYCLE_START
    cycle: int
    t: float


@dataclasses.dataclass(frozen=True)
class Phase(_Message):
    """A phase begins (start, infer, stop, release, cleanup) and may take ``timeout_s``."""

    KIND = Kind.PHASE
    phase: str
    timeout_s: float
    t: float


@dataclasses.dataclass(frozen=True)
class Window(_Message):
    """A measurement window of the load closed: the figures of a ``windows`` row that the worker
    knows, with the workload's tags (``cycle``, ``mode``, ...)."""

    KIND = Kind.WINDOW
    figures: dict

    @property
    def cycle(self) -> int:
        return int(self.figures.get("cycle") or 0)


@dataclasses.dataclass(frozen=True)
class Partial(_Message):
    """The cycle's row once ``stop()`` returned (its draft so far), and the shared-memory regions
    its processes mapped: what stands if the worker then hangs or dies."""

    KIND = Kind.PARTIAL
    row: CycleDraft
    shm_regions: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class CycleDone(_Message):
    """The cycle is done: its row as the worker measured it (its draft, which the parent
    completes and freezes into the stored ``CycleRow``) and the version the core reported (None:
    the server never started)."""

    KIND = Kind.CYCLE
    row: CycleDraft
    triton_version: str | None = None


@dataclasses.dataclass(frozen=True)
class Samples(_Message):
    """Every process's memory over a cycle's load (``MemoryRow`` fields less the run's tags),
    sent before the cycle's ``CycleDone``."""

    KIND = Kind.SAMPLES
    cycle: int
    rows: tuple[dict, ...] = ()


@dataclasses.dataclass(frozen=True)
class Fatal(_Message):
    """An exception escaped the worker's loop (``error``: ``Type: message``); it exits 3."""

    KIND = Kind.FATAL
    error: str
    traceback: str = ""


@dataclasses.dataclass(frozen=True)
class Refused(_Message):
    """The run's inputs do not fit a model (one line); the worker exits 2, the run is refused."""

    KIND = Kind.REFUSED
    error: str


@dataclasses.dataclass(frozen=True)
class CellDone(_Message):
    """A matrix cell (`rig cell`, ``rig.contract.cell.CellSpec``) is done: ``exit``, its exit
    status (``rig.common.errors.Exit``); ``run_id``, the run it stored (None: none was started);
    ``reasons``, why it failed its thresholds; ``error``, the one line of a usage or machine
    error, or why it was skipped."""

    KIND = Kind.CELL_DONE
    exit: int
    run_id: str | None = None
    reasons: tuple[str, ...] = ()
    error: str = ""


Message = typing.Union[CycleStart, Phase, Window, Partial, CycleDone, Samples, Fatal, Refused, CellDone]  # noqa: UP007
_BY_KIND: dict[str, type] = {
    c.KIND.value: c for c in (CycleStart, Phase, Window, Partial, CycleDone, Samples, Fatal, Refused, CellDone)
}


def decode(line: str | bytes) -> Message | None:
    """The message on one line, typed; None for a line that is not one (not JSON, not an object,
    an unknown ``type``, a field missing or of the wrong type). Rows keep only ``CycleRow``'s
    fields, typed as the row's."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    cls = _BY_KIND.get(obj.get("type")) if isinstance(obj, dict) else None
    if cls is None:
        return None
    hints = field_hints(cls)
    try:
        msg = cls(**{f.name: coerce(obj[f.name], hints[f.name]) for f in dataclasses.fields(cls) if f.name in obj})
        if isinstance(msg, (Partial, CycleDone)):
            msg = dataclasses.replace(msg, row=CycleDraft.received(msg.row))
            if msg.row.get("cycle") is None:
                return None  # a row of no cycle
    except (TypeError, ValueError):
        return None
    return msg

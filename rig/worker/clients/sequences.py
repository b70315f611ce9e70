"""The scene of the ``sequence-at-stop`` scenario (server#8449, server#7117 / core#341): sequences
open on a stateful model (the sequence batcher) when ``stop()`` (or, with ``--restart reload``,
the unload) comes.

On every stateful model (``Engine.stateful``) whose ``fault`` is not ``off``
(``rig.worker.clients.scenes.faulted``), ``SEQUENCES`` sequences are opened: half of them first, each a
START request and one more, then left idle past the batcher's idle timeout (``IDLE_WAIT_S``) and
each asked to go on (a request without START, which the batcher refuses once its reaper ended
the sequence), then the other half, just before the stop. None is ended. The control (``fault``
``off``) opens the same sequences and ends each (END) as soon as it is open.

The row gets ``sequences_open`` (sequences the client left open at the stop),
``sequences_reaped`` (of those left idle, the ones the batcher had ended by itself) and, once the
references are dropped, ``sequence_states_left``: the states the model still held when its
``finalize`` ran, as it wrote them (``sequences-PID.count`` in the cycle's evidence folder). The
reaper and the unload never tell a Python model that a sequence ended: what they leave is
counted there.
"""

from __future__ import annotations

import glob
import os
import time

from rig.worker.clients.scenes import Scene, faulted
from rig.worker.engines.base import Engine, EngineError, Sequence

SEQUENCES = 4  # sequences opened before the stop, per stateful model
FIRST_SEQUENCE = 1001  # their correlation ids (a load's one-request sequences are far above: ONE_SHOT_IDS)
IDLE_WAIT_S = 1.5  # the first half's idle time: past the scenario model's idle timeout (1 s)


def open_sequences(
    engine: Engine,
    model: str,
    inputs: list[dict],
    end: bool,
    timeout_s: float,
    n: int = SEQUENCES,
    idle_s: float = IDLE_WAIT_S,
    first: int = FIRST_SEQUENCE,
) -> dict:
    """Open ``n`` sequences on ``model`` (see the module's docstring); with ``end`` each is ended
    as soon as it is open. The row's figures, and the first failure in ``detail``."""
    out = {"sequences_open": 0, "sequences_reaped": 0}
    errors: list[str] = []

    def send(cid: int, start: bool = False, last: bool = False) -> bool:
        try:
            engine.infer(
                model, inputs[cid % len(inputs)], timeout_s=timeout_s, sequence=Sequence(cid, start=start, end=last)
            ).release()
            return True
        except EngineError as e:
            errors.append(str(e))
            return False

    halves = [list(range(first, first + n // 2)), list(range(first + n // 2, first + n))]
    for k, opened in enumerate(halves):
        for cid in opened:
            if send(cid, start=True) and send(cid, last=end) and not end:
                out["sequences_open"] += 1
        if k == 0:
            time.sleep(idle_s)
            if not end:  # a request without START: refused once the reaper ended the sequence
                tried = len(errors)
                out["sequences_reaped"] = sum(not send(cid) for cid in opened)
                del errors[tried:]  # those refusals are the figure, not failures
    if errors:
        out["detail"] = f"sequence-at-stop: {len(errors)} request(s) failed: {errors[0][:300]}"
    return out


def states_left(evidence: str | None) -> int | None:
    """The sequence states the stateful models still held at their finalize (each writes
    ``sequences-PID.count``); None where no finalize wrote one."""
    counts = []
    for f in glob.glob(os.path.join(evidence, "sequences-*.count")) if evidence else []:
        try:
            with open(f) as fh:
                counts.append(int(fh.read().strip()))
        except (OSError, ValueError):
            pass
    return sum(counts) if counts else None


class SequencesAtStop(Scene):
    """``sequence-at-stop``: sequences open (or, for the control, ended) when the stop comes."""

    def before_stop(self, ctx, row) -> None:
        spec = ctx.spec
        figures = {"sequences_open": 0, "sequences_reaped": 0}
        for model in spec.models:
            if not ctx.engine.stateful(model):
                continue
            got = open_sequences(
                ctx.engine,
                model,
                ctx.inputs[model],
                end=not faulted(spec.model_repository, model),
                timeout_s=spec.request_timeout,
            )
            for key in figures:
                figures[key] += got[key]
            if got.get("detail"):
                row.note(got["detail"])
        row.update(figures)

    def released(self, ctx, row) -> None:
        row["sequence_states_left"] = states_left(os.environ.get("RIG_EVIDENCE_DIR"))


SCENES = {"sequence-at-stop": SequencesAtStop}

"""A cycle's row as the parent completes it: the run's tags, what only the parent sees (the wall
time, the rig's overhead, a hang or a crash and what it left), typed as ``CycleRow``; and
``record``, which hands a cycle's result to the store."""

from __future__ import annotations

import dataclasses

from rig.common import probes
from rig.contract.fleet import node_name
from rig.contract.messages import Partial
from rig.contract.rows import (
    CycleDraft,
    CycleResult,
    CycleRow,
    now_iso,
)
from rig.parent.orchestrator.prepare import Prepared
from rig.runtimes.from_source.identity import release_of
from rig.scenarios.catalog import name_of


def blank_row(p: Prepared, cycle: int) -> CycleDraft:
    """A row of ``cycle`` with the run's tags and nothing measured."""
    return CycleDraft.blank(**run_tags(p), cycle=cycle, started_at=now_iso())


def run_tags(p: Prepared) -> dict:
    """The values every row of the run carries alike, worked out once a run (the model's shape
    reads its config.pbtxt)."""
    if p.tags is None:
        c = p.config
        p.tags = dict(
            run_id=p.run_id,
            engine=p.engine,
            model=p.model_label,
            retain=c.retain,
            restart=c.restart,
            stop_strategy=c.stop_strategy,
            host=node_name(c.node),
            scenario=c.scenario or name_of(c.fault, c.retain, c.restart, c.client),
            control=c.control if c.scenario else None,
            shape=model_shape(p),
            **bindings_tags(p),
        )
    return p.tags


def bindings_tags(p: Prepared) -> dict:
    """The official engine's bindings, on every cycle of its runs (none with the C API)."""
    if p.engine != "tritonserver":
        return {}
    from rig.parent.runtime import official_bindings

    version, own = official_bindings(p.runtime)
    return {"tritonserver_version": version, "bindings_own": own}


def model_shape(p: Prepared) -> str | None:
    """The model shape a cycle serves: the scenario's or the template's, else read from the first
    model's config.pbtxt (None where it does not read)."""
    from rig.parent.repository import parse_pbtxt
    from rig.scenarios import shapes

    cfg = p.config
    if cfg.model_shape:
        return cfg.model_shape
    if not cfg.model_repository:
        return shapes.Shape(
            cfg.max_batch_size, cfg.dynamic_batching, cfg.instances, cfg.decoupled, cfg.queue_delay_us
        ).name
    try:
        return shapes.of_config(parse_pbtxt((p.repository / p.models[0] / "config.pbtxt").read_text()))
    except (OSError, ValueError, IndexError, TypeError):
        return None


def finish_row(p: Prepared, row: CycleDraft, wall: float | None, reported: str | None = None) -> CycleRow:
    """The ``CycleRow`` of a cycle the parent saw take ``wall`` seconds, frozen from its draft;
    ``reported``: the Triton version the core itself reported, where it differs from the one
    results are filed under."""
    if reported and reported != release_of(p.runtime.triton_version):  # a variant's core says its release
        row.note(f"the core reports Triton {reported}; results are filed under {p.runtime.triton_version}")
    row["cycle_wall_s"], row["host"] = wall, run_tags(p)["host"]
    if wall is not None:
        row["overhead_s"] = (
            wall - (row.get("start_latency_s") or 0) - (row.get("stop_latency_s") or 0) - (row.get("workload_s") or 0)
        )
    for k in ("stop_error", "detail"):
        if row.get(k) is not None:
            row[k] = str(row[k])[:2000]
    row.pop("schema_version", None)  # the row's own, as CycleRow declares it
    return row.row()


@dataclasses.dataclass(frozen=True)
class Loss:
    """How a cycle's worker was lost: the ``outcome`` it gives the cycle (hung, crashed), the
    ``cleanup`` it gives a stop already measured, ``what`` happened in words; the stubs and shared
    memory the rig then had to clean up after it, and its pid."""

    outcome: str
    cleanup: str
    what: str
    stubs: int
    leaked: int
    pid: int


def lost_cycle(p: Prepared, cycle: int, partial: Partial | None, loss: Loss) -> CycleDraft:
    """The row of a cycle whose worker hung or died. If stop had already been measured (the
    worker sent a ``Partial``), the stop's outcome stands and the failure goes to ``cleanup``."""
    outcome, cleanup, what, stubs, leaked = loss.outcome, loss.cleanup, loss.what, loss.stubs, loss.leaked
    row = blank_row(p, cycle)
    if partial:
        row.update({k: v for k, v in partial.row.items() if k in row})
        row.update(cleanup=cleanup, detail=what)
        # Its shared-memory regions, which the parent no longer sees mapped by a live process
        left = probes.shm_regions_present(set(partial.shm_regions))
        probes.remove_shm_regions(left)
        leaked += len(left)
        # The worker died before its teardown: the stubs alive after stop were never released
        # by it. Some exit on their own once their parent is gone, before the parent can kill
        # them; a leak that a crash hides is still a leak, so count them either way.
        stubs = max(stubs, int(partial.row.get("stubs_alive_after_stop") or 0))
    else:
        row.update(outcome=outcome, load_outcome="not_measured", growth_outcome="not_measured", detail=what)
    row.update(
        stubs_killed=(row.get("stubs_killed") or 0) + stubs,
        shm_regions_leaked=(row.get("shm_regions_leaked") or 0) + leaked,
        worker_pid=loss.pid,
    )
    return row


def record(p: Prepared, result: CycleResult) -> None:
    """Store one cycle, for soak, cycle and bench alike: its windows first, then its row, so a
    row in ``cycles`` means its windows are stored."""
    row = result.row
    if result.windows:
        p.store.write("windows", list(result.windows), p.runtime.triton_version, f"c{row.cycle:06d}")
    if result.memory:
        p.store.write("memory", list(result.memory), p.runtime.triton_version, f"c{row.cycle:06d}")
    p.store.write("cycles", [row], p.runtime.triton_version, f"c{row.cycle:06d}")

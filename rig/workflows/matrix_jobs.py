"""The jobs of a ``rig matrix`` (``rig.workflows.matrix_setup``): a scenario cell's, a plain soak's per
runtime x engine x retention, and a short bench's per runtime and engine, each a ``Job`` whose
config derives from the matrix's base (``rig.workflows.matrix_plan.cell_config``)."""

from __future__ import annotations

import dataclasses
import functools

from rig.common.errors import RigError
from rig.contract.cell import BenchSettings, CellSpec
from rig.parent.options import OVERRIDES
from rig.workflows.matrix_plan import cell_config, plain_changes, scenario_changes, take_shard
from rig.workflows.matrix_run import Job

# Options a bench cell takes from the matrix's (the server and the model; no lifecycle, no load).
_BENCH_DESTS = (
    "model",
    "model_repository",
    "model_size",
    "instances",
    "max_batch_size",
    "dynamic_batching",
    "queue_delay_us",
    "input_memory",
    "execute_delay_ms",
    "exit_timeout",
    "startup_timeout",
    "request_timeout",
    "in_flight",
)
# A bench cell's own settings (`rig bench`'s options): 3 windows of 1 s a point, one repeat.
BENCH_SETTINGS = BenchSettings(windows=3, window_seconds=1.0, repeats=1)  # a short sweep per runtime and engine


def scenario_job(cell: dict, base, load: dict, cpus: str | None = None) -> Job:
    """A scenario cell's job: its config derived from the matrix's ``base`` (``scenario_changes``);
    ``cpus``: the matrix's --cpus, held by the cell too."""
    name = cell["scenario"] + (" (control)" if cell["control"] else "")
    label = (
        f"{name} [{cell['shape']}], runtime {cell['runtime']} (Triton {cell['triton_version']}), "
        f"engine {cell['engine']}"
    )
    want = (
        " / ".join((*cell["expected"], cell.get("growth") or "ok"))
        if cell["expected"]
        else "nothing known here: recorded, not judged"
    )
    start = f"{label}: soak, {base.cycles} cycle(s), expected {want}{_under(load)} ({cell['why']})"
    row = {k: v for k, v in cell.items() if k != "why"}
    row["retain"] = "-"
    changes = scenario_changes(cell, base.cycles, str(base.results), load)
    try:
        cfg, text = cell_config(base, changes)
    except RigError as e:
        raise RigError(f"--scenarios {name} [{cell['shape']}] over {cell['runtime']}, {cell['engine']}: {e}") from None
    spec = CellSpec(
        "soak",
        text,
        "",
        label=label,
        allowed=tuple(cfg.thresholds.allow_outcomes.split(",")),
        results=str(cfg.results),
        cpus=cpus,
    )
    job = Job(label, spec, row, start_line=start)
    # the same cell for more cycles (its race: rig.workflows.matrix_races), its config derived as this one's
    job.again = functools.partial(_again, cell, base, load, cpus)
    return job


def _again(cell: dict, base, load: dict, cpus: str | None, cycles: int) -> Job:
    """``cell``'s job again, for ``cycles`` cycles: the same configuration otherwise (a new run of
    the same cell, which the conformance analysis pools with its first)."""
    return scenario_job(cell, dataclasses.replace(base, cycles=cycles), load, cpus)


def _under(load: dict) -> str:
    """`` under the steady workload, 2 user(s), 2 s a cycle`` (a scenario's load), or nothing."""
    if not load:
        return ""
    return (
        f" under the {load['workload.name']} workload, {load['workload.users']} user(s), "
        f"{load['workload.seconds']:g} s a cycle"
    )


def plain_jobs(base, plan: list[dict], retains: list[str], shard, cpus: str | None = None) -> list[Job]:
    """A soak per runtime x engine x retention policy, each its config derived from ``base``."""
    from rig.analysis import matrix
    from rig.workflows import soak

    base_allowed = soak.allowed_outcomes(base, soak.DEFAULT_ALLOWED)
    plain = [
        {"runtime": p["spec"], "triton_version": p["triton"], "engine": engine, "why": why, "retain": retain}
        for p in plan
        for engine, why in p["engines"]
        for retain in retains
    ]
    jobs = []
    for cell in take_shard(plain, shard):
        allowed = matrix.allowed_for(cell["retain"], base_allowed)
        label = (
            f"runtime {cell['runtime']} (Triton {cell['triton_version']}), engine {cell['engine']}, "
            f"retain {cell['retain']}"
        )
        cfg, text = cell_config(base, plain_changes(cell, base.cycles, str(base.results), allowed))
        spec = CellSpec("soak", text, "", label=label, allowed=allowed, results=str(cfg.results), cpus=cpus)
        jobs.append(
            Job(
                label,
                spec,
                {k: v for k, v in cell.items() if k != "why"},
                start_line=f"{label}: soak, {base.cycles} cycle(s) ({cell['why']})",
            )
        )
    return jobs


def bench_jobs(args, plan: list[dict], results: str, shard) -> list[Job]:
    """A short bench per runtime and engine: the matrix's server and model options only
    (``_BENCH_DESTS``), at --bench-concurrency (``BENCH_SETTINGS``)."""
    from rig.parent.config import RunConfig

    given = {key: getattr(args, dest, None) for key, dest in OVERRIDES.items() if dest in _BENCH_DESTS}
    settings = dataclasses.replace(BENCH_SETTINGS, concurrency=args.bench_concurrency)
    jobs = []
    cells = take_shard(
        [
            {"runtime": p["spec"], "triton_version": p["triton"], "engine": engine, "retain": "bench"}
            for p in plan
            for engine, _ in p["engines"]
        ],
        shard,
    )
    for c in cells:
        label = f"runtime {c['runtime']} (Triton {c['triton_version']}), engine {c['engine']}"
        cfg, text = cell_config(
            RunConfig(),
            {
                **given,
                "runtime": c["runtime"],
                "engine": c["engine"],
                "results": results,
                "workload.window_seconds": settings.window_seconds,
            },
        )
        spec = CellSpec("bench", text, "", label=label, bench=settings, results=str(cfg.results))
        jobs.append(
            Job(
                label,
                spec,
                {**c, "retain": "-"},
                table="windows",
                start_line=f"{label}: bench at concurrency {args.bench_concurrency}",
            )
        )
    return jobs

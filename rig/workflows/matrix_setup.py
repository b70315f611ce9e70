"""What `rig matrix` does before its first cell runs: its own options checked (the scenarios and what
cannot combine with them, the shard, the shapes, --jobs, --known-file, the folders of --junit and
--summary-json), the base configuration every cell derives from (checked once as `rig soak` checks
it, with a scenario matrix's timeouts and loads), the runtimes it lacks installed, and its jobs
(``prepare``: a ``Prepared`` matrix, which ``rig.workflows.matrix_table.run_and_table`` runs).
Bad input is one ``RigError`` line, before anything runs."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from rig.common.errors import RigError
from rig.parent.options import OVERRIDES, option, run_config
from rig.workflows import matrix_jobs
from rig.workflows.matrix_plan import (
    SCENARIO_EXIT_TIMEOUT,
    SCENARIO_REQUEST_TIMEOUT,
    cell_config,
    local_runtimes,
    make_plan,
    parse_engines,
    parse_retain,
    parse_runtimes,
    parse_scenarios,
    parse_shapes,
    parse_shard,
    scenario_cells,
    soak_options,
    take_shard,
)
from rig.workflows.matrix_run import Job

# The load a scenario that needs one (``Scenario.workload``) runs under when the matrix is given no
# --workload: the load its verdicts were measured under (docs/guide/scenarios.md), as config keys.
SCENARIO_LOAD_KEYS = {"workload.name": "steady", "workload.seconds": 2.0, "workload.users": 2}
# The same load as `rig soak` options (a scenario's class run by hand: tests/e2e/test_variants.py).
SCENARIO_LOAD = tuple(
    w
    for k, v in SCENARIO_LOAD_KEYS.items()
    for w in (option(OVERRIDES[k]), f"{v:g}" if isinstance(v, float) else str(v))
)


@dataclasses.dataclass
class Prepared:
    """A matrix ready to run: its cells' jobs, its benches' (run after them, alone), the rows of
    the cells that cannot run here, each cell's time limit, the results folder, the scenarios (None:
    the retention axis), the shard (None: every cell) and the cycles a cell runs (a race's more
    cycles are given time in proportion: ``rig.workflows.matrix_races``)."""

    jobs: list[Job]
    bench_jobs: list[Job]
    rows: list[dict]
    timeout: float
    results: str
    scens: list | None
    shard: tuple[int, int] | None
    cycles: int = 1


def prepare(args, default_cycles: int) -> Prepared | None:
    """The matrix's options checked, the runtimes it lacks installed, its jobs made; None where the
    run is skipped on this machine (the cupy model without a GPU)."""
    from rig.parent import runtime

    scens, shard, only_shapes = check_axes(args)
    retains = parse_retain(args.retain)
    engines = parse_engines(args.engines)
    installed, container = local_runtimes()  # an NGC image: `all` includes its own core
    specs = parse_runtimes(args.runtimes, installed, runtime.PYTRITON_CORE, container=container)
    # The base of every cell's config: the matrix's own options, checked once as `rig soak` checks
    # them (bad input: one line, nothing run); each cell's derives from it (matrix_plan.cell_config).
    cfg = run_config(soak_options(args, specs[0], retains[0] if scens is None else None, default_cycles))
    if cfg is None:  # the run is skipped on this machine (the cupy model without a GPU)
        return None
    if scens is not None:
        cfg = dataclasses.replace(cfg, **scenario_timeouts(args, cfg))
    loads = check_scenarios(args, cfg, scens) if scens is not None else {}
    if cfg.cycles < 1:
        raise RigError("--cycles must be >= 1")
    timeout = (
        args.cell_timeout
        or cfg.cycles * (cfg.startup_timeout + cfg.exit_timeout + cfg.request_timeout + cfg.workload.seconds + 30) + 120
    )
    if scens is None and any(r != "none" for r in retains):
        print(
            f"retain {', '.join(r for r in retains if r != 'none')}: exit_timeout is allowed (a reference kept "
            "across stop() holds its model: the expected outcome); the table shows every outcome",
            flush=True,
        )
    install_missing(specs, installed, shard)
    plan = make_plan(specs, engines, retains if scens is None else ["none"])
    rows = skipped_rows(plan, scens)
    if scens is not None:
        cells = take_shard(scenario_cells(scens, plan, only_shapes=only_shapes), shard)
        rows += [c for c in cells if c.get("status") == "skipped"]
        jobs = [
            matrix_jobs.scenario_job(cell, cfg, loads.get(cell["scenario"], {}), args.cpus)
            for cell in cells
            if cell.get("status") != "skipped"
        ]
    else:
        jobs = matrix_jobs.plain_jobs(cfg, plan, retains, shard, args.cpus)
    bench_jobs = matrix_jobs.bench_jobs(args, plan, str(cfg.results), shard) if args.bench else []
    return Prepared(jobs, bench_jobs, rows, timeout, str(cfg.results), scens, shard, cfg.cycles)


def refuse_with_scenarios(args) -> None:
    """What cannot combine with --scenarios, in one line: each scenario sets its own fault,
    retention and models, and the verdicts its cells pass with."""
    given = [f"--retain {args.retain}"] if args.retain != "none" else []
    given += [
        o
        for o, d in (
            ("--fault", "fault"),
            ("--model-repository", "model_repository"),
            ("--allow-outcomes", "allow_outcomes"),
        )
        if getattr(args, d, None) is not None
    ]
    if given:
        raise RigError(
            f"{', '.join(given)} cannot combine with --scenarios: each scenario sets its own fault, "
            "retention and models, and its cells pass with the verdicts known for it; drop them"
        )


def check_axes(args) -> tuple:
    """The matrix's own options checked: the scenarios (what cannot combine with them), the
    shard, the shapes, --race-cycles, --jobs, --known-file (its cells read it too) and --junit's folder."""
    scens = None
    if args.scenarios is not None:
        refuse_with_scenarios(args)
        scens = parse_scenarios(args.scenarios)
    shard = parse_shard(args.shard)
    only_shapes = parse_shapes(args.shapes)
    args.race_cycles = parse_race_cycles(getattr(args, "race_cycles", None), scens is not None)
    args.jobs = parse_jobs(args.jobs, scens is not None)
    if args.known_file:
        if not Path(args.known_file).is_file():
            raise RigError(
                f"--known-file {args.known_file} does not exist: give a file `rig scenarios --accept` "
                "wrote, or drop it for the rig's own"
            )
        os.environ["RIG_KNOWN_VERDICTS"] = str(Path(args.known_file).resolve())  # the cells read it too
    if args.junit:
        from rig.parent import junit

        junit.check_path(args.junit)
    from rig.workflows import summary

    summary.check_path(getattr(args, "summary_json", None))
    return scens, shard, only_shapes


def parse_race_cycles(value, scenarios: bool) -> int:
    """``--race-cycles``: the most cycles a scenario cell whose cycles raced runs more
    (``rig.workflows.matrix_races``; 0: none); given without --scenarios, refused (only a scenario's
    cell is judged by its verdicts' rates); not given: ``RACE_CYCLES`` with --scenarios, else 0."""
    from rig.workflows.matrix_races import RACE_CYCLES

    if value is None:
        return RACE_CYCLES if scenarios else 0
    if not scenarios:
        raise RigError(
            "--race-cycles applies to --scenarios cells only (more cycles for a cell whose lifecycle verdicts "
            "disagree): add --scenarios, or drop it"
        )
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if n < 0:
        raise RigError(f"--race-cycles {value}: give a count of 0 or more (the most cycles added to one cell; 0: none)")
    return n


def parse_jobs(text: str, scenarios: bool) -> int:
    """``--jobs``: a count, or ``auto`` (scenario cells: three times the CPUs this process may run on, at
    most 8: most of a lifecycle cell waits; other cells, which measure speed: 1)."""
    if str(text) == "auto":
        return min(8, 3 * len(os.sched_getaffinity(0))) if scenarios else 1
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise RigError(f"--jobs {text}: give a count of 1 or more (cells side by side), or auto")
    return n


def scenario_timeouts(args, cfg) -> dict:
    """The timeouts a scenario's verdicts need, where neither the command line nor the config
    sets them, as config keys: ``SCENARIO_EXIT_TIMEOUT`` (a clean stop takes 2-4 s: the core polls
    its models once a second, two instances one tick more; a held model waits it out) and
    ``SCENARIO_REQUEST_TIMEOUT`` (a request its stub will never answer is unanswered after 5 s as
    after 30)."""
    from rig.parent.config import RunConfig

    keys: dict = {}
    if args.exit_timeout is None and cfg.exit_timeout == RunConfig.exit_timeout:
        keys["exit_timeout"] = SCENARIO_EXIT_TIMEOUT
    if args.request_timeout is None and cfg.request_timeout == RunConfig.request_timeout:
        keys["request_timeout"] = SCENARIO_REQUEST_TIMEOUT
    return keys


def install_missing(specs: list[str], installed: list[str], shard) -> None:
    """Fetch what is missing first, once (a version that cannot be fetched stops here; one unpacked
    yet unusable here, with no stub for this Python, is a row that says why)."""
    from rig.parent import runtime

    for v in specs:
        if v != "container" and not v.startswith("built-") and v not in installed:
            print(
                f"runtime {v} is not installed: installing it (nvidia-pytriton {v}, Triton "
                f"{runtime.PYTRITON_CORE.get(v, '?')})",
                flush=True,
            )
            try:
                runtime.install_embedded(v, log=lambda m: print(f"  {m}", flush=True))
            except RigError as e:
                if v not in [r["package_version"] for r in runtime.list_embedded()]:
                    if shard is None:
                        raise
                    print(f"  runtime {v}: {e}", flush=True)  # a shard goes on: its row says why


def skipped_rows(plan: list[dict], scens) -> list[dict]:
    rows = []
    for p in plan:
        for skipped in p["skipped"]:
            if scens is not None:
                skipped.update(scenario=scens[0].name if len(scens) == 1 else "every scenario", retain="-")
            rows.append(skipped)
            print(f"runtime {skipped['runtime']}, engine {skipped['engine']}: skipped: {skipped['reason']}", flush=True)
    return rows


def check_scenarios(args, cfg, scens: list) -> dict[str, dict]:
    """Each scenario's cells checked as `rig soak` checks them, before anything runs (bad input:
    one line naming the scenario); the load each runs under where it needs one and none is given
    (``SCENARIO_LOAD_KEYS``)."""

    clash = [
        k
        for k, v in (
            ("scenario", cfg.scenario),
            ("retain", cfg.retain != "none" and cfg.retain),
            ("fault", cfg.fault != "none" and cfg.fault),
            ("model_repository", cfg.model_repository),
            ("allow_outcomes", cfg.thresholds.allow_outcomes),
        )
        if v
    ]
    if clash:
        raise RigError(
            f"{args.config}: {', '.join(clash)} cannot combine with --scenarios (each scenario sets its "
            "own, and the verdicts its cells pass with): drop them from the file"
        )
    loads = {}
    for s in scens:
        load = dict(SCENARIO_LOAD_KEYS) if s.workload and cfg.workload.name == "none" and args.requests is None else {}
        if load and s.users is not None:
            load["workload.users"] = s.users
        for control in (False, True) if s.has_control else (False,):
            try:
                cell_config(cfg, {**load, "scenario": s.name, "control": control})
            except RigError as e:
                raise RigError(f"--scenarios {s.name}{' (its control)' if control else ''}: {e}") from None
        if load:
            loads[s.name] = load
    return loads

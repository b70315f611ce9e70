"""`rig matrix --runtimes 0.5.0,0.5.10,0.7.0 [--engines capi,tritonserver] [--retain all]`: the
same soak (and a short bench with --bench) against each Triton runtime and each engine that runs
over it, into one results store, with a summary table and an exit status.

`rig matrix --scenarios LIST|all`: the lifecycle scenarios (``rig.scenarios.catalog``) as the axis instead
of retention: each scenario a cell per runtime x engine, its negative control a cell of its own,
each a soak of `--scenario NAME [--control]`. A cell passes when every cycle gives the verdicts the
scenario is known to give on that core and engine (its control: its control's), and the growth
verdict it gives (``Scenario.growth``; a control's is ok; ``rig.analysis.matrix.judge_scenario``);
where nothing is known there, it is recorded and said so (``unjudged``), not failed.

Each cell is its own process (`python -m rig cell`: rig.commands.cell), given its typed
configuration (``rig.contract.cell.CellSpec``) and answering with a typed record over a pipe
(``CellDone``; docs/dev/matrix-cells.md), so a core that crashes or hangs takes only its cell
down: that cell is a row with the reason. A runtime or engine that cannot run here (no backend
stub for this Python, bindings that do not fit the core) is a row that says why.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from rig.common.errors import Exit, RigError
from rig.contract.option_table import GROUPS
from rig.parent.options import OVERRIDES, add_run_options, option, run_config
from rig.workflows import matrix_jobs
from rig.workflows.matrix_plan import (
    SCENARIO_EXIT_TIMEOUT,
    SCENARIO_REQUEST_TIMEOUT,
    _plan,
    cell_config,
    local_runtimes,
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
from rig.workflows.matrix_run import Job, run_jobs

DEFAULT_CYCLES = 3
# The load a scenario that needs one (``Scenario.workload``) runs under when the matrix is given no
# --workload: the load its verdicts were measured under (docs/guide/scenarios.md), as config keys.
SCENARIO_LOAD_KEYS = {"workload.name": "steady", "workload.seconds": 2.0, "workload.users": 2}
# The same load as `rig soak` options (a scenario's class run by hand: tests/e2e/test_variants.py).
SCENARIO_LOAD = tuple(
    w
    for k, v in SCENARIO_LOAD_KEYS.items()
    for w in (option(OVERRIDES[k]), f"{v:g}" if isinstance(v, float) else str(v))
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "matrix",
        help="the same soak (and bench) across Triton runtimes and engines, one store",
        description="Run the same soak against each runtime x engine x retention policy, each "
        "cell in its own process, into one results folder; a summary table (Markdown) and an exit "
        f"status: {Exit.OK:d} every cell that can run here passed, {Exit.FAILED:d} a cell failed its "
        f"thresholds, refused its input, crashed or timed out, {Exit.USAGE:d} bad input, "
        f"{Exit.SKIPPED:d} every cell was skipped, {Exit.MACHINE:d} the machine failed a cell. With "
        "--retain last-response/last-array, exit_timeout is allowed (the expected outcome of a reference kept "
        "across stop()); the table "
        "shows every outcome. With --scenarios, each scenario and its negative control are cells of "
        "their own, passing when their verdicts are the ones known for that core and engine.",
    )
    _matrix_options(p.add_argument_group("the matrix"))
    p.set_defaults(func=run, soak_actions=_soak_options(p))


def _matrix_options(m) -> None:
    """The matrix's own options: which cells, how many at once, what is written beside the store."""
    m.add_argument(
        "--runtimes",
        required=True,
        metavar="LIST",
        help="embedded versions (0.5.0,0.5.10,0.7.0; one not installed is installed first), "
        "container, installed, or all (one embedded runtime per core, installed first where missing, "
        "the cores built here, and in an NGC image its own core: `container`)",
    )
    m.add_argument(
        "--engines",
        default="auto",
        metavar="LIST",
        help="auto (per runtime, as rig soak picks), capi, tritonserver; an engine that cannot run "
        "over a runtime is a row 'skipped: why' (default auto)",
    )
    m.add_argument(
        "--retain",
        default="none",
        metavar="LIST",
        help="retention policies: none, last-response, last-array, or all (default none)",
    )
    m.add_argument(
        "--scenarios",
        metavar="LIST",
        help="lifecycle scenarios (`rig scenarios` lists them), or all: each a cell per runtime and "
        "engine, its negative control another; passes when the verdicts are those known for that core "
        "and engine (not with --retain, --fault, --model-repository or --allow-outcomes)",
    )
    m.add_argument("--bench", action="store_true", help="also run a short bench per runtime and engine")
    m.add_argument(
        "--bench-concurrency",
        default="1,4",
        metavar="LIST",
        help="the bench's points (default 1,4; 3 windows of 1 s each, one repeat)",
    )
    m.add_argument(
        "--shapes",
        default="all",
        metavar="LIST",
        help="with --scenarios: the model shapes to run each scenario in, of those it runs in (`rig "
        "scenarios` says which): all, first (each its own default), or a list (unbatched,batched,"
        "instances-2,decoupled; a shape of two parts joined with +: decoupled+instances-2) (default all)",
    )
    m.add_argument(
        "--jobs",
        default="auto",
        metavar="N",
        help="cells run side by side, up to N at a time; each cycle's start and load still run one at a "
        "time across them (rig.worker.quiet), the stops and exit timeouts overlap; benches always run alone "
        "(default auto: with --scenarios, three times the CPUs this process may use, at most 8; else 1)",
    )
    m.add_argument(
        "--shard",
        metavar="K/N",
        help="run shard K of N (K from 0, as a Kubernetes Indexed Job's completion index): a fixed share "
        "of the cells, so that N nodes given K = 0..N-1 into one store run every cell once",
    )
    m.add_argument(
        "--known-file",
        metavar="FILE",
        help="the verdicts known per scenario, shape, engine and core (default the rig's own, "
        "rig/scenarios/known_verdicts.csv; `rig scenarios --accept RESULTS` writes one)",
    )
    m.add_argument("--junit", metavar="FILE", help="also write the cells as JUnit XML (one test case per cell)")
    m.add_argument(
        "--summary-json",
        metavar="FILE",
        help="also write the matrix's summary as JSON: each cell's run id, status and verdict counts, "
        "the counts summed, the reasons, the exit status (written whole or not at all); its folder must "
        "exist",
    )
    m.add_argument(
        "--cell-timeout",
        type=float,
        metavar="S",
        help="seconds a cell may run before it is killed and recorded 'timeout' (default from "
        "cycles, startup and exit timeouts)",
    )


def _soak_options(p) -> list:
    """The soak's options a matrix passes to every cell, as `rig soak` defines them (the table's
    that a matrix offers, ``rig.contract.option_table``), each group under its soak title."""
    return add_run_options(
        p,
        "matrix",
        titles={group: f"each cell's soak: {group}" for group in GROUPS},
        changed={"cycles": dict(help=f"cycles per cell (default {DEFAULT_CYCLES}, or the config's)")},
    )


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


def run(args) -> int:
    from rig.parent import runtime

    scens, shard, only_shapes = _axes(args)
    retains = parse_retain(args.retain)
    engines = parse_engines(args.engines)
    installed, container = local_runtimes()  # an NGC image: `all` includes its own core
    specs = parse_runtimes(args.runtimes, installed, runtime.PYTRITON_CORE, container=container)
    # The base of every cell's config: the matrix's own options, checked once as `rig soak` checks
    # them (bad input: one line, nothing run); each cell's derives from it (matrix_plan.cell_config).
    cfg = run_config(soak_options(args, specs[0], retains[0] if scens is None else None, DEFAULT_CYCLES))
    if cfg is None:  # the run is skipped on this machine (the cupy model without a GPU)
        return Exit.SKIPPED
    if scens is not None:
        cfg = dataclasses.replace(cfg, **_scenario_timeouts(args, cfg))
    loads = _check_scenarios(args, cfg, scens) if scens is not None else {}
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
    _install_missing(specs, installed, shard)
    plan = _plan(specs, engines, retains if scens is None else ["none"])
    rows = _skipped_rows(plan, scens)
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
    return _run_and_table(args, jobs, bench_jobs, rows, timeout, str(cfg.results), scens, shard)


def _axes(args) -> tuple:
    """The matrix's own options checked: the scenarios (what cannot combine with them), the
    shard, the shapes, --jobs, --known-file (its cells read it too) and --junit's folder."""
    scens = None
    if args.scenarios is not None:
        refuse_with_scenarios(args)
        scens = parse_scenarios(args.scenarios)
    shard = parse_shard(args.shard)
    only_shapes = parse_shapes(args.shapes)
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


def _run_and_table(
    args, jobs: list[Job], bench_jobs: list[Job], rows: list[dict], timeout: float, results: str, scens, shard
) -> int:
    """Run the cells (then the benches, alone), print the table (and write --junit): the exit status."""
    from rig.analysis import matrix

    total = len(jobs) + len(bench_jobs)
    for i, job in enumerate([*jobs, *bench_jobs], 1):
        job.label = f"[{i}/{total}] {job.label}"
        job.start_line = f"[{i}/{total}] {job.start_line}" if job.start_line else ""
    where = f"shard {shard[0]}/{shard[1]}: " if shard else ""
    print(
        f"{where}{len(jobs)} cell(s) to run{f', {args.jobs} side by side' if args.jobs > 1 else ''}"
        f"{f', {len(bench_jobs)} bench(es) after them, alone' if bench_jobs else ''}",
        flush=True,
    )
    logs = Path(results) / "logs" / f"matrix-{os.getpid()}" if "://" not in results else None
    judge = matrix.judge_scenario if scens is not None else (lambda row: row)
    rows += run_jobs(jobs, args.jobs, timeout, results, logs, judge, matrix.status)
    bench_rows = run_jobs(bench_jobs, 1, timeout, results, None, lambda row: row, matrix.status)
    print()
    print(matrix.format_table(rows) if scens is None else matrix.format_scenarios(rows))
    _say_unjudged_and_findings(rows)
    if bench_rows:
        print()
        print(matrix.format_bench(bench_rows))
    if args.junit:
        from rig.parent import junit

        junit.write(args.junit, [junit.matrix_suite(rows + bench_rows)])
        print(f"\njunit: {args.junit}")
    from rig.common.text import redact

    print(
        f"\nresults: {redact(results)} (compare them: rig report {redact(results)}"
        f"{f'; the grid: rig report --conformance {redact(results)}' if scens is not None else ''})"
    )
    status = matrix.exit_status(rows + bench_rows)
    if getattr(args, "summary_json", None):
        from rig.workflows import summary

        summary.write(args.summary_json, summary.matrix(status, rows + bench_rows, redact(results)))
        print(f"summary JSON: {args.summary_json}")
    return status


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


def _scenario_timeouts(args, cfg) -> dict:
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


def _install_missing(specs: list[str], installed: list[str], shard) -> None:
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


def _skipped_rows(plan: list[dict], scens) -> list[dict]:
    rows = []
    for p in plan:
        for skipped in p["skipped"]:
            if scens is not None:
                skipped.update(scenario=scens[0].name if len(scens) == 1 else "every scenario", retain="-")
            rows.append(skipped)
            print(f"runtime {skipped['runtime']}, engine {skipped['engine']}: skipped: {skipped['reason']}", flush=True)
    return rows


def _say_unjudged_and_findings(rows: list[dict]) -> None:
    unjudged = [r for r in rows if r["status"] == "unjudged"]
    if unjudged:
        print(
            f"\n{len(unjudged)} cell(s) ran where nothing is known of their scenario's verdicts (that core, "
            "engine or shape was never reviewed): recorded, not judged (review them: rig report --conformance "
            "RESULTS; accept them: rig scenarios --accept RESULTS)"
        )
    findings = [r for r in rows if r["status"] == "finding"]
    for r in findings:
        print(
            f"FINDING: {r['scenario']}{' (control)' if r.get('control') else ''} [{r.get('shape')}] on Triton "
            f"{r.get('triton_version')} through {r.get('engine')}: {r.get('reason')}"
        )


def _check_scenarios(args, cfg, scens: list) -> dict[str, dict]:
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

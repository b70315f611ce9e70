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

Its work: ``rig.workflows.matrix_setup.prepare`` (the options checked, the runtimes installed, the
jobs made), then ``rig.workflows.matrix_table.run_and_table`` (run, tabled, the exit status).
"""

from __future__ import annotations

from rig.common.errors import Exit
from rig.contract.option_table import GROUPS
from rig.parent.options import add_run_options
from rig.workflows.matrix_races import RACE_CYCLES, RACE_WIDTH

DEFAULT_CYCLES = 3


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
    matrix = p.add_argument_group("the matrix")
    _cell_options(matrix)
    _run_options(matrix)
    p.set_defaults(func=run, soak_actions=_soak_options(p))


def _cell_options(m) -> None:
    """The matrix's own options, its cells: the runtimes, engines, retentions, scenarios, shapes and
    benches they cross."""
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


def _run_options(m) -> None:
    """The matrix's own options, how its cells run: how many at once, which shard, the known verdicts
    they are judged by, a race's more cycles, a cell's time limit, what is written beside the store."""
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
    m.add_argument(
        "--race-cycles",
        metavar="N",
        help="with --scenarios: a cell whose cycles gave more than one lifecycle verdict (a race) runs again, "
        "the same cell, for at most N more cycles, in as few runs as its rate allows, stopping once its rate "
        f"is known (the 95 %% Wilson interval of its least-known verdict's rate at most {RACE_WIDTH:g} wide) "
        "or N are spent; a run that crashes or times out ends it; the table and the judgement pool every "
        f"run's cycles; 0: off (default {RACE_CYCLES}: with 3 cycles a race reaches 12 at most)",
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


def run(args) -> int:
    from rig.workflows import matrix_setup, matrix_table

    prepared = matrix_setup.prepare(args, DEFAULT_CYCLES)
    if prepared is None:  # the run is skipped on this machine (the cupy model without a GPU)
        return Exit.SKIPPED
    return matrix_table.run_and_table(args, prepared)

"""`rig bisect`: where a conformance cell's verdict changed between two releases, by which component
(or two together, or several changes in turn) and which commits. The bisection (hybrids, then the
components' commits, every step stored and resumed) is ``rig.workflows.bisect``'s."""

from __future__ import annotations

from rig.common.errors import RigError
from rig.workflows.bisect import Bisection, BisectSpec, check_cell
from rig.workflows.bisect_judge import refusal


def add_parser(sub) -> None:
    p = sub.add_parser(
        "bisect",
        help="find the component and the commit that changed a scenario's verdict between two releases",
        description="Where a cell's verdict changed between two releases: builds hybrids (the good release with "
        "one component from the bad; pairs where only two together change it) to find the components, then "
        "bisects their commits. A cycle is judged by its lifecycle verdict, its load verdict where the releases' "
        "differ and the readiness it probed (ready-stub-dead). Steps are stored (table bisect) and an interrupted "
        "bisection resumes.",
    )
    p.add_argument("--scenario", required=True, help="the cell's scenario (`rig scenarios` lists them)")
    p.add_argument("--control", action="store_true", help="the scenario's negative control")
    p.add_argument("--shape", default=None, help="the model shape (default the scenario's first)")
    p.add_argument("--engine", default="capi", choices=("capi", "tritonserver"), help="the API (default capi)")
    p.add_argument("--good", required=True, metavar="VERSION", help="the release that gives the old verdict")
    p.add_argument("--bad", required=True, metavar="VERSION", help="the release that gives the new verdict")
    p.add_argument("--sources", metavar="DIR", help="a folder of git bundles (default: GitHub)")
    p.add_argument("--results", default="results", help="the store the cells' runs and the steps go to")
    p.add_argument("--cycles", type=int, default=3, help="cycles a step (default 3)")
    p.add_argument(
        "--race-cycles",
        type=int,
        default=6,
        help="more cycles for a step whose cycles give both sides' verdicts (a race; default 6)",
    )
    p.add_argument("--jobs", type=int, default=None, help="parallel compile jobs (default: ninja's)")
    p.add_argument(
        "--runner",
        metavar="CMD",
        help="a command each step's cell runs through, where the API's bindings load (the sandbox: "
        "'bash tests/sandbox/official.sh --run'); it sees the store and the runtime cache at the same paths",
    )
    p.add_argument(
        "--python",
        metavar="PY",
        help="the interpreter the builds' backend stubs and bindings are for (the runner's; default this one)",
    )
    p.add_argument(
        "--record-refusal",
        action="store_true",
        help="where the window cannot be bisected (a release before the sources here), store a result row saying "
        "why (judged refused) as well as saying it",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rig.runtimes.from_source import releases

    if args.cycles < 1 or args.race_cycles < 0:
        raise RigError("--cycles must be >= 1 and --race-cycles >= 0")
    why = refusal(args.good, args.bad)  # before anything is parsed or built: a release with no sources here
    if why is None:
        good, _ = releases.parse(args.good)
        bad, _ = releases.parse(args.bad)
        if good == bad:
            raise RigError("--good and --bad name the same release: give two")
        why = refusal(good, bad)
    else:
        good, bad = args.good, args.bad
    spec = BisectSpec(
        args.scenario,
        args.control,
        args.shape,
        args.engine,
        good,
        bad,
        args.sources,
        args.results,
        args.cycles,
        args.race_cycles,
        args.jobs,
        args.runner,
        args.python,
    )
    if why is not None:
        if not args.record_refusal:
            raise RigError(why)
        return Bisection(spec).refuse(why)
    check_cell(spec)
    return Bisection(spec).run()

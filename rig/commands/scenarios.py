"""`rig scenarios`: the lifecycle scenarios the rig reproduces, what each does, the upstream
report it stands for and the verdicts it is known to give (``rig.scenarios.catalog``)."""

from __future__ import annotations

from rig.common.errors import Exit
from rig.common.text import md_cell


def add_parser(sub) -> None:
    p = sub.add_parser(
        "scenarios",
        help="the lifecycle scenarios (--scenario NAME): what each does, its upstream report, its expected verdicts",
        description="List the lifecycle scenarios `rig cycle` and `rig soak` run with "
        "--scenario NAME (--control: its negative control, the same without the fault).",
    )
    p.add_argument("--markdown", action="store_true", help="a Markdown table (for docs and reports)")
    p.add_argument(
        "--accept",
        metavar="RESULTS",
        help="after reviewing a matrix run (rig report --conformance RESULTS): record the verdicts its "
        "scenario cells gave as the known ones, per scenario, shape, engine and core (a cell whose "
        "cycles disagree is left out and named)",
    )
    p.add_argument(
        "--intermittent",
        action="store_true",
        help="with --accept: record a cell whose cycles disagree as intermittent, each verdict its cycles "
        "gave (exit_timeout|clean: any one of them is as known), instead of leaving it out",
    )
    p.add_argument(
        "--known-file",
        metavar="FILE",
        help="the known-verdicts file to read or write (default the rig's own, rig/scenarios/known_verdicts.csv; "
        "or RIG_KNOWN_VERDICTS)",
    )
    p.set_defaults(func=run)


def accept(results: str, path: str | None, intermittent: bool = False) -> int:
    from rig.analysis.conformance import listing
    from rig.scenarios import known

    written, left_out = listing.accept(results, path, intermittent)
    for why in left_out:
        print(f"left out: {why}")
    print(f"{written} cell(s) recorded as known in {path or known.default_path()}")
    return Exit.OK if written else Exit.FAILED


def run(args) -> int:
    if args.known_file:
        import os

        os.environ["RIG_KNOWN_VERDICTS"] = args.known_file
    if args.accept:
        return accept(args.accept, args.known_file, args.intermittent)
    from rig.analysis.conformance import listing

    table = listing.rows()
    keys = list(table[0])
    if args.markdown:
        print("| " + " | ".join(keys) + " |")
        print("| " + " | ".join("---" for _ in keys) + " |")
        for r in table:
            print("| " + " | ".join(md_cell(r[k]) for k in keys) + " |")
        return Exit.OK
    for r in table:
        print(f"{r['scenario']}  ({r['upstream']}; {r['built from']})")
        print(f"    {r['what']}")
        print(f"    shows as: {r['shows as']}; control: {r['control']}; shapes: {r['shapes']}")
        print(f"    known on: {r['known on']}")
        if r["fixed in"] != "—":
            print(f"    fixed upstream in: {r['fixed in']}")
    print("\nrun one: rig soak --scenario NAME [--control] --cycles 3 --exit-timeout 3")
    return Exit.OK

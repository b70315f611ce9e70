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


def rows() -> list[dict]:
    from rig.scenarios import known
    from rig.scenarios.catalog import SCENARIOS

    out = []
    cores = known.table()
    for s in SCENARIOS.values():
        expected = " / ".join(s.expected)
        if s.growth != "ok":
            expected += f"; growth {s.growth}"
        seen = sorted({(k[3], k[4]) for k in cores if k[0] == s.name and not k[1]}, key=lambda x: (x[0], x[1]))
        engines = sorted({e for e, _ in seen})
        versions = sorted({v for _, v in seen}, key=known._version_key)
        built = ", ".join(
            x
            for x in (
                f"models/scenarios/{s.repository}" if s.repository else "",
                f"--fault {s.fault}" if s.fault != "none" and not s.repository else "",
                f"--retain {s.retain}" if s.retain != "none" else "",
                f"client {s.client}" if s.client != "none" else "",
                f"--restart {s.restart}" if s.restart else "",
            )
            if x
        )
        out.append(
            {
                "scenario": s.name,
                "what": s.what,
                "upstream": ", ".join(s.upstream) or "the rig's own control",
                "shows as": expected + (" under a --workload" if s.workload else ""),
                "shapes": ", ".join(s.shapes),
                "known on": (
                    f"{', '.join(versions)}; {', '.join(engines)}"
                    if seen
                    else "nothing yet (rig scenarios --accept RESULTS)"
                ),
                "control": " / ".join(s.control) if s.has_control else "none (it measures)",
                "built from": built,
                "fixed in": ", ".join(s.fixed_in) or "—",
            }
        )
    return out


def accept(results: str, path: str | None, intermittent: bool = False) -> int:
    from rig.common.errors import RigError
    from rig.scenarios import known
    from rig.store import Store

    frame = Store(results).read("cycles")
    if frame is None or not len(frame) or "scenario" not in frame or not frame["scenario"].notna().any():
        raise RigError(
            f"{results} holds no scenario cycles to accept: run rig matrix --scenarios ... --results {results} first"
        )
    written, left_out = known.accept(frame, path, intermittent_ok=intermittent)
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
    table = rows()
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

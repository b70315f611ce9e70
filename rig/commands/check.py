"""`rig check RESULTS [--move-aside DIR]`: list the files in a results folder's tables that
readers skip (not Parquet, cut short, another schema) or that do not belong there, one line
each; exit 1 when there are any, 0 when there are none, 2 when RESULTS is no results folder."""

from __future__ import annotations

from rig.common.errors import Exit


def add_parser(sub) -> None:
    p = sub.add_parser(
        "check",
        help="list damaged or foreign files in a results folder (and move them aside)",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
    )
    p.add_argument("results", metavar="RESULTS", help="results folder or pyarrow filesystem URI")
    p.add_argument(
        "--move-aside",
        metavar="DIR",
        help="move each such file into DIR (outside the table folders; e.g. RESULTS/_damaged), "
        "keeping its path below RESULTS",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rig.store import Store
    from rig.store.check import check_aside, move_aside, problems

    store = Store.open(args.results)
    if args.move_aside:
        check_aside(store, args.move_aside)
    found = problems(store)
    for path, why in found:
        line = f"{store.shown(path)}: {why}"
        if args.move_aside:
            line += f" -> moved to {move_aside(store, path, args.move_aside)}"
        print(line, flush=True)
    if not found:
        print(f"{store.root}: every file in its tables is readable")
        return Exit.OK
    print(
        f"{len(found)} damaged or foreign file(s) in {store.root}"
        + (
            f", moved aside into {args.move_aside}"
            if args.move_aside
            else "; `rig check --move-aside DIR` moves them out of the tables"
        )
    )
    return Exit.FAILED

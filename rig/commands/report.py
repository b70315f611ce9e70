"""`rig report RESULTS`: lifecycle, performance, differences from a baseline and nightly
trends of a results folder, as a Markdown summary on stdout and one self-contained HTML page.
`rig report --conformance RESULTS`: the conformance grid alone (every scenario per core, API and
model shape against its known verdicts, ``rig.analysis.conformance.table``), in Markdown on stdout or
``--output FILE``; with ``--from A --to B``, only the cells that differ between two cores
(``rig.analysis.conformance.diff``), which the HTML page also shows as a section."""

from __future__ import annotations

from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="compare stored runs: Markdown on stdout, one offline HTML page",
        description="Compare what a results folder holds: Triton versions, engines, models, "
        "retention, stop strategies, restart modes and runs, where more than one is present.",
    )
    p.add_argument("results", help="results folder (the --results of rig soak, cycle, bench)")
    p.add_argument(
        "--baseline",
        metavar="VERSION",
        help="the reference for differences: a Triton version (default: the oldest present), "
        "or a value of the compared tag when one version only",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep rows where a column of runs, cycles or windows equals VALUE, or one of "
        "V1,V2,... (repeatable: all must hold), e.g. engine=capi, retain=none, run_id=A,B",
    )
    p.add_argument("--out", help="the HTML page (default report.html)")
    p.add_argument(
        "--max-histograms",
        type=int,
        metavar="N",
        help="points whose HDR histograms are merged exactly (the busiest; default 8)",
    )
    p.add_argument(
        "--conformance",
        action="store_true",
        help="print only the conformance grid (Markdown): each lifecycle scenario and its control per "
        "core, API and model shape, judged against the known verdicts (rig/scenarios/known_verdicts.csv)",
    )
    p.add_argument(
        "--output",
        metavar="FILE",
        help="with --conformance: write the grid (with --from/--to: the cells that differ) to FILE "
        "(atomically) instead of stdout",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="VERSION",
        help="the upgrade question, with --to: only the scenario cells whose verdicts differ between "
        "two cores, per API and shape, where each first changed and its evidence (with --conformance: "
        "Markdown; else a section of the HTML page, which otherwise shows its oldest core to its newest). "
        "A Triton version (2.48.0), an nvidia-pytriton release (0.5.10: its core) or a release branch "
        "(r26.03); --from newer than --to is a downgrade, walked down",
    )
    p.add_argument("--to", dest="target", metavar="VERSION", help="the core upgraded to (see --from)")
    p.add_argument(
        "--summary-json",
        metavar="FILE",
        help="with --from/--to: write the upgrade question's answer as JSON to FILE (atomically): its "
        "causes, each with its commit where a bisection named one, and the cells under each, as the "
        "Markdown and the page say them",
    )
    p.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="with --from/--to: only this scenario and its control (repeatable, or NAME,NAME)",
    )
    p.add_argument(
        "--shape",
        action="append",
        metavar="SHAPE",
        help="with --from/--to: only this model shape (repeatable, or A,B; a shape of two parts joined "
        "with +: decoupled+instances-2)",
    )
    p.add_argument(
        "--engine",
        action="append",
        metavar="API",
        help="with --from/--to: only this API, capi or tritonserver (repeatable, or A,B)",
    )
    p.set_defaults(func=run)


def _upgrade_asked(args):
    """``--from``/``--to`` and what narrows them, checked together: None where not asked."""
    from rig.common.errors import RigError

    if (args.source is None) != (args.target is None):
        raise RigError("--from and --to go together: the core upgraded from and the one upgraded to")
    narrow = [o for o, v in (("--scenario", args.scenario), ("--shape", args.shape), ("--engine", args.engine)) if v]
    if narrow and args.source is None:
        raise RigError(
            f"{', '.join(narrow)} {'narrows' if len(narrow) == 1 else 'narrow'} the upgrade question: "
            "give it with --from and --to"
        )
    if args.source is None:
        return None
    return {
        "source": args.source,
        "target": args.target,
        "scenario": args.scenario,
        "shape": args.shape,
        "engine": args.engine,
    }


def run(args) -> int:
    asked = _upgrade_asked(args)
    if args.summary_json is not None:
        _summary_json(args, asked)
    if args.conformance:
        return conformance(args, asked)
    if args.output is not None:
        from rig.common.errors import RigError

        raise RigError("--output writes the conformance grid: give it with --conformance (the HTML page is --out)")
    import gc

    from rig.common.errors import RigError

    max_histograms = 8 if args.max_histograms is None else args.max_histograms
    if max_histograms < 0:
        raise RigError("--max-histograms must be 0 or more")
    from rig.analysis.report import render

    md, page = render.make(args.results, args.where, args.baseline, max_histograms, asked)
    out = Path(args.out or "report.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    print(md)
    print(f"report: {out.resolve()}")
    # The command's last act: the cyclic collections at interpreter exit skip what lives now
    # (scipy's and pandas' modules, the tables read): 0.3 s of a 5 s report.
    gc.freeze()
    return 0


def _summary_json(args, asked: dict | None) -> None:
    """``--summary-json FILE``: the upgrade question's answer as JSON (``conformance_grid.summary_json``)."""
    from rig.analysis.report import conformance_grid
    from rig.common.errors import RigError
    from rig.store import Store

    if asked is None:
        raise RigError("--summary-json writes the upgrade question's answer: give it with --from and --to")
    text = conformance_grid.summary_json(Store.open(args.results), args.results, args.where, asked)
    write_atomically(Path(args.summary_json), text, option="--summary-json")
    print(f"summary: {Path(args.summary_json).resolve()}")


def conformance(args, asked: dict | None = None) -> int:
    """The conformance grid of the results' scenario cycles (``rig.analysis.report.conformance_grid``),
    on stdout or in ``--output``; where ``asked`` (``--from``/``--to``), only the cells that differ
    between the two cores."""
    from rig.analysis.report import conformance_grid
    from rig.common.errors import RigError
    from rig.store import Store

    given = [
        o
        for o, v in (("--out", args.out), ("--baseline", args.baseline), ("--max-histograms", args.max_histograms))
        if v is not None
    ]
    if given:
        raise RigError(
            f"{', '.join(given)} cannot combine with --conformance, which prints the grid alone "
            "(--output FILE writes it to a file)"
        )
    store = Store.open(args.results)
    text = conformance_grid.text(store, args.results, args.where, asked)
    if args.output is None:
        print(text, end="")
        return 0
    write_atomically(Path(args.output), text)
    print(f"conformance: {Path(args.output).resolve()}")
    return 0


def write_atomically(path: Path, text: str, option: str = "--output") -> None:
    """``text`` into ``path`` whole or not at all: a temporary file beside it, renamed over it."""
    import os
    import tempfile

    from rig.common.errors import RigError

    if path.is_dir():
        raise RigError(f"{option} {path} is a folder: give a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as e:  # a parent that is a file, a folder not writable: the path given is wrong
        raise RigError(f"{option} {path}: cannot write there ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""`rig report RESULTS`: lifecycle, performance, differences from a baseline and nightly
trends of a results folder, as a Markdown summary on stdout and one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="compare stored runs: Markdown on stdout, one offline HTML page",
                       description="Compare what a results folder holds: Triton versions, engines, models, "
                       "retention, stop strategies, restart modes and runs, where more than one is present.")
    p.add_argument("results", help="results folder (the --results of rig soak, cycle, bench)")
    p.add_argument("--baseline", metavar="VERSION",
                   help="the reference for differences: a Triton version (default: the oldest present), "
                   "or a value of the compared tag when one version only")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep rows where a column of runs, cycles or windows equals VALUE, or one of "
                   "V1,V2,... (repeatable: all must hold), e.g. engine=capi, retain=none, run_id=A,B")
    p.add_argument("--out", default="report.html", help="the HTML page (default report.html)")
    p.add_argument("--max-histograms", type=int, default=8, metavar="N",
                   help="points whose HDR histograms are merged exactly (the busiest; default 8)")
    p.set_defaults(func=run)


def run(args) -> int:
    import gc
    import warnings

    from rig.analysis import plots, report, stats
    from rig.errors import RigError
    from rig.store import where

    if args.max_histograms < 0:
        raise RigError("--max-histograms must be 0 or more")
    # Figures draw in a process of their own (forked now, before reading starts threads) while
    # this one reads and computes: matplotlib's import and drawing are a third of a report.
    plots.start_renderer()
    stats.preload()
    # no cyclic collections meanwhile: the few cycles a report makes are not worth the passes
    # over scipy's and pandas' objects (about 50 ms each, several a report)
    collecting = gc.isenabled()
    gc.disable()
    try:
        data = report.select(report.load(args.results, where.keys(args.where)), args.where)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # empty groups' medians: shown as '-'
            md, page = report.build(data, baseline=args.baseline, max_histograms=args.max_histograms)
    finally:
        plots.stop_renderer()
        if collecting:
            gc.enable()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    print(md)
    print(f"report: {out.resolve()}")
    # The command's last act: the cyclic collections at interpreter exit skip what lives now
    # (scipy's and pandas' modules, the tables read): 0.3 s of a 5 s report.
    gc.freeze()
    return 0

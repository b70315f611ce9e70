"""`rig report`'s summary and page made from a results folder (``rig.commands.report`` writes and
prints them): its tables read and kept by ``--where``, the page built (``page.build``), its figures
drawn meanwhile in a process of their own (``plots.start_renderer``)."""

from __future__ import annotations

import gc
import warnings

from rig.analysis import plots, stats
from rig.analysis.report import page as report


def make(
    results: str, where: list[str], baseline: str | None, max_histograms: int, upgrade: dict | None
) -> tuple[str, str]:
    """The Markdown summary and the HTML page of the results at ``results``; ``where``: the
    ``--where`` clauses, ``upgrade``: the upgrade question's arguments where asked."""
    from rig.store import where as wh

    # Figures draw in a process of their own (forked now, before reading starts threads) while
    # this one reads and computes: matplotlib's import and drawing are a third of a report.
    plots.start_renderer()
    stats.preload()
    # no cyclic collections meanwhile: the few cycles a report makes are not worth the passes
    # over scipy's and pandas' objects (about 50 ms each, several a report)
    collecting = gc.isenabled()
    gc.disable()
    try:
        data = report.select(report.load(results, wh.keys(where)), where)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # empty groups' medians: shown as '-'
            return report.build(data, baseline=baseline, max_histograms=max_histograms, upgrade=upgrade)
    finally:
        plots.stop_renderer()
        if collecting:
            gc.enable()

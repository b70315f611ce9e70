"""A conformance grid's figures: a row per cell (its cycles, verdicts counted, known verdicts,
judgement, stop p50, finalize, runs; a batched shape's batch sizes), whole for ``rig report
--conformance``, merged per run of alike cores for the published pages. Pure."""

from __future__ import annotations

import re

from rig.analysis.conformance.cells import Cell
from rig.analysis.conformance.table import EXIT_ABORT_WORDS, FINDING, Grid, is_batched
from rig.contract import server_stats
from rig.scenarios import catalog as scenarios
from rig.scenarios.known import ANY, intermittent

FINDING_MARK, UNJUDGED_MARK = "✗", "?"  # a cell that differs from its known verdicts; one with none known


def what(scenario: str) -> str:
    """A scenario's one-line description (``SCENARIOS[name].what``); an unknown one's: —."""
    s = scenarios.SCENARIOS.get(scenario)
    return s.what if s is not None else "—"


def page_anchor(c: Cell) -> str:
    """The id of a cell's figures on its grid's own page: ``anchor`` less the API and shape the
    page is of (``retained-response-2-51-0``; each cell's id is on the page twice)."""
    text = f"{c.scenario}{'-control' if c.control else ''}-{c.triton_version}"
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


FIGURES = [
    "cell",
    "cycles",
    "lifecycle",
    "load",
    "growth",
    "known",
    "judgement",
    "stop p50 s",
    "finalize before stop",
    "runs",
]
BATCHES = "batches formed"  # a batched shape's figures: after growth
BATCH_NOTE = (
    "batches formed: the batch sizes Triton's scheduler formed over the cell's cycles (size x "
    "executions, and the mean batch; from Triton's statistics of each cycle, or of its load windows in a "
    "store before schema 15); never above 1: no execute ran more than one request, so the cell is not "
    "batched whatever its config says; not measured: none of its cycles recorded them (a run with "
    "--server-stats off, or a fixed count of requests stored before schema 15)."
)


def batches_text(c: Cell) -> str:
    """The batch sizes a cell formed: ``1x45 8x1221 (mean 7.6)``; ``never above 1 (1x1204)`` where
    the largest was 1; ``not measured`` where no window recorded them."""
    if c.batches is None:
        return "not measured"
    formed = {s: n for s, n in c.batches.items() if n}
    if not formed:
        return "none formed"
    if max(formed) <= 1:
        return f"never above 1 ({' '.join(f'{s}x{n}' for s, n in sorted(formed.items()))})"
    return server_stats.batch_compact(formed)


def figure_head(g: Grid) -> list[str]:
    return [*FIGURES[:5], BATCHES, *FIGURES[5:]] if is_batched(g.shape) else FIGURES


def _counts_text(d: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in d.items()) or "—"


def _known_text(c: Cell) -> str:
    """A page's figures: the known verdicts where they say more than the cycles gave."""
    if c.known is None:
        return f"{UNJUDGED_MARK} nothing known"
    # alternatives in one order, so that the cells of cores known alike share a row
    known = " / ".join(ANY.join(sorted(str(f).split(ANY))) for f in c.known)
    if c.judgement == FINDING:
        return f"{FINDING_MARK} {known} ({c.differing}/{c.cycles} differ)"
    return f"as known: {known}" if intermittent(c.known) or len(c.got) > 1 else "as known"


def _gave_text(c: Cell) -> str:
    """A page's figures: the verdicts the cycles gave, counted (``3x exit_timeout / ok / ok``), and
    what a dead stub left ready, and the aborts at exit beside another verdict."""
    text = ", ".join(f"{n}x {v}" for v, n in sorted(c.got.items(), key=lambda kv: -kv[1])) or "—"
    if c.probed:
        text += f" ({c.probed} after the stub died)"
    beside = c.exit_aborts - c.lifecycle.get("aborted_at_exit", 0)
    return text + (f" ({EXIT_ABORT_WORDS} in {beside})" if beside > 0 else "")


# A page's figures: the report's but for the runs (``rig report --conformance`` on the kept store
# names them), the three verdicts counted together, and the cells of consecutive cores that gave
# the same figures in one row (stop p50 as a range): a page of 720 cells is half the size
PAGE_FIGURES = ["cell", "cycles gave", "known", "stop p50 s", "finalize before stop"]


def _stops_text(cs: list[Cell]) -> str:
    stops = [c.stop_p50 for c in cs if c.stop_p50 is not None]
    if not stops:
        return "—"
    lo, hi = f"{min(stops):.3f}", f"{max(stops):.3f}"
    return lo if lo == hi else f"{lo}–{hi}"


def page_figure_rows(g: Grid) -> list[tuple[list[str], list[str]]]:
    """A page's figures (``PAGE_FIGURES``): a row per run of consecutive cores whose cells of a
    scenario gave the same figures but for the stop's p50, with every cell's id (``page_anchor``)."""
    out = []
    for name, control in g.rows:
        runs: list[list[tuple[Cell, list[str]]]] = []
        for v in g.cores:
            c = g.cells.get((name, control, v))
            if c is None:
                runs.append([])
                continue
            same = [_gave_text(c), _known_text(c), _finalize_text(c), batches_text(c) if is_batched(g.shape) else ""]
            if runs and runs[-1] and runs[-1][0][1] == same:
                runs[-1].append((c, same))
            else:
                runs.append([(c, same)])
        for run in (r for r in runs if r):
            cs = [c for c, _ in run]
            gave, known, fin, batches = run[0][1]
            cores = cs[0].triton_version + (f" to {cs[-1].triton_version}" if len(cs) > 1 else "")
            cols = [f"{cs[0].label}, {cores}", gave, known, _stops_text(cs), fin]
            if is_batched(g.shape):
                cols.insert(2, batches)
            out.append(([page_anchor(c) for c in cs], cols))
    return out


def _finalize_text(c: Cell) -> str:
    return (
        "—"
        if not c.finalize_expected
        else f"{c.finalize_before}/{c.finalize_expected}" + (f", {c.finalize_after} after" if c.finalize_after else "")
    )


def figure_rows(g: Grid) -> list[tuple[str, list[str]]]:
    out = []
    for name, control in g.rows:
        for v in g.cores:
            c = g.cells.get((name, control, v))
            if c is None:
                continue
            fin = _finalize_text(c)
            life = _counts_text(c.lifecycle) + (f" ({c.probed} after the stub died)" if c.probed else "")
            beside = c.exit_aborts - c.lifecycle.get("aborted_at_exit", 0)
            if beside > 0:
                life += f" ({EXIT_ABORT_WORDS} in {beside})"
            cols = [
                f"{c.label}, {v}",
                str(c.cycles),
                life,
                _counts_text(c.load),
                _counts_text(c.growth),
                " / ".join(c.known) if c.known else "—",
                c.judgement + (f" ({c.differing}/{c.cycles} differ)" if c.differing else ""),
                "—" if c.stop_p50 is None else f"{c.stop_p50:.3f}",
                fin,
                ", ".join(c.run_ids),
            ]
            if is_batched(g.shape):
                cols.insert(5, batches_text(c))
            out.append((c.anchor, cols))
    return out

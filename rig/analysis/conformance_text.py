"""The conformance table as text (``rig.analysis.conformance`` builds it): the legend, each
grid with its marks linked to its cells' figures (a batched shape's with the batch sizes Triton
formed), where a shape moved a verdict; as Markdown
(``rig report --conformance``, docs/conformance.md) and as an HTML fragment (the report's page)."""

from __future__ import annotations

import html

from rig.common.text import md_cell
from rig.parent import scenarios
from rig.analysis.conformance import (API_NAMES, AS_KNOWN, FINDING, NEVER_RUN, NO_CHANGE, SHORT, SIGNS, SKIPPED,
                                      UNJUDGED, Cell, Conformance, Grid, _scenario_order, is_batched, row_label,
                                      shape_moves, version_key)
from rig.contract import server_stats
from rig.parent.known import intermittent
from rig.contract.verdicts import NOT_MEASURED

UNBATCHED_MARK = "(never batched)"  # a batched cell none of whose executes ran more than one request
INTERMITTENT = "~"  # the mark of a cell known to be intermittent (rig.parent.known: exit_timeout|clean)


def mark(c: Cell) -> str:
    """A cell's mark in a grid: its sign, the lifecycle's verdict most cycles gave, the load's and
    the growth's after it where not ok (growth: where measured), and ``n/N`` where cycles disagree."""
    life, load, growth = c.verdicts
    text = life
    if load != "ok":
        text += " · " + SHORT.get(load, load)
    if growth not in ("ok", NOT_MEASURED):
        text += " · " + SHORT.get(growth, growth)
    if c.agreeing < c.cycles:
        text += f" {c.agreeing}/{c.cycles}"
    if c.probed and c.probed != "server ready, model ready" and not c.control:
        text += " · " + _ready_short(c.probed)  # a dead stub's model no longer said ready
    if intermittent(c.known):
        text += f" {INTERMITTENT}"
    if is_batched(c.shape) and c.batches and max((s for s, n in c.batches.items() if n), default=1) <= 1:
        text += f" {UNBATCHED_MARK}"  # the config batches, Triton never did: not a batched cell
    return f"{SIGNS[c.judgement]} {text}"


def _ready_short(probed: str) -> str:
    """``server ready, model not ready`` -> ``model not ready``: what no longer said ready."""
    return ", ".join(part for part in probed.split(", ") if "not" in part) or probed


def upstream(scenario: str) -> str:
    s = scenarios.SCENARIOS.get(scenario)
    if s is None:
        return "—"
    text = ", ".join(s.upstream) or "the rig's own"
    return text + (f" (fixed in {', '.join(s.fixed_in)})" if s.fixed_in else "")


def changed_text(cores) -> str:
    return "changed in " + ", ".join(cores) if cores else NO_CHANGE


def legend() -> list[str]:
    """The legend's lines (Markdown; the HTML escapes them)."""
    return [
        f"{SIGNS[AS_KNOWN]} as known: every cycle gave the verdicts known for that scenario, shape, API and core "
        "(rig/known_verdicts.csv); "
        f"{SIGNS[FINDING]} finding: some cycle gave others (its figures say which); "
        f"{SIGNS[UNJUDGED]} unjudged: nothing is known for that cell yet (recorded, not judged; a control with nothing known is held to its contract, clean). The control of a scenario made from the plain template model (no client, no load of its own) is the `template` row: the same model and client without the fault, run once a shape.",
        "A mark is the lifecycle verdict most of the cell's cycles gave, then the load's (· errors, · timeouts, "
        "· wrong outputs, · nothing completed, · no load) where not ok, and the growth's (· leaking, · slowing) "
        "where measured and not ok; · model not ready, · server not ready, model not ready: what no longer said "
        "ready once the scenario's stub was dead (ready-stub-dead; its figures say what each asked); n/N where the "
        "cycles disagree; "
        f"{UNBATCHED_MARK}: a cell of a batched shape in which no execute ran more than one request (its figures "
        "say the batch sizes Triton formed), so it tested the config, not batches; "
        f"{INTERMITTENT} intermittent: the cell is known to give either of two verdicts (exit_timeout|clean in its "
        "figures), each cycle one of them. Each mark links to the cell's figures below its grid.",
        f"{NEVER_RUN} never run: no cycle of that scenario on that core, API and shape in the results; "
        f"{SKIPPED} skipped, with why. changed in: the cores whose verdicts (or readiness after a dead stub) differ from those of the core before "
        f"(versions in numeric order); {NO_CHANGE}: the same on every core shown.",
    ]


def _grid_title(g: Grid) -> str:
    return f"{API_NAMES.get(g.engine, g.engine)}, {g.shape}"


def _footnotes(g: Grid) -> list[str]:
    notes = []
    if any((*r, v) not in g.cells and (*r, v) not in g.skipped for r in g.rows for v in g.cores):
        notes.append(f"{NEVER_RUN} never run: no cycle stored for that scenario on that core.")
    for (name, control, version), why in sorted(g.skipped.items(), key=lambda kv: (_scenario_order(kv[0][0]),
                                                                                  kv[0][1], version_key(kv[0][2]))):
        notes.append(f"{SKIPPED} {row_label(name, control)} on {version}: skipped, {why}")
    return notes


def _grid_rows(g: Grid) -> tuple[list[str], list[list[tuple[str, str | None, str]]]]:
    """The grid's header and rows; each cell (text, link target or None, judgement class)."""
    head = ["scenario", *g.cores, "changed in", "upstream"]
    out = []
    for name, control in g.rows:
        row = [(row_label(name, control), None, "")]
        for v in g.cores:
            c = g.cells.get((name, control, v))
            if c is not None:
                row.append((mark(c), c.anchor, c.judgement.replace(" ", "-")))
            elif (name, control, v) in g.skipped:
                row.append((f"skipped{SKIPPED}", None, "skipped"))
            else:
                row.append((NEVER_RUN, None, "never-run"))
        row.append((changed_text(g.changed.get((name, control))), None, ""))
        row.append((upstream(name), None, ""))
        out.append(row)
    return head, out


FIGURES = ["cell", "cycles", "lifecycle", "load", "growth", "known", "judgement", "stop p50 s",
           "finalize before stop", "runs"]
BATCHES = "batches formed"  # a batched shape's figures: after growth
BATCH_NOTE = ("batches formed: the batch sizes Triton's scheduler formed over the cell's cycles (size x "
              "executions, and the mean batch; from Triton's statistics of each cycle, or of its load windows in a "
              "store before schema 15); never above 1: no execute ran more than one request, so the cell is not "
              "batched whatever its config says; not measured: none of its cycles recorded them (a run with "
              "--server-stats off, or a fixed count of requests stored before schema 15).")


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


def _figure_head(g: Grid) -> list[str]:
    return [*FIGURES[:5], BATCHES, *FIGURES[5:]] if is_batched(g.shape) else FIGURES


def _counts_text(d: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in d.items()) or "—"


def _figure_rows(g: Grid) -> list[tuple[str, list[str]]]:
    out = []
    for name, control in g.rows:
        for v in g.cores:
            c = g.cells.get((name, control, v))
            if c is None:
                continue
            fin = "—" if not c.finalize_expected else f"{c.finalize_before}/{c.finalize_expected}" + (
                f", {c.finalize_after} after" if c.finalize_after else "")
            life = _counts_text(c.lifecycle) + (f" ({c.probed} after the stub died)" if c.probed else "")
            cols = [f"{c.label}, {v}", str(c.cycles), life, _counts_text(c.load),
                    _counts_text(c.growth), " / ".join(c.known) if c.known else "—",
                    c.judgement + (f" ({c.differing}/{c.cycles} differ)" if c.differing else ""),
                    "—" if c.stop_p50 is None else f"{c.stop_p50:.3f}", fin, ", ".join(c.run_ids)]
            if is_batched(g.shape):
                cols.insert(5, batches_text(c))
            out.append((c.anchor, cols))
    return out


def _md(text: str) -> str:
    return md_cell(text)


def to_markdown(table: Conformance, level: int = 2) -> str:
    """The legend, then per API and shape a heading (``level``, the legend's too), its grid, its
    footnotes and its cells' figures (each row an anchor the grid links to)."""
    h = "#" * level
    lines = [f"{h} Legend", "", *(line for text in legend() for line in (text, ""))]
    for g in table.grids:
        head, rows = _grid_rows(g)
        lines += [f"{h} {_grid_title(g)}", "", "| " + " | ".join(_md(x) for x in head) + " |",
                  "|" + " --- |" * len(head)]
        for row in rows:
            lines.append("| " + " | ".join(_md(t) if to is None else f"[{_md(t)}](#{to})" for t, to, _ in row) + " |")
        lines.append("")
        notes = _footnotes(g)
        if notes:
            lines += [*(n + "  " for n in notes[:-1]), notes[-1], ""]
        head = _figure_head(g)
        lines += [f"**Figures: {_grid_title(g)}**", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for aid, cols in _figure_rows(g):
            cols = [f'<a id="{aid}"></a>{_md(cols[0])}', *(_md(x) for x in cols[1:])]
            lines.append("| " + " | ".join(cols) + " |")
        lines.append("")
        if is_batched(g.shape):
            lines += [BATCH_NOTE, ""]
    if len({c.shape for c in table.cells}) > 1:
        lines.append(shape_moves_markdown(table.cells, level))
    return "\n".join(lines).rstrip() + "\n"


def _inline(text: str) -> str:
    """Markdown's backticks as <code>, the rest escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(table: Conformance, level: int = 3) -> str:
    """The same as ``to_markdown``, as an HTML fragment (for the report's page): each mark an
    ``<a href="#id">`` to its row in the figures table, which carries that ``id``."""
    out = ['<div class="conformance">']
    out += [f'<p class="note">{_inline(text)}</p>' for text in legend()]
    for g in table.grids:
        head, rows = _grid_rows(g)
        out.append(f"<h{level}>{_inline(_grid_title(g))}</h{level}>")
        out.append('<table class="cf-grid"><thead><tr>' + "".join(f"<th>{html.escape(x)}</th>" for x in head)
                   + "</tr></thead><tbody>")
        for row in rows:
            tds = []
            for text, to, cls in row:
                body = html.escape(text) if to is None else f'<a href="#{to}">{html.escape(text)}</a>'
                tds.append(f'<td class="{cls}">{body}</td>' if cls else f"<td>{body}</td>")
            out.append("<tr>" + "".join(tds) + "</tr>")
        out.append("</tbody></table>")
        out += [f'<p class="note">{html.escape(n)}</p>' for n in _footnotes(g)]
        out.append(f'<table class="cf-figures"><caption>Figures: {_inline(_grid_title(g))}</caption><thead><tr>'
                   + "".join(f"<th>{html.escape(x)}</th>" for x in _figure_head(g)) + "</tr></thead><tbody>")
        for aid, cols in _figure_rows(g):
            out.append(f'<tr id="{aid}">' + "".join(f"<td>{html.escape(x)}</td>" for x in cols) + "</tr>")
        out.append("</tbody></table>")
        if is_batched(g.shape):
            out.append(f'<p class="note">{_inline(BATCH_NOTE)}</p>')
    out.append("</div>")
    return "\n".join(out) + "\n"




def shape_moves_markdown(cell_list, level: int = 2) -> str:
    """``shape_moves`` as a Markdown section: the rows where a shape moved a verdict, then how many
    held."""
    rows = shape_moves(cell_list)
    h = "#" * level
    moved = [r for r in rows if r["moved"]]
    lines = [f"{h} Where the model shape moves a verdict", "",
             f"Of {len(rows)} scenario cell(s) run in their default shape and in others on the same core and API, "
             f"{len(moved)} gave other verdicts in some shape{':' if moved else '.'}", ""]
    if moved:
        lines += ["| scenario | API | Triton | default shape: verdicts | moved in | held in |", "| --- | --- | --- | --- | --- | --- |"]
        for r in moved:
            lines.append(f"| {_md(row_label(r['scenario'], r['control']))} | {r['engine']} | {r['triton_version']} | "
                         f"{r['default']}: {' / '.join(r['verdicts'])} | "
                         + _md("; ".join(f"{sh}: {' / '.join(v)}" for sh, v in r["moved"].items()))
                         + f" | {', '.join(r['same']) or '—'} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"

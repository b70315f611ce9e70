"""The conformance table as text (``rig.analysis.conformance.table`` builds it): the legend, each
grid with its cells linked to its cells' figures (a batched shape's with the batch sizes Triton
formed), the rows' descriptions, where a shape moved a verdict; as Markdown (``rig report
--conformance``, the published pages under docs/conformance) and as an HTML fragment (the report's
page).

A cell says what happened in a person's words (the lifecycle verdict most cycles gave, then the
load's and growth's where not ok) and shows by its colour whether that was healthy
(``conformance.health``): in HTML a class per health (``cf-healthy``, ``cf-unhealthy``,
``cf-intermittent``), in Markdown a coloured symbol before the text. Whether it agrees with the
known verdicts is a second, separate mark, shown only where it does not (``✗ known: ...``) or where
nothing is known (``?``)."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

from rig.analysis.conformance.bindings import INSTALLED, bindings_of
from rig.analysis.conformance.cells import Cell, row_label
from rig.analysis.conformance.changes import shape_moves
from rig.analysis.conformance.figures import (
    BATCH_NOTE,
    BATCHES,
    FINDING_MARK,
    PAGE_FIGURES,
    UNJUDGED_MARK,
    figure_head,
    figure_rows,
    page_anchor,
    page_figure_rows,
    what,
)
from rig.analysis.conformance.figures import (
    batches_text as batches_text,  # its callers read it here
)
from rig.analysis.conformance.order import scenario_order
from rig.analysis.conformance.table import (
    API_NAMES,
    EXIT_ABORT_WORDS,
    FINDING,
    HEALTHY,
    INTERMITTENT_HEALTH,
    LIFECYCLE_WORDS,
    NEVER_RUN,
    NO_CHANGE,
    NOT_EXACT_MARK,
    SHORT,
    SKIPPED,
    SPAN,
    UNHEALTHY,
    UNJUDGED,
    Conformance,
    Grid,
    health,
    is_batched,
    not_exact,
    version_key,
)
from rig.common.text import md_cell
from rig.contract.verdicts import NOT_MEASURED
from rig.scenarios import catalog as scenarios
from rig.scenarios.known import ANY, intermittent

UNBATCHED_MARK = "(never batched)"  # a batched cell none of whose executes ran more than one request
INTERMITTENT = "~"  # the mark of a cell known to be intermittent (rig.scenarios.known: exit_timeout|clean)
# A cell's health before its text in Markdown (which has no colour); in HTML its class says it
SYMBOLS = {HEALTHY: "🟢", UNHEALTHY: "🔴", INTERMITTENT_HEALTH: "🟡"}
KNOWN_FILE = "rig/scenarios/known_verdicts.csv"


def _words(field: str, words: dict) -> str:
    """One verdict field in words; a known field's alternatives (``exit_timeout|clean``) joined by or."""
    return " or ".join(words.get(v, v) for v in str(field).split(ANY))


def verdict_words(life: str, load: str, growth: str | None) -> str:
    """Verdicts in a cell's words: the lifecycle's, then the load's and the growth's where not ok
    (a growth not measured is no verdict): ``held to exit_timeout · errors``."""
    text = _words(life, LIFECYCLE_WORDS)
    if str(load or "ok") != "ok":
        text += " · " + _words(load, SHORT)
    if set(str(growth or "ok").split(ANY)) - {"ok", NOT_MEASURED}:
        text += " · " + _words(growth, SHORT)
    return text


def cell_text(c: Cell) -> str:
    """What a cell's cycles did, in words: the lifecycle's verdict most of them gave, ``· stub
    aborted at exit`` where that verdict is another but its cycles' stubs aborted at exit too, the
    load's and the growth's where not ok, ``n/N`` where cycles disagree, what no longer said ready
    once a stub was dead, the intermittent mark, ``(never batched)``."""
    life, load, growth = c.verdicts
    text = _words(life, LIFECYCLE_WORDS)
    beside = c.exit_aborts - c.lifecycle.get("aborted_at_exit", 0)  # aborts under another verdict
    if beside > 0 and life != "aborted_at_exit":
        text += f" · {EXIT_ABORT_WORDS}" + (f" {beside}/{c.cycles}" if beside < c.cycles else "")
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
    return text


def agreement(c: Cell) -> str:
    """The cell's mark against the known verdicts: none where as known, ``✗ known: V`` for a
    finding, ``?`` where nothing is known."""
    if c.judgement == FINDING:
        return f"{FINDING_MARK} known: {verdict_words(*c.known)}"
    return UNJUDGED_MARK if c.judgement == UNJUDGED else ""


def mark(c: Cell) -> str:
    """A cell in a Markdown grid: its health's symbol, its text, and its agreement mark where there is one."""
    return " ".join(x for x in (SYMBOLS[health(c)], cell_text(c), agreement(c)) if x)


def _ready_short(probed: str) -> str:
    """``server ready, model not ready`` -> ``model not ready``: what no longer said ready."""
    return ", ".join(part for part in probed.split(", ") if "not" in part) or probed


def upstream(scenario: str) -> str:
    s = scenarios.SCENARIOS.get(scenario)
    if s is None:
        return "—"
    text = ", ".join(s.upstream) or "the rig's own"
    return text + (f" (fixed in {', '.join(s.fixed_in)})" if s.fixed_in else "")


def what_anchor(scenario: str) -> str:
    """The id of a scenario's row in the descriptions table (its grid rows link to it)."""
    return "cf-what-" + re.sub(r"[^a-z0-9]+", "-", scenario.lower()).strip("-")


def changed_text(cores) -> str:
    if not cores:
        return NO_CHANGE
    dated = [c for c in cores if not c.startswith(("fixed by ", "changed by "))]
    return ", ".join((["changed in " + ", ".join(dated)] if dated else []) + [c for c in cores if c not in dated])


def _lifecycle_key() -> str:
    return "; ".join(f"{w} (`{v}`)" for v, w in LIFECYCLE_WORDS.items() if w != v)


def legend() -> list[str]:
    """The legend's lines (Markdown; the HTML escapes them and shows each symbol as its colour)."""
    return [
        (
            f"Colour, what a cell's cycles did: {SYMBOLS[HEALTHY]} healthy: every cycle stopped clean (lifecycle "
            "`clean`), answered its requests (load `ok`) and did not grow (growth `ok` or not measured); "
            f"{SYMBOLS[UNHEALTHY]} unhealthy: none did (a scenario that reproduces a bug is unhealthy on every core "
            f"where it does: that is what to look for); {SYMBOLS[INTERMITTENT_HEALTH]} intermittent: some cycles did "
            f"and some did not, or the cell is known to go either way (a race, {INTERMITTENT})."
        ),
        "Text: the lifecycle verdict most of the cell's cycles gave, in words: clean; "
        + _lifecycle_key()
        + f". · {EXIT_ABORT_WORDS} after another verdict: the stop waited out exit_timeout or a finalize raised, "
        "and a stub then died of a signal as it exited too (n/N where not in every cycle). Then the load's "
        "(· errors, · timeouts, · wrong outputs, · nothing completed, · no load) where not ok, and the growth's "
        "(· leaking, · slowing) where measured and not ok; · model not ready, · server not ready, model not "
        "ready: what no longer said ready once the scenario's stub was dead (ready-stub-dead); n/N where the "
        f"cycles disagree; {INTERMITTENT} intermittent: the cell is known to give either of two verdicts, each "
        f"cycle one of them; {UNBATCHED_MARK}: a cell of a batched shape in which no execute ran more than one "
        "request, so it tested the config, not batches. Each cell links to its figures (the verdicts counted "
        "by their stored names) below its grid; each scenario to what it does.",
        (
            f"Against the known verdicts ({KNOWN_FILE}, per scenario, shape, API and core): no mark where every "
            f"cycle gave them; {FINDING_MARK} known: V where some cycle gave others (a finding: its figures say "
            f"which); {UNJUDGED_MARK} where nothing is known for the cell yet (recorded, not judged; a control with "
            "nothing known is held to its contract, clean). The control of a scenario made from the plain template "
            "model (no client, no load of its own) is the `template` row: the same model and client without the "
            "fault, run once a shape."
        ),
        (
            f"{NEVER_RUN} never run: no cycle of that scenario on that core, API and shape in the results; "
            f"{SKIPPED} skipped, with why; {NOT_EXACT_MARK} a core built here that is not exactly its release (the "
            "footnote says how). changed in: the cores whose verdicts (or readiness after a dead stub) differ from "
            f"those of the core before (versions in numeric order), each dated only as closely as the cores run "
            "allow: "
            f"2.68.0…2.70.0 where the releases before 2.70.0 back to 2.68.0 were not run in that row "
            "(the change came in "
            "one of them), and after a colon the commit a bisection found (`rig bisect`: 2.68.0: python_backend "
            "47f9e03 (#433)), of that cell or of another whose verdicts it moved alike between the same two cores "
            "(as bisected on template (unbatched, capi)), or, through the official API, where its bindings changed "
            "with the core (bindings PyPI's → 2.51.0 (own): not Triton's change alone), or why none can be "
            "(2.51.0 (not bisectable: 2.50.0 has no sources here): the bundles hold r24.10, 2.51.0, on); "
            "fixed by V: a variant V (a core built with a patch or another ref, footnoted "
            f"{NOT_EXACT_MARK}) gives the verdicts of the release before its own; changed by V: it gives others; "
            f"{NO_CHANGE}: the same on every core shown."
        ),
    ]


def key_line(legend_link: str | None = None) -> str:
    """One line that reads a grid (a page's, above it): the symbols and marks, and where the legend is."""
    line = (
        f"{SYMBOLS[HEALTHY]} healthy · {SYMBOLS[UNHEALTHY]} unhealthy · {SYMBOLS[INTERMITTENT_HEALTH]} "
        f"intermittent · {FINDING_MARK} differs from the known verdicts · {UNJUDGED_MARK} nothing known"
    )
    return line + (f" ([legend]({legend_link}))" if legend_link else "")


def grid_title(g: Grid) -> str:
    return f"{API_NAMES.get(g.engine, g.engine)}, {g.shape}"


def _core_head(version: str) -> str:
    return version + (NOT_EXACT_MARK if not_exact(version) else "")


def footnotes(g: Grid) -> list[str]:
    notes = []
    if any((*r, v) not in g.cells and (*r, v) not in g.skipped for r in g.rows for v in g.cores):
        notes.append(f"{NEVER_RUN} never run: no cycle stored for that scenario on that core.")
    for (name, control, version), why in sorted(
        g.skipped.items(), key=lambda kv: (scenario_order(kv[0][0]), kv[0][1], version_key(kv[0][2]))
    ):
        notes.append(f"{SKIPPED} {row_label(name, control)} on {version}: skipped, {why}")
    notes += [f"{NOT_EXACT_MARK} {v}: {not_exact(v)}." for v in g.cores if not_exact(v)]
    said = bindings_note(g)
    return notes + ([said] if said else [])


def bindings_note(g: Grid) -> str:
    """Through the official API, the ``tritonserver`` bindings each column ran, consecutive columns
    alike said once: ``bindings: 2.47.0 to 2.50.0 PyPI's over the wheel's core (assumed: those runs
    do not record them); 2.51.0 to 2.71.0 each release's own`` (``rig.analysis.conformance.bindings``);
    "" for another API."""
    if g.engine != "tritonserver":
        return ""
    runs: list[list] = []  # [what, assumed, first core, last core]
    for v in g.cores:
        found = [b for (_, _, core), c in g.cells.items() if core == v and (b := bindings_of(c)) is not None]
        if not found:
            continue
        b = Counter(found).most_common(1)[0][0]
        what = "each release's own" if b.own else f"{b.version or INSTALLED} over the wheel's core"
        assumed = b.assumed and not b.own  # a core built here carries its own, recorded or not
        if runs and runs[-1][0] == what and runs[-1][1] == assumed:
            runs[-1][3] = v
        else:
            runs.append([what, assumed, v, v])
    parts = [
        (f"{a}" if a == z else f"{a} to {z}")
        + f" {what}"
        + (" (assumed: those runs do not record them)" if assumed else "")
        for what, assumed, a, z in runs
    ]
    return "bindings: " + "; ".join(parts) + "." if parts else ""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One cell of a grid as both renderings need it."""

    md: str  # its Markdown text (with the health's symbol)
    html: str  # its text in HTML (the class shows the health)
    link: str | None  # the id it links to
    classes: str = ""  # its HTML classes
    title: str = ""  # its HTML tooltip
    # parts of its text that link elsewhere, each (text, id): "changed in" links each core it names to
    # that core's cell, the evidence of the change
    parts: tuple = ()


def _changed_slot(g: Grid, name: str, control: bool, anchor_of) -> Slot:
    """The row's "changed in", each core (or span) it names a link to that core's cell."""
    cores = g.changed.get((name, control))
    text = changed_text(cores)
    parts = []
    for v in cores or ():
        # "2.68.0: python_backend ...", "fixed by 2.68.0-v...": the core (or variant) it names
        core = v.split(": ")[0].split(" (")[0].removeprefix("fixed by ").removeprefix("changed by ").split(SPAN)[-1]
        c = g.cells.get((name, control, core))
        parts.append((v, anchor_of(c) if c is not None else None))
    return Slot(text, text, None, parts=tuple(parts))


def joined(parts, one) -> str:
    """The row's changes, each rendered by ``one(text, link)``: "changed in" before the dated ones,
    then what a variant does ("fixed by ...", "changed by ...")."""
    dated = [one(t, to) for t, to in parts if not t.startswith(("fixed by ", "changed by "))]
    effects = [one(t, to) for t, to in parts if t.startswith(("fixed by ", "changed by "))]
    return ", ".join((["changed in " + ", ".join(dated)] if dated else []) + effects)


def _parts_md(s: Slot) -> str:
    if not s.parts:
        return _md(s.md)
    return joined(s.parts, lambda t, to: _md(t) if to is None else f"[{_md(t)}](#{to})")


def _cell_anchor(c: Cell) -> str:
    return c.anchor


def grid_rows(g: Grid, anchor_of=_cell_anchor) -> tuple[list[str], list[list[Slot]]]:
    """The grid's header and rows (``anchor_of``: a cell's figures' id)."""
    head = ["scenario", *map(_core_head, g.cores), "changed in"]
    out = []
    for name, control in g.rows:
        label = row_label(name, control)
        row = [Slot(label, label, what_anchor(name), "cf-row", what(name))]
        for v in g.cores:
            c = g.cells.get((name, control, v))
            if c is not None:
                h, agree = health(c), agreement(c)
                classes = f"cf-{h}" + (f" cf-{c.judgement.replace(' ', '-')}" if agree else "")
                text = " ".join(x for x in (cell_text(c), agree) if x)
                out_title = f"{h}; {c.judgement}" + (f" (known: {' / '.join(c.known)})" if c.known else "")
                row.append(Slot(mark(c), text, anchor_of(c), classes, out_title))
            elif (name, control, v) in g.skipped:
                row.append(Slot(f"skipped{SKIPPED}", f"skipped{SKIPPED}", None, "skipped"))
            else:
                row.append(Slot(NEVER_RUN, NEVER_RUN, None, "never-run"))
        row.append(_changed_slot(g, name, control, anchor_of))
        out.append(row)
    return head, out


def _md(text: str) -> str:
    return md_cell(text)


def _md_row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def grid_markdown(g: Grid, anchor_of=_cell_anchor) -> list[str]:
    """A grid's Markdown lines: its table (each scenario linked to its description, each cell to
    its figures: ``anchor_of`` the cell's id), then its footnotes."""
    head, rows = grid_rows(g, anchor_of)
    lines = [_md_row(_md(x) for x in head), "|" + " --- |" * len(head)]
    for row in rows:
        lines.append(_md_row(_parts_md(s) if s.link is None else f"[{_md(s.md)}](#{s.link})" for s in row))
    lines.append("")
    notes = footnotes(g)
    if notes:
        lines += [*(n + "  " for n in notes[:-1]), notes[-1], ""]
    return lines


def descriptions_markdown(names, title: str | None = None) -> list[str]:
    """The scenarios' descriptions as a Markdown table (a bold ``title`` above it, if given), each
    row an anchor the grids' rows link to (``what_anchor``); a control is its scenario without the fault."""
    note = "A scenario's control is the same without the fault."
    lines = [
        f"**{title}** ({note[0].lower()}{note[1:-1]})" if title else note,
        "",
        "| scenario | what it does | upstream |",
        "| --- | --- | --- |",
    ]
    for name in sorted(dict.fromkeys(names), key=scenario_order):
        lines.append(_md_row([f'<a id="{what_anchor(name)}"></a>{_md(name)}', _md(what(name)), _md(upstream(name))]))
    return [*lines, ""]


def figures_markdown(g: Grid, page: bool = False) -> list[str]:
    """A grid's figures as Markdown lines: a row per cell, its anchor the grid's link (a batched
    shape's with the batch sizes Triton formed, and their note). ``page``: in a page's fewer
    columns (``PAGE_FIGURES``), each row's id its ``page_anchor``."""
    head = (
        ([*PAGE_FIGURES[:2], BATCHES, *PAGE_FIGURES[2:]] if is_batched(g.shape) else PAGE_FIGURES)
        if page
        else figure_head(g)
    )
    lines = [f"**Figures: {grid_title(g)}**", "", _md_row(head), "|" + " --- |" * len(head)]
    rows = page_figure_rows(g) if page else [([aid], cols) for aid, cols in figure_rows(g)]
    for ids, cols in rows:
        lines.append(
            _md_row(["".join(f'<a id="{aid}"></a>' for aid in ids) + _md(cols[0]), *(_md(x) for x in cols[1:])])
        )
    lines.append("")
    if is_batched(g.shape):
        lines += [BATCH_NOTE, ""]
    return lines


def to_markdown(table: Conformance, level: int = 2) -> str:
    """The legend, then per API and shape a heading (``level``, the legend's too), its grid, its
    footnotes and its cells' figures (each row an anchor the grid links to); then what each
    scenario does (the grids' rows link to it) and where a shape moved a verdict."""
    h = "#" * level
    lines = [f"{h} Legend", "", *(line for text in legend() for line in (text, ""))]
    for g in table.grids:
        lines += [f"{h} {grid_title(g)}", "", *grid_markdown(g), *figures_markdown(g)]
    lines += [
        f"{h} What each scenario does",
        "",
        *descriptions_markdown(name for g in table.grids for name, _ in g.rows),
    ]
    if len({c.shape for c in table.cells}) > 1:
        lines.append(shape_moves_markdown(table.cells, level))
    return "\n".join(lines).rstrip() + "\n"


def grid_page(g: Grid, legend_link: str | None = None) -> str:
    """One API and shape on a page of its own (below its title): the key to its marks, its grid
    and footnotes, what its rows do, its cells' figures."""
    lines = [
        key_line(legend_link),
        "",
        *grid_markdown(g, page_anchor),
        *descriptions_markdown((name for name, _ in g.rows), "What each row does"),
        *figures_markdown(g, page=True),
    ]
    return "\n".join(lines).rstrip() + "\n"


def shape_moves_markdown(cell_list, level: int = 2) -> str:
    """``shape_moves`` as a Markdown section: the rows where a shape moved a verdict, then how many
    held."""
    rows = shape_moves(cell_list)
    h = "#" * level
    moved = [r for r in rows if r["moved"]]
    lines = [
        f"{h} Where the model shape moves a verdict",
        "",
        (
            f"Of {len(rows)} scenario cell(s) run in their default shape and in others on the same core and API, "
            f"{len(moved)} gave other verdicts in some shape{':' if moved else '.'}"
        ),
        "",
    ]
    if moved:
        lines += [
            "| scenario | API | Triton | default shape: verdicts | moved in | held in |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in moved:
            lines.append(
                f"| {_md(row_label(r['scenario'], r['control']))} | {r['engine']} | {r['triton_version']} | "
                f"{r['default']}: {' / '.join(r['verdicts'])} | "
                + _md("; ".join(f"{sh}: {' / '.join(v)}" for sh, v in r["moved"].items()))
                + f" | {', '.join(r['same']) or '—'} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"

"""The upgrade question in words (``rig.analysis.conformance.diff`` computes it): where each row
changed, its verdicts, the evidence, as Markdown (``rig report --conformance R --from A --to B``) and
as an HTML section (the report's page). Pure."""

from __future__ import annotations

import html

from rig.analysis.conformance import table as conformance
from rig.analysis.conformance.cells import Cell
from rig.analysis.conformance.diff import FIRST, FROM, TO, Api, Row, Upgrade
from rig.analysis.conformance.table import API_NAMES
from rig.analysis.conformance.text import upstream
from rig.common.text import md_cell
from rig.contract.ngc import PYTRITON_CORE
from rig.contract.verdicts import NOT_MEASURED
from rig.scenarios import catalog as scenarios
from rig.scenarios.known import intermittent

# --- words --------------------------------------------------------------------------------------------


def where_text(row: Row, down: bool = False) -> str:
    """Where a row's cell first changed: ``changed in 2.67.0``, or where the cores between were not
    run, ``changed between 2.55.0 and 2.60.0 (2.56.0, 2.57.0 not run)``."""
    v, last = row.changed.triton_version, row.last_same.triton_version
    if not row.gap:
        text = f"first differs on {v} (going down from {last})" if down else f"changed in {v}"
    else:
        text = f"{'differs' if down else 'changed'} between {last} and {v} ({', '.join(row.gap)} not run)"
    if row.bisected:  # a bisection named the commit
        text += f" (bisected: {row.bisected})"
    if row.settled is row.after:  # it moved twice: the second time on --to itself
        text += f"; again on {row.after.triton_version}"
    elif row.settled is not None:  # it moved twice: where the --to verdicts began
        text += f"; as on {row.after.triton_version} from {row.settled.triton_version} {'down' if down else 'on'}"
    return text


def verdicts_text(c: Cell, probed: bool = False) -> str:
    """A cell's majority verdicts (lifecycle / load / growth), ``n/N`` where its cycles disagree, a
    known race named, a finding said; ``probed``: the readiness a dead stub left too."""
    text = " / ".join(c.verdicts)
    if c.agreeing < c.cycles:
        text += f" ({c.agreeing}/{c.cycles} cycles)"
    if probed and c.probed:
        text += f"; {c.probed}"
    if intermittent(c.known):
        text += f"; known intermittent: {' / '.join(c.known)}"
    elif c.judgement == conformance.FINDING:
        text += f"; finding: {c.differing}/{c.cycles} differ from the known {' / '.join(c.known)}"
    return text


def _probes_differ(row: Row) -> bool:
    return len({c.probed for c in (row.before, row.changed, row.after)}) > 1


def _counts(d: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in d.items()) or "—"


def change_text(row: Row) -> str:
    """What moved between --from and --to: ``lifecycle clean → aborted_at_exit``, each verdict that did."""
    moved = [
        f"{what} {a} → {b}"
        for what, a, b in zip(("lifecycle", "load", "growth"), row.before.verdicts, row.after.verdicts)
        if a != b and not (what == "growth" and NOT_MEASURED in (a, b))
    ]  # an unmeasured growth differs from none
    if None not in (row.before.probed, row.after.probed) and row.before.probed != row.after.probed:
        moved.append(f"readiness {row.before.probed} → {row.after.probed}")
    return ", ".join(moved) or "the verdicts most cycles gave"


def changes(a: Api) -> list[tuple[str, int]]:
    """An API's rows counted by what moved, the most common first."""
    counted: dict[str, int] = {}
    for r in a.rows:
        counted[change_text(r)] = counted.get(change_text(r), 0) + 1
    return sorted(counted.items(), key=lambda kv: -kv[1])


def evidence(row: Row) -> list[tuple[str, Cell]]:
    """The cells a row's evidence shows, each with what it is: on --from, the first changed (where it
    is not --to), on --to."""
    if row.changed is row.after:
        return [(FROM, row.before), (f"{FIRST}, {TO}", row.after)]
    return [(FROM, row.before), (FIRST, row.changed), (TO, row.after)]


EVIDENCE = [
    "cell",
    "core",
    "",
    "cycles",
    "lifecycle",
    "load",
    "growth",
    "stop p50 s",
    "finalize before stop / expected",
    "runs",
]


def _evidence_rows(a: Api) -> list[list[str]]:
    out = []
    for r in a.rows:
        for what, c in evidence(r):
            life = _counts(c.lifecycle) + (f" ({c.probed} after the stub died)" if c.probed else "")
            out.append(
                [
                    f"{c.shape}, {c.label}",
                    c.triton_version,
                    what,
                    str(c.cycles),
                    life,
                    _counts(c.load),
                    _counts(c.growth),
                    "—" if c.stop_p50 is None else f"{c.stop_p50:.3f}",
                    "—" if not c.finalize_expected else f"{c.finalize_before}/{c.finalize_expected}",
                    ", ".join(c.run_ids),
                ]
            )
    return out


def _summary_rows(u: Upgrade, a: Api) -> tuple[list[str], list[list[str]]]:
    head = ["shape", "scenario", f"on {u.source}", f"on {u.target}", "where it changed", "upstream"]
    return head, [
        [
            r.before.shape,
            r.before.label,
            verdicts_text(r.before, _probes_differ(r)),
            verdicts_text(r.after, _probes_differ(r)),
            where_text(r, u.downgrade),
            upstream(r.before.scenario),
        ]
        for r in a.rows
    ]


def _only(u: Upgrade, a: Api) -> list[tuple[str, list[str], list[list[str]]]]:
    """The cells run on one side only: (caption, header, rows) per side."""
    out = []
    for side, other, cs in ((u.source, u.target, a.only_after), (u.target, u.source, a.only_before)):
        if cs:
            out.append(
                (
                    f"Not run on {side} through {a.engine} (run on {other} only)",
                    ["shape", "scenario", f"on {other}", "runs"],
                    [[c.shape, c.label, verdicts_text(c), ", ".join(c.run_ids)] for c in cs],
                )
            )
    return out


def _scenario_lines(a: Api) -> list[str]:
    """Each scenario of an API's rows (and cells on one side only), once: what it does."""
    names = dict.fromkeys([*(r.before.scenario for r in a.rows), *(c.scenario for c in a.only_before + a.only_after)])
    return [f"`{n}`: {scenario_text(n)}" for n in names]


def scenario_text(name: str) -> str:
    s = scenarios.SCENARIOS.get(name)
    return s.what if s is not None else "not a scenario of this rig"


def header(u: Upgrade) -> list[str]:
    """The lines that say what was compared: the cores (as asked where an alias named one), how many
    cells per API and how many differ, an API not run on one of the cores."""
    names = {"--from": u.source, "--to": u.target}
    asked = "; ".join(
        f"{o} {n}: "
        + (f"nvidia-pytriton {n}, whose core is Triton {names[o]}" if n in PYTRITON_CORE else f"Triton {names[o]}")
        for o, n in u.said.items()
    )
    lines = [
        f"{section_title(u)}"
        + (f" ({asked})" if asked else "")
        + ": "
        + (
            f"{u.compared} cell(s) run on both compared, "
            + (f"{u.differing} differ." if u.differing else "none differs.")
            if u.apis
            else "nothing to compare."
        )
    ]
    per = [
        f"{API_NAMES.get(a.engine, a.engine)}: {a.compared} compared, {len(a.rows)} differ"
        + (f", {len(a.only_before)} run on {u.source} only" if a.only_before else "")
        + (f", {len(a.only_after)} run on {u.target} only" if a.only_after else "")
        for a in u.apis
    ]
    per += [
        f"{API_NAMES.get(e, e)}: no cycle on {' or '.join(lacks)} (it ran on {_span(cores)}), not compared"
        for e, (lacks, cores) in u.absent.items()
    ]
    return lines + per


def _span(cores) -> str:
    return cores[0] if len(cores) == 1 else f"{len(cores)} cores, {cores[0]} to {cores[-1]}"


def follow(u: Upgrade) -> str:
    """How a reader follows a run id."""
    return (
        f"A run's cycles: `rig report --conformance {u.results} --where run_id=RUN_ID` (its cell's figures) "
        f"or `rig report {u.results} --where run_id=RUN_ID --out run.html` (its whole report); "
        "several: `--where run_id=ID1,ID2`."
    )


NOTE = (
    "Verdicts: lifecycle / load / growth, as most of a cell's cycles gave them (n/N where its cycles disagree); "
    "a known intermittent cell gives either of two verdicts, each cycle one of them, so a difference there may be "
    "the race's draw. Where it changed: the first core, walking the cores run from --from towards --to, whose "
    "verdicts differ from --from's; releases between that were not run are named."
)


def _none_text(u: Upgrade, a: Api) -> str:
    return f"No cell differs between {u.source} and {u.target} through {a.engine} ({a.compared} compared)."


def _changes_text(a: Api) -> str:
    return "What moved: " + "; ".join(f"{text} ({n})" for text, n in changes(a)) + "."


# --- Markdown -------------------------------------------------------------------------------------------


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(md_cell(x) for x in head) + " |",
        "|" + " --- |" * len(head),
        *("| " + " | ".join(md_cell(x) for x in r) + " |" for r in rows),
    ]


def to_markdown(u: Upgrade, level: int = 1) -> str:
    """The comparison in Markdown: the header, then per API the rows that differ (what moved, where),
    their evidence, the cells run on one side only and what each scenario does."""
    h = "#" * level
    head = header(u)
    lines = [f"{h} {section_title(u)}: {u.results}", "", head[0], "", *(f"- {x}" for x in head[1:]), ""]
    if u.differing:
        lines += [NOTE, ""]
    for a in u.apis:
        lines += [f"{h}# {API_NAMES.get(a.engine, a.engine)}", ""]
        if not a.rows:
            lines += [_none_text(u, a), ""]
        else:
            lines += [
                f"{len(a.rows)} of {a.compared} cell(s) differ. {_changes_text(a)}",
                "",
                *_md_table(*_summary_rows(u, a)),
                "",
                f"**Evidence: {a.engine}**",
                "",
                *_md_table(EVIDENCE, _evidence_rows(a)),
                "",
            ]
        for caption, head_, rows in _only(u, a):
            lines += [f"**{caption}**", "", *_md_table(head_, rows), ""]
        if a.rows or a.only_before or a.only_after:
            lines += [*(f"- {x}" for x in _scenario_lines(a)), ""]
    if any(a.rows or a.only_before or a.only_after for a in u.apis):
        lines += [follow(u), ""]
    return "\n".join(lines).rstrip() + "\n"


# --- HTML -----------------------------------------------------------------------------------------------


def _inline(text: str) -> str:
    """Markdown's backticks as <code>, the rest escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _table(head: list[str], rows: list[list[str]], caption: str = "") -> str:
    cap = f"<caption>{_inline(caption)}</caption>" if caption else ""
    return (
        f'<table class="cf-figures">{cap}<thead><tr>'
        + "".join(f"<th>{html.escape(x)}</th>" for x in head)
        + "</tr></thead><tbody>"
        + "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>" for r in rows)
        + "</tbody></table>"
    )


def to_html(u: Upgrade, level: int = 3) -> str:
    """The same as ``to_markdown``, as an HTML fragment for the report's page (whose section title
    says the two cores)."""
    head = header(u)
    out = [
        '<div class="conformance upgrade">',
        f'<p class="note">{_inline(head[0])}</p>',
        "<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in head[1:]) + "</ul>",
    ]
    if u.differing:
        out.append(f'<p class="note">{_inline(NOTE)}</p>')
    for a in u.apis:
        out.append(f"<h{level}>{_inline(API_NAMES.get(a.engine, a.engine))}</h{level}>")
        if not a.rows:
            out.append(f'<p class="note">{_inline(_none_text(u, a))}</p>')
        else:
            out.append(f'<p class="note">{_inline(_changes_text(a))}</p>')
            out.append(_table(*_summary_rows(u, a), f"{len(a.rows)} of {a.compared} cell(s) differ"))
            out.append(_table(EVIDENCE, _evidence_rows(a), f"Evidence: {a.engine}"))
        for caption, head_, rows in _only(u, a):
            out.append(_table(head_, rows, caption))
        if a.rows or a.only_before or a.only_after:
            out.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in _scenario_lines(a)) + "</ul>")
    if any(a.rows or a.only_before or a.only_after for a in u.apis):
        out.append(f'<p class="note">{_inline(follow(u))}</p>')
    out.append("</div>")
    return "\n".join(out) + "\n"


def section_title(u: Upgrade) -> str:
    return f"{'Downgrade' if u.downgrade else 'Upgrade'} from {u.source} to {u.target}"

"""The upgrade question in words (``rig.analysis.conformance.diff`` computes it): what changed, one
line a cause (``rig.analysis.conformance.causes``), then the cells under each cause, the changes of
rate no test calls significant, and per API the evidence; as Markdown (``rig report --conformance R
--from A --to B``), as an HTML section (the report's page) and as a JSON summary (``to_summary``):
three renderings of the one ``Upgrade``, whose causes are computed once. Pure."""

from __future__ import annotations

import dataclasses
import html

from rig.analysis.conformance import causes as cc
from rig.analysis.conformance import table as conformance
from rig.analysis.conformance.cells import Cell
from rig.analysis.conformance.changes import commits_text
from rig.analysis.conformance.diff import FIRST, FROM, TO, Api, Row, Upgrade
from rig.analysis.conformance.rates import BUDGET
from rig.analysis.conformance.table import API_NAMES
from rig.analysis.conformance.text import upstream
from rig.analysis.release_order import not_run_text
from rig.common.text import md_cell
from rig.contract.ngc import PYTRITON_CORE
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
        text = f"{'differs' if down else 'changed'} between {last} and {v} ({not_run_text(row.gap)})"
    if row.bisected:  # a bisection named the commit
        text += f" (bisected: {commits_text(row.bisected)})"
    if row.settled is row.after:  # it moved twice: the second time on --to itself
        text += f"; again on {row.after.triton_version}"
    elif row.settled is not None:  # it moved twice: where the --to verdicts began
        text += f"; as on {row.after.triton_version} from {row.settled.triton_version} {'down' if down else 'on'}"
    return text


def verdicts_text(c: Cell, probed: bool = False) -> str:
    """A cell's majority verdicts (lifecycle / load / growth) and the cycles that gave them, ``k/n``
    (and each other's where its cycles disagree), a known race named, a finding said; ``probed``:
    the readiness a dead stub left too."""
    text = " / ".join(c.verdicts) + f" ({c.agreeing}/{c.cycles}"
    top = " / ".join(c.verdicts)
    others = sorted(((v, n) for v, n in c.got.items() if v != top), key=lambda vn: (-vn[1], vn[0]))
    text += "".join(f"; {v} {n}/{c.cycles}" for v, n in others) + ")"
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
    return cc.move_text(cc.move_of(row.before, row.after))


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


def _step_text(u: Upgrade, st: cc.Step) -> str:
    """A cell's change under its cause: the two cores and their verdicts where they are not --from's
    and --to's, the rate and what the test says of it."""
    parts = []
    differ = verdicts_text(st.last) != verdicts_text(st.before) or verdicts_text(st.changed) != verdicts_text(st.after)
    if differ:
        parts.append(
            f"{st.last.triton_version}: {verdicts_text(st.last)} → {st.changed.triton_version}: "
            f"{verdicts_text(st.changed)}"
        )
    if st.rate is not None:
        parts.append(f"{st.rate.text()}, {st.rate.judged()}")
    return "; ".join(parts) or "—"


def _also(u: Upgrade, c: cc.Cause, st: cc.Step) -> str:
    other = [n for n in cc.causes_of(st.key, u.causes) if n != c.number]
    at = {x.number: x.window for x in u.causes}
    return ", ".join(f"cause {n} ({at[n]})" for n in other) or "—"


CAUSE_HEAD = ["API", "shape", "scenario", "on {source}", "on {target}", "at this change", "also under", "upstream"]


def _cause_rows(u: Upgrade, c: cc.Cause) -> tuple[list[str], list[list[str]]]:
    head = [h.format(source=u.source, target=u.target) for h in CAUSE_HEAD]
    return head, [
        [
            st.key[0],
            st.key[1],
            st.label,
            verdicts_text(st.before, _step_probes(st)),
            verdicts_text(st.after, _step_probes(st)),
            _step_text(u, st),
            _also(u, c, st),
            upstream(st.before.scenario),
        ]
        for st in c.steps
    ]


def _step_probes(st: cc.Step) -> bool:
    return len({x.probed for x in (st.before, st.last, st.changed, st.after)}) > 1


def cause_title(c: cc.Cause) -> str:
    """A cause's heading: its number, window and source (or what it did)."""
    return f"{c.number}. {c.window}: {cc.who(c) or cc.what(c)}"


UNSETTLED_HEAD = ["API", "shape", "scenario", "between", "rate", "test"]


def _unsettled_rows(u: Upgrade) -> list[list[str]]:
    return [
        [
            st.key[0],
            st.key[1],
            st.label,
            f"{st.last.triton_version} and {st.changed.triton_version}",
            st.rate.text() if st.rate else "—",
            st.rate.judged() if st.rate else "—",
        ]
        for st in u.unsettled
    ]


def what_changed(u: Upgrade) -> list[str]:
    """What changed, one line a cause, after the headline (``from 2.67.0 to 2.70.0: 3 causes
    explain 116 cells``)."""
    if not u.causes:
        return []
    return [cc.headline(u.causes, u.differing, u.source, u.target), *(cc.cause_line(c) for c in u.causes)]


def _rated(u: Upgrade) -> bool:
    """Whether anything the comparison says is a rate."""
    return bool(u.unsettled) or any(st.rate is not None for c in u.causes for st in c.steps)


def rates_note(u: Upgrade) -> str:
    """How rates are read, and how many changes of rate no test calls significant."""
    text = (
        f"Rates: k/n, the cycles of a cell that gave a verdict, pooled over its runs. A change of rate between two "
        f"cores walked one after the other is tested by Fisher's exact test (two-sided, α = {u.alpha:g}, each "
        "comparison alone); a significant one is a cause of its own."
    )
    if u.unsettled:
        text += (
            f" {len(u.unsettled)} change(s) of rate no test calls significant are listed after the causes, each with "
            f"the cycles more a side that would tell, were the rates seen to hold (up to {BUDGET})."
        )
    return text


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
    "Verdicts: lifecycle / load / growth, as most of a cell's cycles gave them, with k/n, the cycles that gave "
    "them (and each other verdicts' where its cycles disagree); a known intermittent cell gives either of two "
    "verdicts, each cycle one of them, so a difference there may be the race's draw. A cause: the cells whose "
    "verdicts moved alike between the same two cores, walking the cores run from --from towards --to (the "
    "releases between them that were not run named); a bisection of any one of them names the commit for all; "
    "a cell that changed more than once is under each of its causes."
)


def _none_text(u: Upgrade, a: Api) -> str:
    return f"No cell differs between {u.source} and {u.target} through {a.engine} ({a.compared} compared)."


# --- Markdown -------------------------------------------------------------------------------------------


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(md_cell(x) for x in head) + " |",
        "|" + " --- |" * len(head),
        *("| " + " | ".join(md_cell(x) for x in r) + " |" for r in rows),
    ]


def to_markdown(u: Upgrade, level: int = 1) -> str:
    """The comparison in Markdown: the header, what changed (a line a cause), the cells under each
    cause, the changes of rate not significant, then per API the evidence, the cells run on one side
    only and what each scenario does."""
    h = "#" * level
    head = header(u)
    lines = [f"{h} {section_title(u)}: {u.results}", "", head[0], "", *(f"- {x}" for x in head[1:]), ""]
    said = what_changed(u)
    if said:
        lines += [f"{h}# What changed", "", said[0][:1].upper() + said[0][1:] + ".", ""]
        lines += [*(f"{i}. {x}" for i, x in enumerate(said[1:], 1)), ""]
    if u.differing:
        lines += [NOTE, ""]
    if _rated(u):
        lines += [rates_note(u), ""]
    for c in u.causes:
        lines += [f"{h}# {cause_title(c)}", "", cc.cause_line(c), "", *_md_table(*_cause_rows(u, c)), ""]
    if u.unsettled:
        lines += [f"{h}# Rates that moved, not significant at α = {u.alpha:g}", ""]
        lines += [*_md_table(UNSETTLED_HEAD, _unsettled_rows(u)), ""]
    for a in u.apis:
        lines += [f"{h}# {API_NAMES.get(a.engine, a.engine)}", ""]
        if not a.rows:
            lines += [_none_text(u, a), ""]
        else:
            lines += [
                f"{len(a.rows)} of {a.compared} cell(s) differ.",
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
    said = what_changed(u)
    if said:
        out.append(f"<h{level}>What changed</h{level}>")
        out.append(f'<p class="note">{_inline(said[0][:1].upper() + said[0][1:])}.</p>')
        out.append("<ol>" + "".join(f"<li>{_inline(x)}</li>" for x in said[1:]) + "</ol>")
    if u.differing:
        out.append(f'<p class="note">{_inline(NOTE)}</p>')
    if _rated(u):
        out.append(f'<p class="note">{_inline(rates_note(u))}</p>')
    for c in u.causes:
        out.append(f"<h{level}>{_inline(cause_title(c))}</h{level}>")
        out.append(f'<p class="note">{_inline(cc.cause_line(c))}</p>')
        out.append(_table(*_cause_rows(u, c), f"{c.cells} cell(s) under cause {c.number}"))
    if u.unsettled:
        out.append(f"<h{level}>Rates that moved, not significant at α = {u.alpha:g}</h{level}>")
        out.append(_table(UNSETTLED_HEAD, _unsettled_rows(u)))
    for a in u.apis:
        out.append(f"<h{level}>{_inline(API_NAMES.get(a.engine, a.engine))}</h{level}>")
        if not a.rows:
            out.append(f'<p class="note">{_inline(_none_text(u, a))}</p>')
        else:
            out.append(_table(EVIDENCE, _evidence_rows(a), f"{len(a.rows)} of {a.compared} cell(s) differ: evidence"))
        for caption, head_, rows in _only(u, a):
            out.append(_table(head_, rows, caption))
        if a.rows or a.only_before or a.only_after:
            out.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in _scenario_lines(a)) + "</ul>")
    if any(a.rows or a.only_before or a.only_after for a in u.apis):
        out.append(f'<p class="note">{_inline(follow(u))}</p>')
    out.append("</div>")
    return "\n".join(out) + "\n"


# --- JSON -----------------------------------------------------------------------------------------------


def _cell_summary(c: Cell) -> dict:
    return {
        "triton_version": c.triton_version,
        "verdicts": list(c.verdicts),
        "agreeing": c.agreeing,
        "cycles": c.cycles,
        "got": dict(c.got),
        "known": list(c.known) if c.known is not None else None,
        "probed": c.probed,
        "run_ids": list(c.run_ids),
    }


def _step_summary(u: Upgrade, st: cc.Step) -> dict:
    engine, shape, scenario, control = st.key
    return {
        "engine": engine,
        "shape": shape,
        "scenario": scenario,
        "control": control,
        "from": _cell_summary(st.before),
        "to": _cell_summary(st.after),
        "last_same": _cell_summary(st.last),
        "changed": _cell_summary(st.changed),
        "rate": st.rate.summary() if st.rate is not None else None,
        "causes": cc.causes_of(st.key, u.causes),
    }


def _cause_summary(u: Upgrade, c: cc.Cause) -> dict:
    b = c.bisection
    return {
        "number": c.number,
        "kind": c.kind,
        "line": cc.cause_line(c),
        "window": {"last_same": c.last, "changed": c.changed, "said": c.window, "not_run": list(c.gap)},
        "moves": [{"move": [list(m) for m in move], "said": cc.move_text(move), "cells": n} for move, n in c.moves],
        "commits": [dataclasses.asdict(x) for x in b.commits] if b is not None else [],
        "commits_said": commits_text(b.commits) if b is not None else None,
        "bisected_on": None
        if b is None
        else {
            "scenario": b.scenario,
            "control": b.control,
            "shape": b.shape,
            "engine": b.engine,
            "good": b.good,
            "bad": b.bad,
            "run_id": b.run_id,
            "said": b.cell,
        },
        "not_bisected": c.not_bisected or None,
        "bindings": c.bindings or None,
        "rate": c.rate.summary() if c.rate is not None else None,
        "cells": c.cells,
        "by_api": c.by_api,
        "steps": [_step_summary(u, st) for st in c.steps],
    }


def to_summary(u: Upgrade) -> dict:
    """The comparison as plain data (``rig report --summary-json FILE``): what was compared, the
    headline and each cause (its line as the Markdown and the HTML say it, its window, moves,
    commits, cells), the changes of rate not significant, per API the counts. JSON-ready."""
    said = what_changed(u)
    return {
        "from": u.source,
        "to": u.target,
        "said": dict(u.said),
        "downgrade": u.downgrade,
        "results": u.results,
        "compared": u.compared,
        "differing": u.differing,
        "alpha": u.alpha,
        "headline": said[0] if said else None,
        "apis": [
            {
                "engine": a.engine,
                "compared": a.compared,
                "differing": len(a.rows),
                "only_from": len(a.only_before),
                "only_to": len(a.only_after),
            }
            for a in u.apis
        ],
        "absent": {e: {"lacks": list(lacks), "cores": list(cores)} for e, (lacks, cores) in u.absent.items()},
        "causes": [_cause_summary(u, c) for c in u.causes],
        "unsettled_rates": [_step_summary(u, st) for st in u.unsettled],
    }


def section_title(u: Upgrade) -> str:
    return f"{'Downgrade' if u.downgrade else 'Upgrade'} from {u.source} to {u.target}"

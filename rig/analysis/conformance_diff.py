"""The upgrade question: of the conformance table (``rig.analysis.conformance``), the cells that
differ between two cores, per API and model shape, scenario and control.

``upgrade`` compares the cells of one Triton version (``--from``) with those of another (``--to``):
each (API, shape, scenario, control) run on both whose verdicts (the cells' majority, and the
readiness a dead stub left: ``conformance.same_cell``) differ is a row, with the core in between
where it first changed (walking the cores run in version order, from ``--from`` towards ``--to``)
and the releases of that gap that were not run; cells run on one side only are listed apart.
``to_markdown`` (``rig report --conformance R --from A --to B``) and ``to_html`` (the report's page)
render it. Pure: no Triton, no store.
"""

from __future__ import annotations

import dataclasses
import html
import re

from rig.analysis import conformance
from rig.analysis.conformance import API_NAMES, Cell, same_cell, version_key
from rig.analysis.conformance_text import upstream
from rig.build.releases import BRANCHES
from rig.common.errors import RigError
from rig.common.text import md_cell
from rig.contract.ngc import PYTRITON_CORE
from rig.contract.verdicts import NOT_MEASURED
from rig.parent import scenarios
from rig.parent.known import intermittent

FROM, FIRST, TO = "from", "first changed", "to"


@dataclasses.dataclass(frozen=True)
class Row:
    """One scenario (or its control), API and shape whose cell differs between the two cores."""

    before: Cell                 # on --from
    after: Cell                  # on --to
    changed: Cell                # the first core, walking from --from towards --to, that differs from ``before``
    last_same: Cell              # the core walked just before ``changed`` (``before`` itself where adjacent)
    gap: tuple[str, ...]         # the releases between ``last_same`` and ``changed`` with no cycle of this row
    settled: Cell | None = None  # where it moved twice: the first core from which every one walked gives ``after``'s

    @property
    def key(self) -> tuple[str, str, str, bool]:
        return self.before.engine, self.before.shape, self.before.scenario, self.before.control


@dataclasses.dataclass(frozen=True)
class Api:
    """One API's side of the comparison."""

    engine: str
    compared: int                # rows with a cell on both cores
    rows: tuple[Row, ...]        # those that differ
    only_before: tuple[Cell, ...]  # cells run on --from only
    only_after: tuple[Cell, ...]   # cells run on --to only


@dataclasses.dataclass(frozen=True)
class Upgrade:
    source: str                  # the Triton version upgraded from (--from)
    target: str                  # and to (--to)
    said: dict                   # {"--from": text given, ...} where the text was not the Triton version itself
    apis: tuple[Api, ...]
    absent: dict                 # engine -> (the cores of source, target it has no cycle on, its cores)
    results: str                 # the results folder, as the commands to follow a run name it

    @property
    def downgrade(self) -> bool:
        return version_key(self.target) < version_key(self.source)

    @property
    def compared(self) -> int:
        return sum(a.compared for a in self.apis)

    @property
    def differing(self) -> int:
        return sum(len(a.rows) for a in self.apis)


# --- names ------------------------------------------------------------------------------------------

def triton_version(name: str) -> str:
    """The Triton version a name says: itself (``2.48.0``; ``2.48`` is ``2.48.0``, ``v2.48.0`` too),
    the core of an nvidia-pytriton release (``0.5.10`` -> ``2.48.0``), or a release branch's
    (``r26.03`` -> ``2.67.0``)."""
    text = name.strip().removeprefix("v")
    if text in PYTRITON_CORE:
        return PYTRITON_CORE[text]
    if text in BRANCHES:
        return BRANCHES[text]
    return text + ".0" if re.fullmatch(r"2\.\d+", text) else text


def _listed(values) -> str:
    return ", ".join(values) or "none"


def _split(values, whole=()) -> list[str]:
    """Repeated or comma-separated values; a shape of two parts joined with ``+`` (as ``rig matrix
    --shapes`` takes it: ``decoupled+instances-2``), its name's comma being the list's, or given as
    it is named where it is one of ``whole``."""
    return [v.strip().replace("+", ",") for text in values or ()
            for v in ([text] if text in whole else str(text).split(",")) if v.strip()]


def _narrow(cells: list[Cell], option: str, field: str, given, order, results: str, known=()) -> list[Cell]:
    present = sorted({getattr(c, field) for c in cells}, key=order)
    wanted = _split(given, present)
    if not wanted:
        return cells
    for w in wanted:
        if w not in present:
            what = f"the rig's {field} {w} never ran" if w in known else f"no {field} {w}"
            raise RigError(f"{option} {w}: {what} in {results}, whose scenario cycles hold {field}s "
                           f"{_listed(p.replace(',', '+') for p in present)}")
    return [c for c in cells if getattr(c, field) in wanted]


def _resolve(option: str, name: str, present: list[str], results: str, narrowed: str) -> str:
    v = triton_version(name)
    if v not in present:
        said = "" if v == name.strip() else f" (Triton {v})"
        raise RigError(f"{option} {name}{said}: no scenario cycle of that core in {results}{narrowed}, which holds "
                       f"Triton {_listed(present)}")
    return v


def _scenario_order(name: str) -> tuple:
    """The registry's order (``rig scenarios``), a name it does not hold after."""
    names = list(scenarios.SCENARIOS)
    return (names.index(name), "") if name in names else (len(names), name)


releases = conformance.releases


# --- the comparison ---------------------------------------------------------------------------------

def upgrade(table, source: str, target: str, scenario=None, shape=None, engine=None, results: str = "R") -> Upgrade:
    """The cells of ``table`` (a ``conformance.Conformance`` or a cycles frame) that differ between
    Triton ``source`` and ``target`` (either may name an nvidia-pytriton release or a release branch:
    said back as the Triton version). ``scenario``, ``shape``, ``engine``: lists (each item may hold
    several, comma-separated) that narrow it. A name the results do not hold is a ``RigError`` that
    says what they hold. ``target`` older than ``source`` is a downgrade: the walk goes down."""
    if not isinstance(table, conformance.Conformance):
        table = conformance.build(table)
    cells = list(table.cells)
    if not cells:
        raise RigError(f"{results} holds no scenario cycles: run rig matrix --scenarios all (or rig soak --scenario "
                       f"NAME) with --results {results}")
    cells = _narrow(cells, "--engine", "engine", engine, conformance.engine_order, results, API_NAMES)
    cells = _narrow(cells, "--shape", "shape", shape, conformance.shape_order, results)
    cells = _narrow(cells, "--scenario", "scenario", scenario, _scenario_order, results,
                    scenarios.SCENARIOS)
    narrowing = [f"{o} {','.join(g)}" for o, g in (("--engine", engine), ("--shape", shape),
                                                     ("--scenario", scenario)) if g]
    narrowed = f" narrowed to {', '.join(narrowing)}" if narrowing else ""
    present = sorted({c.triton_version for c in cells}, key=version_key)
    src = _resolve("--from", source, present, results, narrowed)
    dst = _resolve("--to", target, present, results, narrowed)
    if src == dst:
        raise RigError(f"--from {source} and --to {target} are the same core, Triton {src}: give two")
    said = {o: n for o, n, v in (("--from", source, src), ("--to", target, dst)) if n.strip() != v}
    known = releases(c.triton_version for c in table.cells)
    apis, absent = [], {}
    for eng in sorted({c.engine for c in cells}, key=conformance.engine_order):
        mine = [c for c in cells if c.engine == eng]
        cores = tuple(sorted({c.triton_version for c in mine}, key=version_key))
        lacks = tuple(v for v in (src, dst) if v not in cores)
        if lacks:
            absent[eng] = (lacks, cores)
            continue
        apis.append(_api(eng, mine, src, dst, known))
    return Upgrade(src, dst, said, tuple(apis), absent, results)


def _api(engine: str, cells: list[Cell], src: str, dst: str, known: list[str]) -> Api:
    series: dict[tuple, dict[str, Cell]] = {}
    for c in cells:
        series.setdefault((c.shape, c.scenario, c.control), {})[c.triton_version] = c
    down = version_key(dst) < version_key(src)
    lo, hi = sorted((src, dst), key=version_key)
    rows, only_before, only_after, compared = [], [], [], 0
    for key in sorted(series, key=lambda k: (conformance.shape_order(k[0]), _scenario_order(k[1]), k[2])):
        by = series[key]
        if src not in by or dst not in by:
            if src in by:
                only_before.append(by[src])
            elif dst in by:
                only_after.append(by[dst])
            continue
        compared += 1
        before, after = by[src], by[dst]
        if same_cell(before, after):
            continue
        walk = sorted((v for v in by if version_key(lo) <= version_key(v) <= version_key(hi)), key=version_key,
                      reverse=down)
        last, changed = before, after
        for v in walk[1:]:
            if not same_cell(before, by[v]):
                changed = by[v]
                break
            last = by[v]
        a, b = sorted((last.triton_version, changed.triton_version), key=version_key)
        gap = [v for v in known if version_key(a) < version_key(v) < version_key(b)]
        settled = after
        for v in reversed(walk[:-1]):
            if not same_cell(after, by[v]):
                break
            settled = by[v]
        rows.append(Row(before, after, changed, last, tuple(reversed(gap)) if down else tuple(gap),
                        None if settled is changed else settled))
    return Api(engine, compared, tuple(rows), tuple(only_before), tuple(only_after))


# --- words --------------------------------------------------------------------------------------------

def where_text(row: Row, down: bool = False) -> str:
    """Where a row's cell first changed: ``changed in 2.67.0``, or where the cores between were not
    run, ``changed between 2.55.0 and 2.60.0 (2.56.0, 2.57.0 not run)``."""
    v, last = row.changed.triton_version, row.last_same.triton_version
    if not row.gap:
        text = f"first differs on {v} (going down from {last})" if down else f"changed in {v}"
    else:
        text = f"{'differs' if down else 'changed'} between {last} and {v} ({', '.join(row.gap)} not run)"
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
    moved = [f"{what} {a} → {b}" for what, a, b in zip(("lifecycle", "load", "growth"), row.before.verdicts,
                                                        row.after.verdicts) if a != b
             and not (what == "growth" and NOT_MEASURED in (a, b))]  # an unmeasured growth differs from none
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


EVIDENCE = ["cell", "core", "", "cycles", "lifecycle", "load", "growth", "stop p50 s",
            "finalize before stop / expected", "runs"]


def _evidence_rows(a: Api) -> list[list[str]]:
    out = []
    for r in a.rows:
        for what, c in evidence(r):
            life = _counts(c.lifecycle) + (f" ({c.probed} after the stub died)" if c.probed else "")
            out.append([f"{c.shape}, {c.label}", c.triton_version, what, str(c.cycles), life, _counts(c.load),
                        _counts(c.growth), "—" if c.stop_p50 is None else f"{c.stop_p50:.3f}",
                        "—" if not c.finalize_expected else f"{c.finalize_before}/{c.finalize_expected}",
                        ", ".join(c.run_ids)])
    return out


def _summary_rows(u: Upgrade, a: Api) -> tuple[list[str], list[list[str]]]:
    head = ["shape", "scenario", f"on {u.source}", f"on {u.target}", "where it changed", "upstream"]
    return head, [[r.before.shape, r.before.label, verdicts_text(r.before, _probes_differ(r)),
                   verdicts_text(r.after, _probes_differ(r)), where_text(r, u.downgrade), upstream(r.before.scenario)]
                  for r in a.rows]


def _only(u: Upgrade, a: Api) -> list[tuple[str, list[str], list[list[str]]]]:
    """The cells run on one side only: (caption, header, rows) per side."""
    out = []
    for side, other, cs in ((u.source, u.target, a.only_after), (u.target, u.source, a.only_before)):
        if cs:
            out.append((f"Not run on {side} through {a.engine} (run on {other} only)",
                        ["shape", "scenario", f"on {other}", "runs"],
                        [[c.shape, c.label, verdicts_text(c), ", ".join(c.run_ids)] for c in cs]))
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
    asked = "; ".join(f"{o} {n}: " + (f"nvidia-pytriton {n}, whose core is Triton {names[o]}" if n in PYTRITON_CORE
                                      else f"Triton {names[o]}") for o, n in u.said.items())
    lines = [f"{section_title(u)}" + (f" ({asked})" if asked else "") + ": "
             + (f"{u.compared} cell(s) run on both compared, "
                + (f"{u.differing} differ." if u.differing else "none differs.") if u.apis else "nothing to compare.")]
    per = [f"{API_NAMES.get(a.engine, a.engine)}: {a.compared} compared, {len(a.rows)} differ"
           + (f", {len(a.only_before)} run on {u.source} only" if a.only_before else "")
           + (f", {len(a.only_after)} run on {u.target} only" if a.only_after else "") for a in u.apis]
    per += [f"{API_NAMES.get(e, e)}: no cycle on {' or '.join(lacks)} (it ran on {_span(cores)}), not compared"
            for e, (lacks, cores) in u.absent.items()]
    return lines + per


def _span(cores) -> str:
    return cores[0] if len(cores) == 1 else f"{len(cores)} cores, {cores[0]} to {cores[-1]}"


def follow(u: Upgrade) -> str:
    """How a reader follows a run id."""
    return (f"A run's cycles: `rig report --conformance {u.results} --where run_id=RUN_ID` (its cell's figures) "
            f"or `rig report {u.results} --where run_id=RUN_ID --out run.html` (its whole report); "
            "several: `--where run_id=ID1,ID2`.")


NOTE = ("Verdicts: lifecycle / load / growth, as most of a cell's cycles gave them (n/N where its cycles disagree); "
        "a known intermittent cell gives either of two verdicts, each cycle one of them, so a difference there may be "
        "the race's draw. Where it changed: the first core, walking the cores run from --from towards --to, whose "
        "verdicts differ from --from's; releases between that were not run are named.")


def _none_text(u: Upgrade, a: Api) -> str:
    return f"No cell differs between {u.source} and {u.target} through {a.engine} ({a.compared} compared)."


def _changes_text(a: Api) -> str:
    return "What moved: " + "; ".join(f"{text} ({n})" for text, n in changes(a)) + "."


# --- Markdown -------------------------------------------------------------------------------------------

def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(md_cell(x) for x in head) + " |", "|" + " --- |" * len(head),
            *("| " + " | ".join(md_cell(x) for x in r) + " |" for r in rows)]


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
            lines += [f"{len(a.rows)} of {a.compared} cell(s) differ. {_changes_text(a)}", "",
                      *_md_table(*_summary_rows(u, a)), "", f"**Evidence: {a.engine}**", "",
                      *_md_table(EVIDENCE, _evidence_rows(a)), ""]
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
    return (f'<table class="cf-figures">{cap}<thead><tr>' + "".join(f"<th>{html.escape(x)}</th>" for x in head)
            + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>"
                                               for r in rows) + "</tbody></table>")


def to_html(u: Upgrade, level: int = 3) -> str:
    """The same as ``to_markdown``, as an HTML fragment for the report's page (whose section title
    says the two cores)."""
    head = header(u)
    out = ['<div class="conformance upgrade">', f'<p class="note">{_inline(head[0])}</p>',
           "<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in head[1:]) + "</ul>"]
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


def default_span(table) -> tuple[str, str] | None:
    """The oldest and the newest core of a table's cells (None where they are one)."""
    cores = sorted({c.triton_version for c in table.cells}, key=version_key)
    return (cores[0], cores[-1]) if len(cores) > 1 else None

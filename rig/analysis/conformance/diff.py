"""The upgrade question: of the conformance table (``rig.analysis.conformance.table``), the cells that
differ between two cores, per API and model shape, scenario and control.

``upgrade`` compares the cells of one Triton version (``--from``) with those of another (``--to``):
each (API, shape, scenario, control) run on both whose verdicts (the cells' majority, and the
readiness a dead stub left: ``changes.same_cell``) differ is a row, with the core in between
where it first changed (walking the cores run in version order, from ``--from`` towards ``--to``)
and the releases of that gap that were not run; cells run on one side only are listed apart. The
rows are then grouped by cause (``rig.analysis.conformance.causes``: one change of verdicts in one
window, named by the commit a bisection of any of its cells found, or a change of the official
API's bindings, or a significant change of rate), computed once here for every rendering.
``rig.analysis.conformance.diff_text`` renders it (``to_markdown``: ``rig report --conformance R
--from A --to B``; ``to_html``: the report's page). Pure: no Triton, no store.
"""

from __future__ import annotations

import dataclasses

from rig.analysis.conformance import table as conformance
from rig.analysis.conformance.causes import Cause, Step, group, walk_steps
from rig.analysis.conformance.cells import Cell
from rig.analysis.conformance.changes import Commit, bisected, same_cell
from rig.analysis.conformance.order import engine_order, scenario_order, shape_order
from rig.analysis.conformance.rates import ALPHA
from rig.analysis.conformance.table import API_NAMES, version_key
from rig.common.errors import RigError
from rig.runtimes.from_source.identity import is_variant
from rig.scenarios import catalog as scenarios

FROM, FIRST, TO = "from", "first changed", "to"


@dataclasses.dataclass(frozen=True)
class Row:
    """One scenario (or its control), API and shape whose cell differs between the two cores."""

    before: Cell  # on --from
    after: Cell  # on --to
    changed: Cell  # the first core, walking from --from towards --to, that differs from ``before``
    last_same: Cell  # the core walked just before ``changed`` (``before`` itself where adjacent)
    gap: tuple[str, ...]  # the releases between ``last_same`` and ``changed`` with no cycle of this row
    settled: Cell | None = None  # where it moved twice: the first core from which every one walked gives ``after``'s
    bisected: tuple[Commit, ...] = ()  # the commits a decided bisection named for the change (changes.bisected)

    @property
    def key(self) -> tuple[str, str, str, bool]:
        return self.before.engine, self.before.shape, self.before.scenario, self.before.control


@dataclasses.dataclass(frozen=True)
class Api:
    """One API's side of the comparison."""

    engine: str
    compared: int  # rows with a cell on both cores
    rows: tuple[Row, ...]  # those that differ
    only_before: tuple[Cell, ...]  # cells run on --from only
    only_after: tuple[Cell, ...]  # cells run on --to only
    steps: tuple[Step, ...] = ()  # where each row compared changed: verdicts, rates (causes.walk_steps)


@dataclasses.dataclass(frozen=True)
class Upgrade:
    source: str  # the Triton version upgraded from (--from)
    target: str  # and to (--to)
    said: dict  # {"--from": text given, ...} where the text was not the Triton version itself
    apis: tuple[Api, ...]
    absent: dict  # engine -> (the cores of source, target it has no cycle on, its cores)
    results: str  # the results folder, as the commands to follow a run name it
    causes: tuple[Cause, ...] = ()  # why the rows differ, one change each (causes.group), in the walk's order
    unsettled: tuple[Step, ...] = ()  # changes of rate no test calls significant at ``alpha``
    alpha: float = ALPHA

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
    """The Triton version a name says, as every option that takes a version reads it
    (``rig.contract.versions.resolve_version``): the NGC tag (``26.03``), the Triton version
    (``2.48.0``, ``2.48``, ``v2.48.0``), the release branch (``r26.03``) or an nvidia-pytriton
    release (``0.5.10`` -> ``2.48.0``); a variant's label as it is. A name none of these is one line."""
    from rig.contract.versions import resolve_version

    return resolve_version(name)


def _listed(values) -> str:
    return ", ".join(values) or "none"


def _split(values, whole=()) -> list[str]:
    """Repeated or comma-separated values; a shape of two parts joined with ``+`` (as ``rig matrix
    --shapes`` takes it: ``decoupled+instances-2``), its name's comma being the list's, or given as
    it is named where it is one of ``whole``."""
    return [
        v.strip().replace("+", ",")
        for text in values or ()
        for v in ([text] if text in whole else str(text).split(","))
        if v.strip()
    ]


def _narrow(cells: list[Cell], option: str, field: str, given, order, results: str, known=()) -> list[Cell]:
    present = sorted({getattr(c, field) for c in cells}, key=order)
    wanted = _split(given, present)
    if not wanted:
        return cells
    for w in wanted:
        if w not in present:
            what = f"the rig's {field} {w} never ran" if w in known else f"no {field} {w}"
            raise RigError(
                f"{option} {w}: {what} in {results}, whose scenario cycles hold {field}s "
                f"{_listed(p.replace(',', '+') for p in present)}"
            )
    return [c for c in cells if getattr(c, field) in wanted]


def _resolve(option: str, name: str, present: list[str], results: str, narrowed: str) -> str:
    v = triton_version(name)
    if v not in present:
        said = "" if v == name.strip() else f" (Triton {v})"
        raise RigError(
            f"{option} {name}{said}: no scenario cycle of that core in {results}{narrowed}, which holds "
            f"Triton {_listed(present)}"
        )
    return v


releases = conformance.releases


# --- the comparison ---------------------------------------------------------------------------------


def upgrade(
    table, source: str, target: str, scenario=None, shape=None, engine=None, results: str = "R", alpha: float = ALPHA
) -> Upgrade:
    """The cells of ``table`` (a ``conformance.Conformance`` or a cycles frame) that differ between
    Triton ``source`` and ``target`` (either may name an nvidia-pytriton release or a release branch:
    said back as the Triton version). ``scenario``, ``shape``, ``engine``: lists (each item may hold
    several, comma-separated) that narrow it. A name the results do not hold is a ``RigError`` that
    says what they hold. ``target`` older than ``source`` is a downgrade: the walk goes down. The
    rows are grouped by cause (``rig.analysis.conformance.causes``), a change of rate called
    significant at ``alpha``."""
    if not isinstance(table, conformance.Conformance):
        table = conformance.build(table)
    cells = list(table.cells)
    if not cells:
        raise RigError(
            f"{results} holds no scenario cycles: run rig matrix --scenarios all (or rig soak --scenario "
            f"NAME) with --results {results}"
        )
    cells = _narrow(cells, "--engine", "engine", engine, engine_order, results, API_NAMES)
    cells = _narrow(cells, "--shape", "shape", shape, shape_order, results)
    cells = _narrow(cells, "--scenario", "scenario", scenario, scenario_order, results, scenarios.SCENARIOS)
    narrowing = [
        f"{o} {','.join(g)}" for o, g in (("--engine", engine), ("--shape", shape), ("--scenario", scenario)) if g
    ]
    narrowed = f" narrowed to {', '.join(narrowing)}" if narrowing else ""
    present = sorted({c.triton_version for c in cells}, key=version_key)
    src = _resolve("--from", source, present, results, narrowed)
    dst = _resolve("--to", target, present, results, narrowed)
    if src == dst:
        raise RigError(f"--from {source} and --to {target} are the same core, Triton {src}: give two")
    said = {o: n for o, n, v in (("--from", source, src), ("--to", target, dst)) if n.strip() != v}
    known = releases(c.triton_version for c in table.cells if not is_variant(c.triton_version))
    apis, absent = [], {}
    for eng in sorted({c.engine for c in cells}, key=engine_order):
        mine = [c for c in cells if c.engine == eng]
        cores = tuple(sorted({c.triton_version for c in mine}, key=version_key))
        lacks = tuple(v for v in (src, dst) if v not in cores)
        if lacks:
            absent[eng] = (lacks, cores)
            continue
        apis.append(_api(eng, mine, src, dst, known, table.bisects, alpha))
    down = version_key(dst) < version_key(src)
    every = {c.key: c for c in table.cells}  # a bisected cell the question was narrowed away from, too
    causes, unsettled = group([s for a in apis for s in a.steps], down, alpha, table.bisects, every)
    return Upgrade(src, dst, said, tuple(apis), absent, results, causes, unsettled, alpha)


def _api(engine: str, cells: list[Cell], src: str, dst: str, known: list[str], bisects=(), alpha=ALPHA) -> Api:
    series: dict[tuple, dict[str, Cell]] = {}
    for c in cells:
        # a variant (a patch, another ref) is walked only where it is --from or --to itself
        if not is_variant(c.triton_version) or c.triton_version in (src, dst):
            series.setdefault((c.shape, c.scenario, c.control), {})[c.triton_version] = c
    down = version_key(dst) < version_key(src)
    lo, hi = sorted((src, dst), key=version_key)
    rows, only_before, only_after, compared, steps = [], [], [], 0, []
    for key in sorted(series, key=lambda k: (shape_order(k[0]), scenario_order(k[1]), k[2])):
        by = series[key]
        if src not in by or dst not in by:
            if src in by:
                only_before.append(by[src])
            elif dst in by:
                only_after.append(by[dst])
            continue
        compared += 1
        before, after = by[src], by[dst]
        walk = sorted(
            (v for v in by if version_key(lo) <= version_key(v) <= version_key(hi)), key=version_key, reverse=down
        )
        steps += walk_steps([by[v] for v in walk], known, bisects, alpha)
        if same_cell(before, after):
            continue
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
        rows.append(
            Row(
                before,
                after,
                changed,
                last,
                tuple(reversed(gap)) if down else tuple(gap),
                None if settled is changed else settled,
                tuple(bisected(bisects, key[1], key[2], engine, key[0], a, b)),
            )
        )
    return Api(engine, compared, tuple(rows), tuple(only_before), tuple(only_after), tuple(steps))


def default_span(table) -> tuple[str, str] | None:
    """The oldest and the newest core of a table's cells (None where they are one)."""
    cores = sorted({c.triton_version for c in table.cells}, key=version_key)
    return (cores[0], cores[-1]) if len(cores) > 1 else None

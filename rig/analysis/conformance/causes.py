"""The upgrade question grouped by cause: why the cells that differ between two cores differ.

Walking a row's cores from ``--from`` towards ``--to`` (``rig.analysis.conformance.diff``), each
*step* is where its verdicts changed: the first core whose verdicts (``changes.same_cell``) differ
from those the row gave since its last step, dated by the core walked just before it (the releases
between the two that were not run named). A row that changed twice has two steps.

A *cause* is the steps of one window (the two cores) that moved the verdicts alike (the same
verdicts moved the same way: ``move_of``): a bisection of any one of its cells names the commit for
all of them, said as such (``bisected on template (unbatched, capi)``); two moves in one window are
two causes unless their bisections name the same commits. A step of the official API where its
bindings changed too (``bindings.bindings_change``: a wheel's core with PyPI's bindings, then a
core built with its own) is a cause of its own, a change of bindings, never said to be Triton's.

Rates (``rig.analysis.conformance.rates``): between two cores walked one after the other, a cell
whose cycles disagree on one of them may change how often it gives a verdict without changing the
verdicts most cycles gave (a known race reads as no change: ``changes.within_race``). Where
Fisher's exact test calls that change significant at ``rates.ALPHA`` it is a cause like any other
(``RATE``); where it does not, it is listed apart (``unsettled``) with the cycles it would need.
A step of verdicts whose two cores share a verdict carries its rate too. Pure.
"""

from __future__ import annotations

import dataclasses
import itertools

from rig.analysis.conformance.bindings import Bindings, bindings_change, change_text
from rig.analysis.conformance.cells import Cell, row_label
from rig.analysis.conformance.changes import (
    Bisection,
    Move,
    bisection,
    bisections,
    commits_text,
    move_of,
    moved_alike,
    narrowest,
    same_cell,
    spans,
)
from rig.analysis.conformance.order import engine_order, scenario_order, shape_order
from rig.analysis.conformance.rates import ALPHA, Rate, fisher_exact, more_cycles, overlap, rate_move
from rig.analysis.release_order import not_run_text, version_key
from rig.runtimes.from_source.identity import is_variant
from rig.runtimes.from_source.releases import BRANCHES

VERDICTS, RATE, BINDINGS = "verdicts", "rate", "bindings"


def move_text(move: Move) -> str:
    """``lifecycle clean → aborted_at_exit``, each verdict that moved."""
    return ", ".join(f"{what} {a} → {b}" for what, a, b in move) or "the verdicts most cycles gave"


@dataclasses.dataclass(frozen=True)
class Step:
    """One change of one row between two cores walked one after the other."""

    before: Cell  # the row's cell on --from
    after: Cell  # and on --to
    start: Cell  # the first core of the verdicts it changed from (since the row's last step)
    last: Cell  # the core walked just before the change
    changed: Cell  # the first core walked with the new verdicts (or rate)
    gap: tuple[str, ...]  # the releases between ``last`` and ``changed`` that were not run
    kind: str  # VERDICTS | RATE
    move: Move  # the verdicts that moved (``last`` to ``changed``; ``start``'s where those are alike)
    rate: Rate | None  # the change of rate, where the two cores share a verdict (a RATE step's always)
    bindings: tuple[Bindings, Bindings] | None  # the official API's bindings, where they changed too
    bisection: Bisection | None  # a decided bisection of this very cell spanning the window

    @property
    def key(self) -> tuple[str, str, str, bool]:
        return self.before.engine, self.before.shape, self.before.scenario, self.before.control

    @property
    def window(self) -> tuple[str, str]:
        return self.last.triton_version, self.changed.triton_version

    @property
    def label(self) -> str:
        return row_label(self.before.scenario, self.before.control)


def walk_steps(walk: list[Cell], known=(), bisects=(), alpha: float = ALPHA) -> list[Step]:
    """The steps of one row's cells walked from --from (``walk[0]``) to --to (``walk[-1]``): its
    changes of verdicts where the two ends differ, and every change of rate between two cores walked
    one after the other that is no change of verdicts. ``known``: the releases there are (for the
    gaps); ``bisects``: the decided bisections (``changes.decided_bisects``)."""
    before, after = walk[0], walk[-1]
    out: list[Step] = []
    stepped: set[str] = set()
    if not same_cell(before, after):
        start = last = before
        for c in walk[1:]:
            if not same_cell(start, c):
                out.append(_step(VERDICTS, before, after, start, last, c, known, bisects, alpha))
                stepped.add(c.triton_version)
                start = c
            last = c
    for x, y in itertools.pairwise(walk):
        if y.triton_version in stepped:
            continue
        rate = rate_move(x.lifecycle, y.lifecycle, alpha)
        if rate is not None:
            out.append(_step(RATE, before, after, x, x, y, known, bisects, alpha, rate))
    return out


def _step(kind, before, after, start, last, changed, known, bisects, alpha, rate=None) -> Step:
    a, b = last.triton_version, changed.triton_version
    lo, hi = sorted((a, b), key=version_key)
    gap = [v for v in known if version_key(lo) < version_key(v) < version_key(hi)]
    if version_key(b) < version_key(a):
        gap.reverse()
    move = move_of(last, changed) or move_of(start, changed)
    if rate is None and overlap(last.lifecycle, changed.lifecycle):
        rate = rate_move(last.lifecycle, changed.lifecycle, alpha)
    found = bisection(bisects, before.scenario, before.control, before.engine, before.shape, a, b)
    return Step(
        before, after, start, last, changed, tuple(gap), kind, move, rate, bindings_change(last, changed), found
    )


# --- causes -------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cause:
    """The steps of one window that one change explains."""

    number: int  # 1, 2, ...: in the order of the walk
    kind: str  # VERDICTS | BINDINGS | RATE
    last: str  # the cores of its window, in the walk's order
    changed: str
    gap: tuple[str, ...]  # the releases between them that were not run
    moves: tuple[tuple[Move, int], ...]  # each move and its cells, the most first (several: joined by a bisection)
    steps: tuple[Step, ...]  # one a cell, in the pages' order
    bisection: Bisection | None  # the decided bisection that names its commits (of one of its cells)
    not_bisected: str  # why no bisection names it ("" where one does, or where the bindings changed)
    bindings: str  # the change of bindings in words (BINDINGS), else ""
    rate: Rate | None  # RATE: the rate over its cells, pooled; else None

    @property
    def cells(self) -> int:
        return len(self.steps)

    @property
    def window(self) -> str:
        """Where: ``2.68.0``; ``between 2.55.0 and 2.60.0 (2.56.0, 2.57.0 not run)`` where releases
        between the two cores were not run."""
        lo, hi = sorted((self.last, self.changed), key=version_key)
        return f"between {lo} and {hi} ({not_run_text(self.gap)})" if self.gap else hi

    @property
    def by_api(self) -> dict[str, dict[str, int]]:
        """Its cells counted per API and shape, in the pages' order."""
        out: dict[str, dict[str, int]] = {}
        for s in sorted(self.steps, key=lambda s: (engine_order(s.key[0]), shape_order(s.key[1]))):
            out.setdefault(s.key[0], {})
            out[s.key[0]][s.key[1]] = out[s.key[0]].get(s.key[1], 0) + 1
        return out


def _commits_key(b: Bisection | None) -> tuple:
    return () if b is None else tuple((c.component, c.commit) for c in b.commits)


def group(
    steps, down: bool = False, alpha: float = ALPHA, bisects=(), cells=None
) -> tuple[tuple[Cause, ...], tuple[Step, ...]]:
    """The causes of ``steps`` (``walk_steps``'s, of every row compared), numbered in the walk's
    order, and the changes of rate no test calls significant at ``alpha`` (listed apart). A cause
    none of whose cells was bisected takes the bisection of a cell outside them (one the question
    was narrowed away from) that made the same move in the same window: ``bisects`` (the decided
    bisections' rows) and ``cells`` (every cell of the table, by ``Cell.key``) say which."""
    unsettled = tuple(s for s in steps if s.kind == RATE and not (s.rate and s.rate.significant))
    groups: dict[tuple, list[Step]] = {}
    for s in steps:
        if s.kind == RATE:
            if s.rate is None or not s.rate.significant:
                continue
            rises = s.rate.after[0] * s.rate.before[1] > s.rate.before[0] * s.rate.after[1]
            key: tuple = (RATE, *s.window, (("rate", s.rate.verdict, "rises" if rises else "falls"),), "")
        else:
            said = change_text(s.last, s.changed, s.bindings) if s.bindings else ""
            key = (BINDINGS if said else VERDICTS, *s.window, s.move, said)
        groups.setdefault(key, []).append(s)
    # a move whose cells' own bisections name different commits is as many causes
    split: list[tuple[tuple, list[Step], Bisection | None]] = []
    for key, members in groups.items():
        named = {_commits_key(s.bisection): s.bisection for s in members if s.bisection is not None}
        if len(named) <= 1:
            found = next(iter(named.values()), None)
            if found is None and key[0] != BINDINGS:
                found = _elsewhere(key, bisects, cells or {})
            split.append((key, members, found))
            continue
        for commits, found in named.items():
            split.append((key, [s for s in members if _commits_key(s.bisection) == commits], found))
        rest = [s for s in members if s.bisection is None]
        if rest:
            split.append((key, rest, None))
    # two moves of one window whose bisections name the same commits are one cause
    merged: list[tuple[tuple, list[Step], Bisection | None]] = []
    for key, members, found in split:
        into = next(
            (
                m
                for m in merged
                if found is not None
                and m[2] is not None
                and m[0][0] == key[0] == VERDICTS
                and m[0][1:3] == key[1:3]
                and _commits_key(m[2]) == _commits_key(found)
            ),
            None,
        )
        if into is not None:
            into[1].extend(members)
        else:
            merged.append((key, list(members), found))
    at = {v: i for i, v in enumerate(sorted({k[2] for k, _, _ in merged}, key=version_key, reverse=down))}
    merged.sort(key=lambda m: (at[m[0][2]], m[0][0] == RATE, -len(m[1]), move_text(m[0][3])))
    causes = tuple(_cause(i + 1, key, members, found, alpha) for i, (key, members, found) in enumerate(merged))
    return causes, unsettled


def _elsewhere(key: tuple, bisects, cells: dict) -> Bisection | None:
    """A decided bisection of a cell not among a cause's that spans its window and whose cell made
    the same move there (``move_of`` its cells on the window's two cores)."""
    kind, a, b, move, _ = key
    if kind != RATE:
        return moved_alike(bisects, cells, a, b, move)
    found = []
    for x in bisections(bisects):
        last, changed = (cells.get((x.engine, x.shape, x.scenario, x.control, v)) for v in (a, b))
        if not spans(x, a, b) or last is None or changed is None:
            continue
        rate = rate_move(last.lifecycle, changed.lifecycle)
        if rate is None or rate.verdict != move[0][1]:
            continue
        found.append(x)
    return narrowest(found)


def _cause(number: int, key: tuple, members: list[Step], found: Bisection | None, alpha: float) -> Cause:
    kind, last, changed, _, said = key
    members = sorted(
        members, key=lambda s: (engine_order(s.key[0]), shape_order(s.key[1]), scenario_order(s.key[2]), s.key[3])
    )
    counted: dict[Move, int] = {}
    for s in members:
        counted[s.move if kind != RATE else key[3]] = counted.get(s.move if kind != RATE else key[3], 0) + 1
    moves = tuple(sorted(counted.items(), key=lambda kv: (-kv[1], move_text(kv[0]))))
    rate = None
    if kind == RATE:
        rates = [s.rate for s in members if s.rate is not None]
        ka, na = sum(r.before[0] for r in rates), sum(r.before[1] for r in rates)
        kb, nb = sum(r.after[0] for r in rates), sum(r.after[1] for r in rates)
        rate = Rate(
            rates[0].verdict,
            (ka, na),
            (kb, nb),
            fisher_exact(ka, na, kb, nb),
            more_cycles(ka, na, kb, nb, alpha),
            alpha,
        )
    return Cause(
        number,
        kind,
        last,
        changed,
        members[0].gap,
        moves,
        tuple(members),
        found,
        "" if found is not None or kind == BINDINGS else why_not_bisected(members[0]),
        said,
        rate,
    )


def sources_from() -> tuple[str, str]:
    """The oldest release branch the sources here hold, and its Triton version (r24.10, 2.51.0)."""
    branch, version = min(BRANCHES.items(), key=lambda kv: version_key(kv[1]))
    return branch, version


def why_not_bisected(s: Step) -> str:
    """Why no bisection names a step's change: a core older than the sources here, a variant (no
    release), or none run yet (and the command that would)."""
    lo, hi = sorted(s.window, key=version_key)
    for v in (lo, hi):
        if is_variant(v):
            return f"not bisected: {v} is a variant (a patch or another ref), not a release"
    branch, first = sources_from()
    if version_key(lo) < version_key(first):
        return f"not bisected: {lo} predates the sources here ({branch} on)"
    engine, shape, scenario, control = s.key
    if s.kind == VERDICTS and same_cell(s.last, s.changed):  # the majority drifted within one known race
        return (
            f"not bisected: a race's draw, {s.last.triton_version} and {s.changed.triton_version} give verdicts "
            "within one known race (no verdict tells them apart: a bisection would find nothing); its rate "
            f"tells whether it moved: `rig matrix --scenarios {scenario} --shapes {shape.replace(',', '+')} "
            f"--engines {engine} --runtimes {lo},{hi} --race-cycles 12`"
        )
    return (
        f"not bisected yet: `rig bisect --scenario {scenario}{' --control' if control else ''} --shape "
        f"{shape.replace(',', '+')} --engine {engine} --good {lo} --bad {hi}`"
    )


def by_api_text(counts: dict[str, dict[str, int]]) -> str:
    """``capi: unbatched 20, batched 8; tritonserver: unbatched 19``."""
    return "; ".join(f"{e}: " + ", ".join(f"{sh} {n}" for sh, n in shapes.items()) for e, shapes in counts.items())


def who(c: Cause) -> str:
    """What a cause names as its source: the commits (and the cell bisected), the bindings, or ""."""
    if c.bisection is not None:
        return f"{commits_text(c.bisection.commits)} (bisected on {c.bisection.cell})"
    if c.kind == BINDINGS:
        return f"{c.bindings}, a change of bindings, not of Triton"
    return ""


def what(c: Cause) -> str:
    """What a cause did: its move (several, each with its cells), or its rate over its cells."""
    if c.kind == RATE and c.rate is not None:
        pooled = f" over {c.cells} cells, pooled" if c.cells > 1 else ""
        return f"{c.rate.text()}{pooled}, {c.rate.judged()}"
    if len(c.moves) == 1:
        return move_text(c.moves[0][0])
    return "; ".join(f"{move_text(m)} ({n})" for m, n in c.moves)


def cause_line(c: Cause) -> str:
    """A cause in one line: ``2.68.0: python_backend 47f9e03 (#433) (bisected on template
    (unbatched, capi)): lifecycle clean → aborted_at_exit, 57 cells (capi: unbatched 20, ...)``;
    where no bisection names it, why after the cells."""
    source = who(c)
    cells = f"{c.cells} cell{'s' if c.cells != 1 else ''} ({by_api_text(c.by_api)})"
    text = f"{c.window}: "
    text += f"{source}: " if source else ""
    text += f"{what(c)}, {cells}"
    return text + (f"; {c.not_bisected}" if c.not_bisected else "")


def headline(causes, differing: int, source: str, target: str) -> str:
    """``from 2.67.0 to 2.70.0: 3 causes explain 116 cells``; the changes of rate in cells whose
    verdicts held, and the cells under more than one cause, said."""
    verdicts = [c for c in causes if c.kind != RATE]
    rates = [c for c in causes if c.kind == RATE]
    keys = [s.key for c in verdicts for s in c.steps]
    twice = len({k for k in keys if keys.count(k) > 1})
    text = (
        f"from {source} to {target}: {len(verdicts)} cause{'s' if len(verdicts) != 1 else ''} "
        f"explain{'s' if len(verdicts) == 1 else ''} {differing} cell{'s' if differing != 1 else ''}"
        if differing
        else f"from {source} to {target}: no cell's verdicts differ"
    )
    if twice:
        text += f" ({twice} changed more than once: each is under each of its causes)"
    if rates:
        text += (
            f"; {len(rates)} change{'s' if len(rates) != 1 else ''} of rate "
            f"(Fisher's exact test, α = {rates[0].rate.alpha if rates[0].rate else ALPHA:g})"
        )
    return text


def causes_of(key, causes) -> list[int]:
    """The numbers of the causes a row (engine, shape, scenario, control) is under."""
    return [c.number for c in causes if any(s.key == key for s in c.steps)]

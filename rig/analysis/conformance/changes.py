"""Where a conformance row changed: which cores' verdicts differ from the core's before them (each
change dated as closely as the cores run allow, and named by the commit a decided bisection found),
and what a variant (a patched or hybrid build) does beside its release (``fixed by``, ``changed
by``). Pure functions over ``rig.analysis.conformance.cells.Cell``s.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

from rig.analysis.conformance.bindings import bindings_change
from rig.analysis.conformance.bindings import change_text as bindings_text
from rig.analysis.conformance.cells import Cell, Verdicts, row_label
from rig.analysis.conformance.order import UNBATCHED, engine_order, scenario_order, shape_order
from rig.analysis.matrix import growth_held
from rig.analysis.release_order import dated, version_key
from rig.contract.verdicts import NOT_MEASURED
from rig.runtimes.from_source.identity import is_variant, release_of
from rig.scenarios import catalog as scenarios
from rig.scenarios import known as known_verdicts

Move = tuple[tuple[str, str, str], ...]  # (what, from, to): each verdict that moved


def move_of(a: Cell, b: Cell) -> Move:
    """What moved between two cells: each of lifecycle, load and growth whose majority differs (an
    unmeasured growth differs from none), and the readiness a dead stub left where both asked."""
    moved = [
        (what, x, y)
        for what, x, y in zip(("lifecycle", "load", "growth"), a.verdicts, b.verdicts)
        if x != y and not (what == "growth" and NOT_MEASURED in (x, y))
    ]
    if None not in (a.probed, b.probed) and a.probed != b.probed:
        moved.append(("readiness", str(a.probed), str(b.probed)))
    return tuple(moved)


def moved_alike(bisects, cells: dict, a: str, b: str, move: Move) -> Bisection | None:
    """A decided bisection of any cell that spans cores ``a`` .. ``b`` and whose cell made ``move``
    there (``move_of`` its cells on the two cores; ``cells`` by ``Cell.key``): the commit that moved
    one cell moves every cell it moved alike. The narrowest where several do."""
    found = []
    for x in bisections(bisects):
        last, changed = (cells.get((x.engine, x.shape, x.scenario, x.control, v)) for v in (a, b))
        if spans(x, a, b) and last is not None and changed is not None and move_of(last, changed) == move:
            found.append(x)
    return narrowest(found)


def same_verdicts(a: Verdicts, b: Verdicts) -> bool:
    """Whether two cells' verdicts are the same: lifecycle and load equal, growth equal unless
    either side did not measure it."""
    return a[:2] == b[:2] and (a[2] == b[2] or NOT_MEASURED in (a[2], b[2]))


def within_race(a: Cell, b: Cell) -> bool:
    """Whether ``a``'s verdicts are one side of a race ``b`` is known to run (its known verdicts name
    alternatives, ``exit_timeout|clean``, and ``a``'s are among them): three cycles on one side of a
    known race are no change."""
    return (
        b.known is not None
        and known_verdicts.intermittent(b.known)
        and known_verdicts.holds(a.verdicts[:2], b.known[:2])
        and growth_held(a.verdicts[2], b.known[2])
    )


def same_cell(a: Cell, b: Cell) -> bool:
    """Whether two cores gave a scenario the same: its verdicts (or, where either is known to race,
    verdicts within that race: ``within_race``), and where both asked, the same readiness once its
    stub was dead (``Cell.probed``: a fix of readiness changes no verdict)."""
    if not (a.probed is None or b.probed is None or a.probed == b.probed):
        return False
    return same_verdicts(a.verdicts, b.verdicts) or within_race(a, b) or within_race(b, a)


def changed_in(cell_list, bisects=()) -> dict[tuple[str, bool, str, str], list[str]]:
    """For each (scenario, control, engine, shape): the cores, in version order, whose verdicts
    (each cell's majority; and the readiness it probed) differ from those of the core before it,
    each dated as closely as the cores run allow (``dated``: ``2.68.0…2.70.0`` where releases
    between the two were not run), and where a bisection found the change, by which commit
    (``2.68.0: python_backend 47f9e03 (#433)``; of another cell whose verdicts it moved alike there:
    ``(as bisected on template (unbatched, capi))``), or where the official API's bindings changed with
    the core, said so (``2.51.0: bindings PyPI's → 2.51.0 (own)``: never a change of Triton's alone),
    or, where its window starts before the sources here, that it cannot be bisected (``2.47.0 (not
    bisectable: 2.46.0 has no sources here)``);
    empty where none differ. A variant (a patched or
    hybrid build: ``rig.runtimes.from_source.identity``) is no release: it is left out of the series."""
    series: dict[tuple, list[Cell]] = {}
    variants: dict[tuple, list[Cell]] = {}
    by_key = {c.key: c for c in cell_list}
    for c in cell_list:
        mine = variants if is_variant(c.triton_version) else series
        mine.setdefault((c.scenario, c.control, c.engine, c.shape), []).append(c)
    out: dict[tuple, list[str]] = {}
    for key, cs in series.items():
        cs = sorted(cs, key=lambda c: version_key(c.triton_version))
        scenario, control, engine, shape = key
        out[key] = []
        for a, b in itertools.pairwise(cs):
            if not same_cell(a, b):
                by = commits_text(
                    bisected(bisects, scenario, control, engine, shape, a.triton_version, b.triton_version)
                )
                alike = None if by else moved_alike(bisects, by_key, a.triton_version, b.triton_version, move_of(a, b))
                if alike is not None:
                    by = f"{commits_text(alike.commits)} (as bisected on {alike.cell})"
                moved = bindings_change(a, b)
                by = by or (bindings_text(a, b, moved) if moved else "")
                why = "" if by else _unbisectable(a.triton_version)
                said = f": {by}" if by else f" ({why})" if why else ""
                out[key].append(dated(a.triton_version, b.triton_version) + said)
    for key, vs in variants.items():
        out.setdefault(key, []).extend(patch_effects(series.get(key, []), vs))
    return out


def _unbisectable(older: str) -> str:
    """Why a change cannot be bisected where that is so: its window starts at a core older than the
    oldest release branch the sources here hold (r24.10, 2.51.0); "" where it can be."""
    from rig.runtimes.from_source.releases import BRANCHES

    return (
        f"not bisectable: {older} has no sources here"
        if version_key(older) < min(map(version_key, BRANCHES.values()))
        else ""
    )


def patch_effects(releases_run: list[Cell], variants: list[Cell]) -> list[str]:
    """What each variant (a patch, another ref) does to a row beside its release: ``fixed by V``
    where it gives the verdicts the row had before its last change up to that release (it undoes
    that change), ``changed by V`` where it gives others; nothing where it gives its release's."""
    by = {c.triton_version: c for c in releases_run}
    order = sorted(by, key=version_key)
    out = []
    for v in sorted(variants, key=lambda c: version_key(c.triton_version)):
        base = by.get(release_of(v.triton_version))
        if base is None or same_cell(v, base):
            continue
        # the last release before the base whose verdicts differ from the base's: before the change
        before = [r for r in order if version_key(r) < version_key(base.triton_version) and not same_cell(by[r], base)]
        fixed = bool(before) and same_cell(v, by[before[-1]])
        out.append(f"{'fixed' if fixed else 'changed'} by {v.triton_version}")
    return out


@dataclasses.dataclass(frozen=True)
class Commit:
    """A commit a decided bisection named: its component, hash, subject and, where the bisection
    said it (a result row's ``effect``, else its ``verdicts``), what it does to the cell."""

    component: str
    commit: str
    subject: str | None = None
    does: str | None = None

    @property
    def prs(self) -> list[str]:
        return re.findall(r"\(#(\d+)\)", self.subject or "")

    def __str__(self) -> str:  # python_backend 47f9e03 (#433)
        prs = " ".join(f"#{n}" for n in self.prs)
        return f"{self.component} {self.commit[:7]}" + (f" ({prs})" if prs else "")


@dataclasses.dataclass(frozen=True)
class Bisection:
    """A decided bisection: the cell it ran (scenario, control, shape, engine), its releases and the
    commits its result rows name (one; or several: "needs A and B", or each with what it does)."""

    scenario: str
    control: bool
    shape: str
    engine: str
    good: str
    bad: str
    commits: tuple[Commit, ...]
    run_id: str = ""

    @property
    def cell(self) -> str:
        """The cell it ran, in words: ``template (unbatched, capi)``."""
        return f"{row_label(self.scenario, self.control)} ({self.shape}, {self.engine})"


def commits_text(commits) -> str:
    """What commits a bisection named, in words: ``python_backend 47f9e03 (#433)``; several, each
    with what it does where said (``two changes: A (crash gone), B (abort at exit)``), else as one
    change that needs them all (``needs A and B``); "" where none."""
    commits = list(commits)
    if len(commits) < 2:
        return "".join(map(str, commits))
    if any(c.does for c in commits):
        count = {2: "two", 3: "three"}.get(len(commits), str(len(commits)))
        return f"{count} changes: " + ", ".join(str(c) + (f" ({c.does})" if c.does else "") for c in commits)
    return "needs " + ", ".join(map(str, commits[:-1])) + f" and {commits[-1]}"


def _text(value) -> str | None:
    return None if value is None or value != value or str(value).strip() in ("", "nan", "None") else str(value)


def _shape(r: dict) -> str:
    shape = _text(r.get("shape"))
    if shape is not None:
        return shape
    s = scenarios.SCENARIOS.get(str(r["scenario"]))
    return s.shapes[0] if s is not None else UNBATCHED


def bisections(bisects) -> list[Bisection]:
    """The decided bisections of ``bisects`` (``decided_bisects``' result rows), one a run: the
    commits of every result row of its run (several where it named several), in the rows' order."""
    runs: dict[str, list[dict]] = {}
    for r in bisects:
        runs.setdefault(str(r.get("run_id") or f"{r['scenario']}:{r['good']}..{r['bad']}"), []).append(r)
    out = []
    for run, rows in runs.items():
        first = rows[0]
        commits = tuple(
            dict.fromkeys(
                Commit(
                    str(r["component"]),
                    str(r["commit"]),
                    _text(r.get("subject")),
                    _text(r.get("effect")) or _text(r.get("verdicts")),
                )
                for r in rows
            )
        )
        out.append(
            Bisection(
                str(first["scenario"]),
                bool(first["control"]),
                _shape(first),
                str(first["engine"]),
                str(first["good"]),
                str(first["bad"]),
                commits,
                run,
            )
        )
    return out


def spans(b: Bisection, x: str, y: str) -> bool:
    """Whether a bisection's releases (``good`` .. ``bad``) span cores ``x`` .. ``y`` (either order)."""
    lo, hi = sorted((x, y), key=version_key)
    return version_key(b.good) <= version_key(lo) and version_key(hi) <= version_key(b.bad)


def narrowest(found) -> Bisection | None:
    """Of bisections that span a window, the narrowest: the latest good release, then the earliest bad."""
    ordered = sorted(found, key=lambda b: version_key(b.good), reverse=True)
    return min(ordered, key=lambda b: version_key(b.bad)) if ordered else None


def bisection(bisects, scenario: str, control: bool, engine: str, shape: str, a: str, b: str) -> Bisection | None:
    """The decided bisection of a row's cell whose releases span cores ``a`` .. ``b`` (``spans``),
    the narrowest where several do (``narrowest``); None where none does."""
    cell = (scenario, control, shape, engine)
    return narrowest(
        x for x in bisections(bisects) if (x.scenario, x.control, x.shape, x.engine) == cell and spans(x, a, b)
    )


def bisected(bisects, scenario: str, control: bool, engine: str, shape: str, a: str, b: str) -> list[Commit]:
    """The commits a decided bisection of a row's cell named for its change between cores ``a`` and
    ``b`` (``bisection``): one, ``python_backend 47f9e03 (#433)`` as ``str``, or several (render them
    with ``commits_text``); empty where none did."""
    found = bisection(bisects, scenario, control, engine, shape, a, b)
    return list(found.commits) if found is not None else []


def decided_bisects(frame) -> tuple[dict, ...]:
    """The result rows of the decided bisections in a ``bisect`` table's frame (None: none)."""
    if frame is None or not len(frame) or "kind" not in frame:
        return ()
    done = frame[(frame["kind"] == "result") & (frame["judged"] == "bad")]
    return tuple(done.to_dict("records"))


def shape_moves(cell_list) -> list[dict]:
    """Where a shape moves a verdict: for each scenario (and control), API and core whose default
    shape (the scenario's first) ran beside others, each other shape whose verdicts (the cells'
    majority) differ from the default's. Rows: scenario, control, engine, triton_version, default
    (its shape), verdicts (the default's), moved ({shape: verdicts}), same (shapes that gave the
    default's)."""
    by: dict[tuple, dict[str, Cell]] = {}
    for c in cell_list:
        by.setdefault((c.scenario, c.control, c.engine, c.triton_version), {})[c.shape] = c
    out = []
    for (scenario, control, engine, version), shapes in sorted(
        by.items(), key=lambda kv: (scenario_order(kv[0][0]), kv[0][1], engine_order(kv[0][2]), version_key(kv[0][3]))
    ):
        s = scenarios.SCENARIOS.get(scenario)
        default = s.shapes[0] if s is not None else UNBATCHED
        if default not in shapes or len(shapes) < 2:
            continue
        base = shapes[default].verdicts
        others = sorted((sh for sh in shapes if sh != default), key=shape_order)
        out.append(
            {
                "scenario": scenario,
                "control": control,
                "engine": engine,
                "triton_version": version,
                "default": default,
                "verdicts": base,
                "moved": {sh: shapes[sh].verdicts for sh in others if not same_verdicts(base, shapes[sh].verdicts)},
                "same": [sh for sh in others if same_verdicts(base, shapes[sh].verdicts)],
            }
        )
    return out

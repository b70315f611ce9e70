"""Which components moved a cell between two releases, and how (a pure function over the hybrids'
signatures; ``rig bisect`` builds and runs them).

A hybrid is the older release (the base) with some components taken from the newer one (the top).
The plan starts from the base's signatures and the top's:

- **one component** whose hybrid gives the top's signatures, the others the base's: the change is
  that component's (its commits are bisected next);
- **two together**: no single component gives the top's, and none moves away from the base's: the
  pairs are built, and the one pair that gives the top's needs both (each component's commits are
  bisected with the other held at the top's commit);
- **several changes in turn**: a hybrid gives a third signature (neither side's: one change of two
  moved the cell, or moved one part of it). Each such component is a change of its own (bisected
  from the signatures before it to the hybrid's), taken from the top from then on; the plan goes on
  from the signatures it left (the change after it may show only on top of it: a crash in the stop
  hides an abort at exit).

A hybrid that did not build, or whose cycles stayed mixed, is *not ruled out*; where no component
nor pair explains the change the plan says so and decides nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from rig.workflows.bisect_judge import reading


@dataclasses.dataclass(frozen=True)
class Seen:
    """What a hybrid's cycles gave: signature -> cycles, and whether the race's cycles were run."""

    counts: dict[str, int]
    race: bool = False


@dataclasses.dataclass(frozen=True)
class Move:
    """One change of the cell: the component (or the two together) that moved it, on top of the
    components the moves before it took from the top (``held``); the signatures before and after."""

    components: tuple[str, ...]
    held: tuple[str, ...]
    before: frozenset[str]
    after: frozenset[str]  # the move that ends the plan: the newer release's signatures with the hybrid's


@dataclasses.dataclass
class Plan:
    moves: list[Move]
    decided: bool
    why: str = ""  # where it decided nothing: why
    notes: list[str] = dataclasses.field(default_factory=list)  # components not ruled out, ...


# a hybrid's cycles (None: it did not build), asked with the components the moves before took from
# the top (held), those this hybrid adds, and the two sides it is judged between (before, after):
# where its cycles race, the caller runs more of them
Oracle = Callable[[frozenset[str], tuple[str, ...], frozenset[str], frozenset[str]], "Seen | None"]


def plan(moved: list[str], seen: Oracle, base: dict[str, int], top: dict[str, int]) -> Plan:
    """The moves from ``base``'s signatures to ``top``'s (the two releases' counts), by the hybrids
    ``seen`` gives; ``moved``: the components whose commits differ between the two releases."""
    after = frozenset(top)
    before = frozenset(base)
    held: frozenset[str] = frozenset()
    moves: list[Move] = []
    notes: list[str] = []

    def read(under: frozenset[str], added: tuple[str, ...]) -> tuple[str, frozenset[str]]:
        s = seen(under, added, before, after)
        if s is None:
            return "failed", frozenset()
        return reading(s.counts, before, after, s.race), frozenset(s.counts)

    while True:
        rest = [c for c in moved if c not in held]
        if not rest:
            return Plan(
                moves,
                False,
                f"with every component that moved ({', '.join(moved)}) taken from the newer release the "
                "hybrid still does not give its verdict",
                notes,
            )
        got = {c: read(held, (c,)) for c in rest}
        bad = [c for c in rest if got[c][0] == "bad"]
        other = [c for c in rest if got[c][0] == "other"]
        unsure = [c for c in rest if got[c][0] in ("failed", "mixed")]
        on = f" on top of {', '.join(sorted(held))}" if held else ""
        if unsure:
            notes.append(_unsure(unsure, got, on))
        if len(bad) > 1:
            return Plan(moves, False, f"each of {', '.join(bad)} alone{on} gives the newer release's verdict", notes)
        if bad:
            c = bad[0]
            if other:
                notes.append(f"{', '.join(other)} alone{on} gave a third verdict")
            moves.append(Move((c,), tuple(sorted(held)), before, after | got[c][1]))
            return Plan(moves, True, "", notes)
        if other:
            for c in other:
                moves.append(Move((c,), tuple(sorted(held)), before, got[c][1]))
            state, sigs = got[other[0]] if len(other) == 1 else read(held, tuple(other))
            held = held | set(other)
            if state == "bad":
                return Plan(moves, True, "", notes)
            if state != "other":
                return Plan(moves, False, f"{', '.join(other)} together{on} gave {state} signatures", notes)
            before = sigs
            continue
        pairs = list(itertools.combinations(rest, 2))
        if not pairs:
            return Plan(moves, False, f"{rest[0]}{on} alone does not move the cell", notes)
        pgot = {p: read(held, p) for p in pairs}
        pbad = [p for p in pairs if pgot[p][0] == "bad"]
        pother = [p for p in pairs if pgot[p][0] == "other"]
        named = ", ".join(rest)
        if len(pbad) > 1:
            return Plan(
                moves,
                False,
                f"several pairs of {named}{on} give the newer release's verdict: "
                + "; ".join(" and ".join(p) for p in pbad),
                notes,
            )
        if pbad:
            moves.append(Move(pbad[0], tuple(sorted(held)), before, after | pgot[pbad[0]][1]))
            return Plan(moves, True, "", notes)
        if len(pother) == 1:
            moves.append(Move(pother[0], tuple(sorted(held)), before, pgot[pother[0]][1]))
            held, before = held | set(pother[0]), pgot[pother[0]][1]
            continue
        failed = [" and ".join(p) for p in pairs if pgot[p][0] in ("failed", "mixed")]
        if failed:
            notes.append(f"not ruled out: the pair(s) {'; '.join(failed)} (did not build or stayed mixed)")
        return Plan(
            moves,
            False,
            f"no component of {named} alone{on}, nor any pair of them, gives the newer release's "
            "verdict" + (f" ({len(pother)} pairs gave third verdicts)" if pother else ""),
            notes,
        )


def _unsure(unsure: list[str], got: dict, on: str) -> str:
    said = ", ".join(f"{c} ({'did not build' if got[c][0] == 'failed' else 'stayed mixed'})" for c in unsure)
    return f"not ruled out: {said}{on}"

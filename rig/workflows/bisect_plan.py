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
    ``seen`` gives; ``moved``: the components whose commits differ between the two releases. Each
    layer tries the components left one by one (``_Walk.singles``), then in pairs (``_Walk.pairs``);
    a component (or pair) that gives a third verdict is a change of its own, held at the newer
    release while the walk goes on from the verdict it left."""
    walk = _Walk(seen, frozenset(base), frozenset(top))
    while True:
        rest = [c for c in moved if c not in walk.held]
        if not rest:
            return walk.done(
                False,
                f"with every component that moved ({', '.join(moved)}) taken from the newer release the "
                "hybrid still does not give its verdict",
            )
        ended = walk.singles(rest)
        if ended is None:
            continue
        if ended is not _PAIRS:
            return ended
        ended = walk.pairs(rest)
        if ended is not None:
            return ended


_PAIRS = Plan([], False, "", [])  # singles moved nothing: try pairs


class _Walk:
    """A plan's state across its layers: the components held at the newer release, the signatures
    the walk stands on, the moves found and the notes."""

    def __init__(self, seen: Oracle, before: frozenset[str], after: frozenset[str]):
        self.seen, self.before, self.after = seen, before, after
        self.held: frozenset[str] = frozenset()
        self.moves: list[Move] = []
        self.notes: list[str] = []

    def read(self, added: tuple[str, ...]) -> tuple[str, frozenset[str]]:
        s = self.seen(self.held, added, self.before, self.after)
        if s is None:
            return "failed", frozenset()
        return reading(s.counts, self.before, self.after, s.race), frozenset(s.counts)

    def done(self, decided: bool, why: str = "") -> Plan:
        return Plan(self.moves, decided, why, self.notes)

    def move(self, components: tuple[str, ...], to: frozenset[str]) -> None:
        self.moves.append(Move(components, tuple(sorted(self.held)), self.before, to))

    @property
    def on(self) -> str:
        return f" on top of {', '.join(sorted(self.held))}" if self.held else ""

    def singles(self, rest: list[str]) -> Plan | None:
        """Each component left alone: a plan where that decides it, None to walk on from a third
        verdict, ``_PAIRS`` where none moved the cell."""
        got = {c: self.read((c,)) for c in rest}
        bad = [c for c in rest if got[c][0] == "bad"]
        other = [c for c in rest if got[c][0] == "other"]
        unsure = [c for c in rest if got[c][0] in ("failed", "mixed")]
        on = self.on
        if unsure:
            self.notes.append(_unsure(unsure, got, on))
        if len(bad) > 1:
            return self.done(False, f"each of {', '.join(bad)} alone{on} gives the newer release's verdict")
        if bad:
            if other:
                self.notes.append(f"{', '.join(other)} alone{on} gave a third verdict")
            self.move((bad[0],), self.after | got[bad[0]][1])
            return self.done(True)
        if not other:
            return _PAIRS
        for c in other:
            self.move((c,), got[c][1])
        state, sigs = got[other[0]] if len(other) == 1 else self.read(tuple(other))
        self.held = self.held | set(other)
        if state == "bad":
            return self.done(True)
        if state != "other":
            return self.done(False, f"{', '.join(other)} together{on} gave {state} signatures")
        self.before = sigs
        return None

    def pairs(self, rest: list[str]) -> Plan | None:
        """The components left two at a time: a plan where that decides it, None to walk on from
        the one pair that gave a third verdict."""
        pairs = list(itertools.combinations(rest, 2))
        on = self.on
        if not pairs:
            return self.done(False, f"{rest[0]}{on} alone does not move the cell")
        got = {p: self.read(p) for p in pairs}
        bad = [p for p in pairs if got[p][0] == "bad"]
        other = [p for p in pairs if got[p][0] == "other"]
        named = ", ".join(rest)
        if len(bad) > 1:
            return self.done(
                False,
                f"several pairs of {named}{on} give the newer release's verdict: "
                + "; ".join(" and ".join(p) for p in bad),
            )
        if bad:
            self.move(bad[0], self.after | got[bad[0]][1])
            return self.done(True)
        if len(other) == 1:
            self.move(other[0], got[other[0]][1])
            self.held, self.before = self.held | set(other[0]), got[other[0]][1]
            return None
        failed = [" and ".join(p) for p in pairs if got[p][0] in ("failed", "mixed")]
        if failed:
            self.notes.append(f"not ruled out: the pair(s) {'; '.join(failed)} (did not build or stayed mixed)")
        return self.done(
            False,
            f"no component of {named} alone{on}, nor any pair of them, gives the newer release's "
            "verdict" + (f" ({len(other)} pairs gave third verdicts)" if other else ""),
        )


def _unsure(unsure: list[str], got: dict, on: str) -> str:
    said = ", ".join(f"{c} ({'did not build' if got[c][0] == 'failed' else 'stayed mixed'})" for c in unsure)
    return f"not ruled out: {said}{on}"

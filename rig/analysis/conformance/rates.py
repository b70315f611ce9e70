"""Rates, not just verdicts, for the cells whose cycles disagree: how often each lifecycle verdict
came up on two cores, whether the difference is one a test calls significant, and how many more
cycles would tell.

A cell's cycles are pooled over its runs (a cell run twice on a core counts every cycle of both).
Between two cores, the verdict whose share moved most (the one that rose where two moved alike)
is compared by Fisher's exact test, two-sided, on the 2x2 table of its cycles and the others' on
each core, at ``ALPHA`` (0.05, one comparison at a time: no correction for the many a table
makes). Three cycles a side can never be significant at 0.05 (0/3 against 3/3 gives p = 0.1):
``more_cycles`` says how many more a side would need, were the rates seen to hold. Pure: the
hypergeometric sums are exact integers (``math.comb``), no scipy.
"""

from __future__ import annotations

import dataclasses
import math

ALPHA = 0.05  # the level a change of rate is called significant at (two-sided)
BUDGET = 30  # the most cycles ``more_cycles`` adds to each side before it gives up


def fisher_exact(a_k: int, a_n: int, b_k: int, b_n: int) -> float:
    """The two-sided p-value of Fisher's exact test on ``a_k`` of ``a_n`` against ``b_k`` of ``b_n``
    (the 2x2 table [[a_k, a_n - a_k], [b_k, b_n - b_k]]): the probability, with the margins fixed,
    of a table no likelier than the one seen (``scipy.stats.fisher_exact``'s, exactly)."""
    if not (0 <= a_k <= a_n and 0 <= b_k <= b_n):
        raise ValueError(f"counts out of range: {a_k}/{a_n}, {b_k}/{b_n}")
    k, n = a_k + b_k, a_n + b_n
    if n == 0 or k in (0, n) or 0 in (a_n, b_n):
        return 1.0
    weights = {x: math.comb(a_n, x) * math.comb(b_n, k - x) for x in range(max(0, k - b_n), min(k, a_n) + 1)}
    seen = weights[a_k]
    return min(1.0, sum(w for w in weights.values() if w <= seen) / math.comb(n, k))


def more_cycles(a_k: int, a_n: int, b_k: int, b_n: int, alpha: float = ALPHA, budget: int = BUDGET) -> int | None:
    """How many more cycles each of two cores needs before Fisher's exact test tells ``a_k`` of
    ``a_n`` from ``b_k`` of ``b_n`` at ``alpha``, were the rates seen to hold (each side's count
    scaled to its new cycles, rounded): 0 where it already does, None where the rates are the same or
    no number within ``budget`` (more cycles a side) would do."""
    if a_n == 0 or b_n == 0 or a_k * b_n == b_k * a_n:
        return None
    for m in range(budget + 1):
        na, nb = a_n + m, b_n + m
        if fisher_exact(_scaled(a_k, a_n, na), na, _scaled(b_k, b_n, nb), nb) < alpha:
            return m
    return None


def _scaled(k: int, n: int, to: int) -> int:
    return math.floor(k * to / n + 0.5)


@dataclasses.dataclass(frozen=True)
class Rate:
    """How often one lifecycle verdict came up on two cores, and what the test says of it."""

    verdict: str
    before: tuple[int, int]  # (cycles that gave it, cycles) on the first core
    after: tuple[int, int]  # and on the second
    p: float  # Fisher's exact test, two-sided
    more: int | None  # cycles more a side that would tell, as the rates stand (None: not within BUDGET)
    alpha: float = ALPHA

    @property
    def significant(self) -> bool:
        return self.p < self.alpha

    def text(self) -> str:
        """``rate of crashed 1/3 → 3/3``."""
        return f"rate of {self.verdict} {self.before[0]}/{self.before[1]} → {self.after[0]}/{self.after[1]}"

    def judged(self) -> str:
        """What the test says: ``significant (p = 0.002 < 0.05)``, or ``not significant at n=3+3
        (p = 0.40); 4 more cycles a side would tell at α = 0.05``."""
        if self.significant:
            return f"significant (Fisher's exact p = {_p(self.p)} < {self.alpha:g})"
        said = f"not significant at n={self.before[1]}+{self.after[1]} (p = {_p(self.p)})"
        if self.more is None:
            return said + f"; more cycles needed (more than {BUDGET} a side, as the rates stand)"
        return said + f"; more cycles needed: {self.more} more a side would tell at α = {self.alpha:g}"

    def summary(self) -> dict:
        return {
            "verdict": self.verdict,
            "before": list(self.before),
            "after": list(self.after),
            "p": self.p,
            "alpha": self.alpha,
            "significant": self.significant,
            "more_cycles": self.more,
        }


def _p(p: float) -> str:
    return f"{p:.2g}"


def rate_move(a: dict, b: dict, alpha: float = ALPHA, budget: int = BUDGET) -> Rate | None:
    """The move of rate between two cells' lifecycle verdicts (``Cell.lifecycle``: verdict ->
    cycles): the verdict whose share moved most (the one that rose, where two moved alike), tested
    (``fisher_exact``); None where every verdict's share is the same on both."""
    na, nb = sum(a.values()), sum(b.values())
    if not na or not nb:
        return None
    moved = [
        (abs(b.get(v, 0) * na - a.get(v, 0) * nb), b.get(v, 0) * na > a.get(v, 0) * nb, v)
        for v in sorted(set(a) | set(b))
        if b.get(v, 0) * na != a.get(v, 0) * nb
    ]
    if not moved:
        return None
    _, _, verdict = max(moved, key=lambda m: (m[0], m[1]))
    ka, kb = a.get(verdict, 0), b.get(verdict, 0)
    return Rate(
        verdict, (ka, na), (kb, nb), fisher_exact(ka, na, kb, nb), more_cycles(ka, na, kb, nb, alpha, budget), alpha
    )


def overlap(a: dict, b: dict) -> bool:
    """Whether two cells share a lifecycle verdict (then a change between them is one of rate too)."""
    return bool(set(a) & set(b))


def cycles_needed(a, b, alpha: float = ALPHA, budget: int = BUDGET) -> int | None:
    """How many more cycles each of two cells (anything with ``lifecycle``: verdict -> cycles, as
    ``Cell``) needs before their rates can be told apart at ``alpha`` (``more_cycles`` on the verdict
    whose share moved most, ``rate_move``): 0 where they already are, None where nothing moved or no
    number within ``budget`` would do."""
    moved = rate_move(a.lifecycle, b.lifecycle, alpha, budget)
    return None if moved is None else moved.more

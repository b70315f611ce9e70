"""Where a bisection's releases stand: the monthly releases between its good and bad ones, and
their bisection down to the two neighbours a change lies between (pure functions; ``rig bisect``
runs the cells)."""

from __future__ import annotations

from collections.abc import Callable


def releases_between(good: str, bad: str) -> list[str]:
    """The releases built from source here strictly between ``good`` and ``bad``, oldest first."""
    from rig.analysis.release_order import version_key
    from rig.runtimes.from_source.releases import RELEASES

    lo, hi = version_key(good), version_key(bad)
    return sorted((v for v in RELEASES if lo < version_key(v) < hi), key=version_key)


def narrow(inner: list[str], judge: Callable[[str], str]) -> tuple[str | None, str | None, list[str]]:
    """The releases ``inner`` (between the good and the bad one, oldest first) bisected by
    ``judge(version)`` (good, bad, or anything else: not judged, skipped): (the last good, the
    first bad, those between them that could not be judged). None: the good (bad) release itself."""
    lo, hi = -1, len(inner)
    skipped: set[int] = set()
    while True:
        left = [i for i in range(lo + 1, hi) if i not in skipped]
        if not left:
            break
        mid = left[len(left) // 2]
        got = judge(inner[mid])
        if got == "bad":
            hi = mid
        elif got == "good":
            lo = mid
        else:
            skipped.add(mid)
    return (
        inner[lo] if lo >= 0 else None,
        inner[hi] if hi < len(inner) else None,
        [inner[i] for i in range(lo + 1, hi)],
    )

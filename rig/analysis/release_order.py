"""Triton versions in order, and where a change between two cores run one after the other is
dated: the release, or the span of releases not run that it may have come in. Pure."""

from __future__ import annotations

import functools
import re


def version_key(v) -> tuple:
    """Triton versions in numeric order (2.9 < 2.10 < 2.48.0 < 2.51.0); a part that is not a number
    (``rc1``) sorts after the numbers at its place."""
    return _key(str(v))


@functools.lru_cache(maxsize=4096)  # a table sorts the same few dozen versions tens of thousands of times
def _key(text: str) -> tuple:
    parts = re.split(r"[.\-+]", text.split(SPAN)[-1])  # a span (2.68.0…2.70.0) sorts at its end
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


SPAN = "…"  # a change dated no closer than a span of releases: 2.68.0…2.70.0 (2.68.0 and 2.69.0 not run)


def releases(present=()) -> list[str]:
    """The Triton releases there are, in version order: the monthly ones (``rig.contract.ngc``'s
    table: the NGC images, 2.37.0 and 2.38.0 too, which no wheel bundles), those built from source
    here (``rig.runtimes.from_source.releases.RELEASES``), the cores the nvidia-pytriton wheels bundle, and
    ``present``."""
    from rig.contract import ngc
    from rig.runtimes.from_source.releases import RELEASES

    return sorted(
        {*(r.triton_version for r in ngc.RELEASES), *RELEASES, *ngc.PYTRITON_CORE.values(), *present}, key=version_key
    )


def between(a: str, b: str, present=()) -> list[str]:
    """The releases strictly between two cores (either order), oldest first."""
    lo, hi = sorted((a, b), key=version_key)
    return [v for v in releases(present) if version_key(lo) < version_key(v) < version_key(hi)]


def dated(before: str, after: str) -> str:
    """Where a change between two cores run one after the other is dated: ``after`` where no
    release lies between them, else the span of releases it may have come in (``2.68.0…2.70.0``:
    2.68.0 and 2.69.0 were not run), never a release that was not run given as a fact."""
    gap = between(before, after)
    return f"{gap[0]}{SPAN}{after}" if gap else after


def not_run_text(gap) -> str:
    """``2.56.0, 2.57.0 not run``, and where none of them can be run here, why: no nvidia-pytriton
    wheel bundles its core and its sources predate those here (r24.10, 2.51.0, on)."""
    from rig.contract import ngc

    gap = list(gap)
    text = f"{', '.join(gap)} not run"
    unreachable = [v for v in gap if v not in ngc.PYTRITON_CORE.values() and version_key(v) < version_key("2.51.0")]
    if gap and len(unreachable) == len(gap):
        text += (
            ": no nvidia-pytriton wheel bundles "
            + ("its core" if len(gap) == 1 else "their cores")
            + " and the sources here start at r24.10 (2.51.0), so it cannot be run here"
        )
    return text

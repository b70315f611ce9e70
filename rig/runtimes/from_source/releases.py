"""Triton versions and the release branches they are built from (pure functions).

A Triton release ``2.N.0`` ships as the NGC image ``YY.MM``, built from the release branches
``rYY.MM`` of core, common, backend and python_backend: ``r24.10`` is 2.51.0 and every month
since adds one (``r26.03`` is 2.67.0, the version of server#8755).
"""

from __future__ import annotations

from rig.common.errors import RigError
from rig.contract.versions import UnknownVersion, resolve_version

# The first release with a source build here (the last one the PyPI wheels bundle, 2.51.0, so a
# built core can be held against its embedded twin) and the newest one shipped (NGC 26.09).
FIRST = (24, 10, 51)
NEWEST_MINOR = 73

# The repositories of one runtime, in the order they are fetched.
COMPONENTS = ("core", "common", "backend", "python_backend")

# The built cores that are not exactly their release, and why (footnoted in the conformance grid's
# column): the kept conformance store records no component refs (a built runtime's runtime.json
# does, the runs table does not), so the reference run's are said here.
NOT_EXACT = {"2.71.0": "core built from core's main: the sources hold no core r26.07 branch"}


def _releases() -> dict[str, str]:
    """Every release from r24.10 to the newest: version → branch. One month shipped no new
    minor: 25.07 was 2.59.1, a patch of 25.06's 2.59.0 (r25.02 = 2.55.0, r26.03 = 2.67.0 and
    r26.07 = 2.71.0 are the branches' own TRITON_VERSION files in shared/triton-src/server)."""
    out = {}
    months = FIRST[0] * 12 + FIRST[1] - 1
    minor = FIRST[2]
    while minor <= NEWEST_MINOR:
        branch = f"r{months // 12:02d}.{months % 12 + 1:02d}"
        if branch == PATCH_MONTH[0]:
            out[PATCH_MONTH[1]] = branch
        else:
            out[f"2.{minor}.0"] = branch
            minor += 1
        months += 1
    return out


PATCH_MONTH = ("r25.07", "2.59.1")
RELEASES = _releases()
BRANCHES = {b: v for v, b in RELEASES.items()}


def known_range() -> str:
    first, last = next(iter(RELEASES)), list(RELEASES)[-1]
    return f"{first} to {last} (release branches {RELEASES[first]} to {RELEASES[last]})"


def parse(spec: str) -> tuple[str, str]:
    """Any name of a release (``rig.contract.versions``: ``2.67.0``, ``2.67``, ``r26.03``, the NGC tag
    ``26.03``, an nvidia-pytriton release's core) -> (``2.67.0``, ``r26.03``); a name that says no
    release, or one not built from source here, is refused in one line."""
    try:
        version = resolve_version(spec)
    except UnknownVersion as e:
        raise RigError(f"{e}; a source build knows {known_range()}") from None
    if version in RELEASES:
        return version, RELEASES[version]
    if identity_release(version) in RELEASES:
        raise RigError(
            f"{spec!r} names a variant built here ({version}): build its release with --ref or --patch, "
            f"or run it by that name"
        )
    said = "" if version == spec.strip() else f" ({spec.strip()})"
    raise RigError(
        f"Triton {version}{said} is not built from source here: a source build knows {known_range()}; "
        f"older cores come from PyPI (rig runtime install {version})"
    )


def identity_release(version: str) -> str:
    """The release of a variant's label (``2.68.0-va606228022`` -> ``2.68.0``), else the version."""
    return version.split("-v", 1)[0]


def parse_refs(items: list[str] | None) -> dict[str, str]:
    """``--ref core=main`` (repeatable; a branch, a tag or a commit) → {"core": "main"}."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, ref = item.partition("=")
        if not sep or not ref or name not in COMPONENTS:
            raise RigError(
                f"--ref {item!r}: say COMPONENT=REF (a branch, tag or commit), COMPONENT one of {', '.join(COMPONENTS)}"
            )
        out[name] = ref
    return out

"""One name for a version everywhere: every option that takes a Triton release (``rig runtime
build VERSION``, ``--runtime``, ``rig matrix --runtimes``, ``rig bisect --good/--bad``, ``rig report
--from/--to``) says it in any of four ways, and this one resolver turns each into the canonical
Triton version (the rig's ``triton_version`` column):

- the NGC tag: ``26.03`` (also ``26.03-py3``, ``nvcr.io/nvidia/tritonserver:26.03-py3``);
- the Triton version: ``2.67.0``, ``2.67`` (its ``.0``), ``v2.67.0``;
- the release branch of core, common, backend and python_backend: ``r26.03``;
- an nvidia-pytriton release: ``0.5.10``, the core it bundles (``2.48.0``).

25.07 shipped no new minor but 2.59.1: ``25.07`` and ``r25.07`` are 2.59.1, ``2.59`` is 2.59.0.
A variant built here (``2.68.0-va606228022``: ``rig.runtimes.from_source.identity``) is its own
name, kept as it is where its release resolves. Anything else is one line (``UnknownVersion``, a
``RigError``) that says the four ways and the range known. Data from ``rig.contract.ngc``; no
other import of the rig but its error type, so every layer may call it.
"""

from __future__ import annotations

import re

from rig.common.errors import RigError
from rig.contract.ngc import BY_TAG, BY_TRITON, PYTRITON_CORE, RELEASES

_VARIANT = re.compile(r"(?P<version>2\.\d+\.\d+)-v[0-9a-f]{10}")


class UnknownVersion(RigError):
    """A name that is none of an NGC tag, a Triton version, a release branch or an nvidia-pytriton
    release known here: its message is the one line to print."""


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def known_versions() -> list[str]:
    """Every Triton version a name can resolve to, oldest first: the NGC table's and the cores
    the nvidia-pytriton wheels bundle (2.33.0, nvidia-pytriton 0.2.5's, is older than the table)."""
    return sorted({*BY_TRITON, *PYTRITON_CORE.values()}, key=_key)


def known_words() -> str:
    """The range known, in words (every error line ends with it)."""
    wheels = sorted(PYTRITON_CORE, key=_key)
    have = known_versions()
    return (
        f"known: Triton {have[0]} to {have[-1]}, NGC {RELEASES[0].ngc_tag} to {RELEASES[-1].ngc_tag} "
        f"(branches r{RELEASES[0].ngc_tag} to r{RELEASES[-1].ngc_tag}), nvidia-pytriton {wheels[0]} to {wheels[-1]}"
    )


def _tag(text: str) -> str | None:
    """An NGC tag in any of its spellings (``26.03``, ``26.03-py3``, the image's name), or None."""
    tag = text.rsplit(":", 1)[-1].removesuffix("-py3")
    return tag if tag in BY_TAG else None


def resolve_version(name: str) -> str:
    """The canonical Triton version a name says (``26.03``, ``2.67``, ``r26.03`` -> ``2.67.0``;
    ``0.5.10`` -> ``2.48.0``; ``25.07`` -> ``2.59.1``); a variant's label as it is. Raises
    ``UnknownVersion`` (one line) for anything else."""
    text = str(name).strip()
    if text in PYTRITON_CORE:  # before the tag: no tag is an x.y.z, but say it first
        return PYTRITON_CORE[text]
    bare = text.removeprefix("v")
    if re.fullmatch(r"2\.\d+", bare):
        bare += ".0"
    if bare in BY_TRITON or bare in PYTRITON_CORE.values():
        return bare
    variant = _VARIANT.fullmatch(bare)
    if variant and variant["version"] in BY_TRITON:
        return bare
    tag = _tag(text.removeprefix("r") if re.fullmatch(r"r\d\d\.\d\d", text) else text)
    if tag is not None:
        return BY_TAG[tag].triton_version
    raise UnknownVersion(
        f"unknown version {name!r}: say an NGC tag (26.03), a Triton version (2.67.0 or 2.67), a release "
        f"branch (r26.03) or an nvidia-pytriton release (0.5.10); {known_words()}"
    )


def is_version_name(name: str) -> bool:
    """Whether ``resolve_version`` knows this name."""
    try:
        resolve_version(name)
    except UnknownVersion:
        return False
    return True


def branch_of(version: str) -> str:
    """The release branch of a canonical Triton version (``2.67.0`` -> ``r26.03``); KeyError where
    the NGC table has none (a core only a wheel bundles, older than the table)."""
    return BY_TRITON[version].branch

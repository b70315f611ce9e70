"""A build's identity is everything in it.

A release built as it is (every component at its release branch, no patch) keeps the release's
name: ``built-2.67.0``. A build with a component at another branch, tag or commit (``--ref``), or
with a diff applied (``--patch``), is a *variant*: its name and its cache key are the release's
version and a key derived from every component's commit and every patch's hash
(``built-2.68.0-va606228022``: 2.68.0 with python_backend PR #429), so it never overwrites the
release, and the same variant asked again is a cache hit. Its results are filed under that name
too, beside the release's, never in its column.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

from rig.common.errors import RigError

COMMIT = re.compile(r"[0-9a-f]{7,40}")  # what --ref takes as a commit (a branch or tag is named)
VARIANT = re.compile(r"(?P<version>2\.\d+\.\d+)-v(?P<key>[0-9a-f]{10})")


@dataclasses.dataclass(frozen=True)
class Patch:
    """A diff applied to one component before it is built (``--patch COMPONENT=FILE``)."""

    component: str
    path: str  # absolute
    sha256: str  # of the file's bytes: a patch's part of the variant's key

    @property
    def name(self) -> str:
        return Path(self.path).name


def parse_patches(items: list[str] | None, components: tuple[str, ...]) -> tuple[Patch, ...]:
    """``--patch python_backend=FILE`` (repeatable, applied in the order given) as patches; a
    component that is not one, or a file that is not there or holds no diff, is one line."""
    out = []
    for item in items or ():
        name, sep, file = item.partition("=")
        if not sep or not file or name not in components:
            raise RigError(f"--patch {item!r}: say COMPONENT=FILE, COMPONENT one of {', '.join(components)}")
        path = Path(file).expanduser()
        try:
            data = path.read_bytes()
        except OSError as e:
            raise RigError(f"--patch {item}: cannot read {path} ({e.strerror or e}); give a diff file") from None
        if b"\n@@ " not in data and not data.startswith(b"@@ "):
            raise RigError(f"--patch {item}: {path} holds no unified diff (no @@ hunk); give one made by git diff")
        out.append(Patch(name, str(path.resolve()), hashlib.sha256(data).hexdigest()))
    return tuple(out)


def variant_key(commits: dict[str, str], patches: tuple[Patch, ...]) -> str:
    """Ten hex digits of a hash over every component's commit and every patch's hash, in order."""
    h = hashlib.sha256()
    for name in sorted(commits):
        h.update(f"{name}={commits[name]}\n".encode())
    for p in patches:
        h.update(f"patch {p.component} {p.sha256}\n".encode())
    return h.hexdigest()[:10]


def label(version: str, commits: dict[str, str], patches: tuple[Patch, ...]) -> str:
    """The variant's name after ``built-``: ``2.68.0-va606228022``."""
    return f"{version}-v{variant_key(commits, patches)}"


def is_variant(label_or_version: str) -> bool:
    return VARIANT.fullmatch(label_or_version) is not None


def release_of(label_or_version: str) -> str:
    """The release a variant was built from (``2.67.0-v...`` -> ``2.67.0``); a release itself."""
    m = VARIANT.fullmatch(label_or_version)
    return m["version"] if m else label_or_version


def describe_variant(m: dict) -> str:
    """What a variant's manifest says it is, in words: the components not at the release's branch,
    each with its commit, and the patches applied ("" for a release)."""
    v = m.get("variant") or {}
    if not v:
        return ""
    commits = m.get("commits", {})
    parts = [f"{c} at {ref} ({commits.get(c, '?')[:8]})" for c, ref in sorted(v.get("refs", {}).items())]
    parts += [f"{p['component']} patched with {p['file']} (sha256 {p['sha256'][:12]})" for p in v.get("patches", [])]
    return f"a variant of {m.get('release') or m.get('triton_version')}: " + ", ".join(parts)

"""A build's identity is everything in it (rig.runtimes.from_source.identity): a release keeps its name, a build with a
component at another ref or commit, or with a patch, is a variant named by every component's commit
and every patch's hash; its refs are resolved, and its patches checked, against the git bundles
before anything compiles. The compile itself: tests/runtimes/test_built_runtime.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, rig

from rig.common.errors import RigError
from rig.runtimes.from_source import identity, releases
from rig.runtimes.from_source.sources import Sources, apply_patch, checkout

BUNDLES = Path(os.environ.get("RIG_TRITON_SOURCES") or ROOT.parent / "shared" / "triton-src")
PR429 = BUNDLES / "patches" / "python_backend-pr429.diff"
needs_bundles = pytest.mark.skipif(not (BUNDLES / "python_backend.bundle").exists(),
                                   reason=f"no git bundles at {BUNDLES}")
COMMITS = {"core": "a" * 40, "common": "b" * 40, "backend": "c" * 40, "python_backend": "d" * 40}


def _diff(tmp_path: Path, text: str = "@@ -1 +1 @@\n-a\n+b\n") -> Path:
    f = tmp_path / "fix.diff"
    f.write_text("diff --git a/x b/x\n--- a/x\n+++ b/x\n" + text)
    return f


def test_patches_are_read_and_bad_ones_are_one_line(tmp_path):
    f = _diff(tmp_path)
    (p,) = identity.parse_patches([f"python_backend={f}"], releases.COMPONENTS)
    assert p.component == "python_backend" and p.path == str(f.resolve()) and len(p.sha256) == 64
    for item, needle in ((f"server={f}", "COMPONENT one of core"), ("core", "say COMPONENT=FILE"),
                         (f"core={tmp_path / 'none.diff'}", "cannot read"),
                         (f"core={tmp_path}", "cannot read")):
        with pytest.raises(RigError, match=needle):
            identity.parse_patches([item], releases.COMPONENTS)
    empty = tmp_path / "empty.diff"
    empty.write_text("not a diff\n")
    with pytest.raises(RigError, match="no unified diff"):
        identity.parse_patches([f"core={empty}"], releases.COMPONENTS)


def test_a_variants_name_moves_with_every_commit_and_every_patch(tmp_path):
    (p,) = identity.parse_patches([f"python_backend={_diff(tmp_path)}"], releases.COMPONENTS)
    other = tmp_path / "other"
    other.mkdir()
    other_diff = _diff(other, "@@ -1 +1 @@\n-a\n+c\n")
    (q,) = identity.parse_patches([f"python_backend={other_diff}"], releases.COMPONENTS)
    base = identity.label("2.67.0", COMMITS, ())
    assert identity.is_variant(base) and identity.release_of(base) == "2.67.0" and base.startswith("2.67.0-v")
    assert identity.label("2.67.0", dict(COMMITS), ()) == base  # the same variant asked again: a cache hit
    others = {identity.label("2.67.0", {**COMMITS, "core": "e" * 40}, ()), identity.label("2.67.0", COMMITS, (p,)),
              identity.label("2.67.0", COMMITS, (q,)), identity.label("2.67.0", COMMITS, (p, q)),
              identity.label("2.67.0", COMMITS, (q, p))}
    assert len(others | {base}) == 6  # each commit, each patch and their order are in the name
    assert not identity.is_variant("2.67.0") and identity.release_of("2.67.0") == "2.67.0"


def test_a_variant_says_what_it_is():
    m = {"triton_version": "2.68.0", "release": "2.68.0", "commits": COMMITS,
         "variant": {"refs": {"core": "main"},
                     "patches": [{"component": "python_backend", "file": "pr429.diff", "sha256": "f" * 64}]}}
    said = identity.describe_variant(m)
    assert said.startswith("a variant of 2.68.0: core at main (aaaaaaaa)")
    assert "python_backend patched with pr429.diff (sha256 ffffffffffff)" in said
    assert identity.describe_variant({"triton_version": "2.68.0"}) == ""  # a release


@needs_bundles
def test_refs_resolve_to_commits_in_a_mirror_and_unknown_ones_are_one_line(tmp_path):
    s = Sources(str(BUNDLES))
    mirror = s.mirror("python_backend", tmp_path / "mirrors", lambda line: None)
    branch = s.resolve("python_backend", "r26.03", mirror)
    assert len(branch) == 40
    assert s.resolve("python_backend", branch[:10], mirror) == branch  # an abbreviated commit
    assert s.mirror("python_backend", tmp_path / "mirrors", lambda line: None) == mirror  # brought up to date
    assert s.pick("python_backend", "r26.03", override=branch[:10])[0] == branch[:10]  # a commit is a ref
    with pytest.raises(RigError, match="no such branch, tag or commit of python_backend"):
        s.resolve("python_backend", "0123456789abcdef", mirror)
    with pytest.raises(RigError, match="no such branch or tag of python_backend"):
        s.pick("python_backend", "r26.03", override="r99.99")


@needs_bundles
@pytest.mark.skipif(not PR429.exists(), reason=f"no {PR429}")
def test_a_patch_applies_where_it_fits_and_is_one_line_where_it_does_not(tmp_path):
    s = Sources(str(BUNDLES))
    mirror = s.mirror("python_backend", tmp_path / "mirrors", lambda line: None)
    (p,) = identity.parse_patches([f"python_backend={PR429}"], releases.COMPONENTS)
    new = s.resolve("python_backend", "r26.04", mirror)  # 2.68.0's: the diff's base is there
    checkout(mirror, new, tmp_path / "new", lambda line: None)
    apply_patch(tmp_path / "new", "python_backend", new, p, lambda line: None)
    assert "DestroyPythonObjects" in (tmp_path / "new" / "src" / "pb_stub.cc").read_text()
    old = s.resolve("python_backend", "r24.10", mirror)  # 2.51.0's: long before it
    checkout(mirror, old, tmp_path / "old", lambda line: None)
    with pytest.raises(RigError, match=rf"does not apply to python_backend at {old[:8]}"):
        apply_patch(tmp_path / "old", "python_backend", old, p, lambda line: None)
    status = subprocess.run(["git", "-C", str(tmp_path / "old"), "status", "--porcelain"], capture_output=True,
                            text=True, check=True).stdout
    assert status == ""  # nothing half applied


def test_the_command_line_refuses_a_bad_patch_in_one_line(tmp_path):
    p = rig("runtime", "build", "2.67.0", "--patch", f"python_backend={tmp_path / 'none.diff'}",
            env={"RIG_HOME": str(tmp_path)}, timeout=60)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "cannot read" in lines[0], p.stderr


def test_runtime_list_says_what_a_variant_is(tmp_path):
    import json

    root = tmp_path / "runtimes" / "built-2.68.0-va606228022"
    root.mkdir(parents=True)
    (root / "runtime.json").write_text(json.dumps({
        "recipe": 1, "triton_version": "2.68.0", "label": "2.68.0-va606228022", "release": "2.68.0", "branch": "r26.04",
        "refs": {"python_backend": "r26.04"}, "commits": COMMITS, "pythons": {"3.11": "python"},
        "variant": {"refs": {}, "patches": [{"component": "python_backend", "file": "python_backend-pr429.diff",
                                             "path": "/x.diff", "sha256": "19d68386f208" + "0" * 52}]}}))
    p = rig("runtime", "list", env={"RIG_HOME": str(tmp_path)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "built-2.68.0-va606228022" in p.stdout
    said = "a variant of 2.68.0: python_backend patched with python_backend-pr429.diff (sha256 19d68386f208)"
    assert said in p.stdout

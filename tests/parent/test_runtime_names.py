"""`--runtime` (soak, cycle, bench) and the matrix's runtime names take any name of a release
(rig.contract.versions): the NGC tag, the branch, the Triton version, a wheel's version; a core
only a wheel bundles is that wheel's runtime, a newer one the build; an unknown release is one line."""

from __future__ import annotations

import pytest

from rig.common.errors import RigError
from rig.parent import runtime


@pytest.mark.parametrize(("name", "runtime_name"), [
    ("26.03", "2.67.0"), ("r26.03", "2.67.0"), ("2.67", "2.67.0"), ("2.67.0", "2.67.0"),
    ("25.07", "2.59.1"), ("24.10", "2.51.0"),              # 2.51.0 by a version is the build
    ("2.48.0", "0.5.10"), ("24.07", "0.5.10"), ("r24.07", "0.5.10"),   # only a wheel bundles 2.48.0
    ("0.5.10", "0.5.10"), ("0.7.0", "0.7.0"),              # a wheel's own version stays
    ("built-2.67.0", "built-2.67.0"), ("embedded-0.7.0", "embedded-0.7.0"),
    ("2.68.0-va606228022", "2.68.0-va606228022"), ("container", "container"), ("auto", "auto"),
])
def test_runtime_names(name, runtime_name):
    assert runtime.runtime_name(name) == runtime_name


@pytest.mark.parametrize("name", ["2.99.0", "r23.01", "30.01", "2.67.1"])
def test_a_release_not_known_is_the_resolvers_line(name):
    with pytest.raises(RigError, match=rf"unknown version '{name}': say an NGC tag"):
        runtime.runtime_name(name)
    with pytest.raises(RigError, match="unknown version"):
        runtime.resolve(name, auto_install=False)


def test_resolve_says_what_a_tag_named(monkeypatch, tmp_path):
    seen: list[str] = []
    monkeypatch.setattr(runtime, "_embedded_root", lambda v: tmp_path / v)
    with pytest.raises(RigError, match=r"`rig runtime install 2\.48\.0`"):
        runtime.resolve("24.07", auto_install=False, log=seen.append)
    assert seen == ["24.07 is Triton 2.48.0, the core of nvidia-pytriton 0.5.10: runtime embedded-0.5.10"]
    monkeypatch.setenv("RIG_HOME", str(tmp_path))
    seen.clear()
    with pytest.raises(RigError, match=r"runtime '2\.67\.0' is not built here.*rig runtime build 2\.67\.0"):
        runtime.resolve("26.03", auto_install=False, log=seen.append)
    assert seen == ["26.03 is Triton 2.67.0, runtime built-2.67.0"]


def test_install_takes_any_name_and_refuses_a_build_only_release_before_a_download():
    for name in ("26.03", "r26.03", "2.67"):
        with pytest.raises(RigError, match=r"no PyPI wheel bundles Triton 2\.67\.0 .*rig runtime build 2\.67\.0"):
            runtime.install_embedded(name)
    with pytest.raises(RigError, match=r"unknown version '2\.99\.0'"):
        runtime.install_embedded("2.99.0")

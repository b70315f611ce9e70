"""One name for a version: a Triton version that only a PyPI wheel bundles names that wheel's
runtime (``2.48.0`` is nvidia-pytriton ``0.5.10``), in `rig runtime install`, `--runtime` and
`rig matrix --runtimes`; the wheel's own version still works and is said back as its Triton."""

from __future__ import annotations

import pytest

from rig.workflows.matrix_plan import parse_runtimes
from rig.common.errors import RigError
from rig.contract import ngc
from rig.parent import runtime


def test_the_newest_wheel_of_a_core():
    assert ngc.pytriton_of("2.48.0") == "0.5.10"
    assert ngc.pytriton_of("2.44.0") == "0.5.6"
    assert ngc.pytriton_of("2.51.0") == "0.7.0"
    assert ngc.pytriton_of("2.52.0") is None


def test_a_triton_version_is_a_wheel_only_where_no_build_can_be_meant():
    assert ngc.embedded_alias("2.48.0") == "0.5.10"
    assert ngc.embedded_alias("2.51.0") is None   # built here from r24.10 too: built-2.51.0
    assert ngc.embedded_alias("2.67.0") is None
    assert ngc.embedded_alias("0.5.10") is None and ngc.embedded_alias("r24.10") is None


def test_matrix_takes_either_name_for_the_same_runtime():
    known = dict(ngc.PYTRITON_CORE)
    assert parse_runtimes("2.48.0", ["0.5.10"], known) == ["0.5.10"]
    assert parse_runtimes("0.5.10,2.48.0", ["0.5.10"], known) == ["0.5.10"]
    with pytest.raises(RigError, match="rig runtime build 2.67.0"):
        parse_runtimes("2.67.0", ["0.5.10"], known)


def test_a_triton_no_wheel_bundles_is_refused_before_a_download():
    with pytest.raises(RigError, match="rig runtime build 2.60.0"):
        runtime.install_embedded("2.60.0")


def test_resolve_names_the_wheels_runtime(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(runtime, "_embedded_root", lambda v: tmp_path / v)
    with pytest.raises(RigError, match=r"not installed: run `rig runtime install 2\.48\.0`"):
        runtime.resolve("2.48.0", auto_install=False, log=seen.append)
    # a wheel's version is an alias: the command said back names the Triton version
    with pytest.raises(RigError, match=r"`rig runtime install 2\.48\.0`"):
        runtime.resolve("0.5.10", auto_install=False)
    # four wheels bundle 2.51.0 (also a source build): the wheel's own version is what installs it
    assert runtime.install_line("0.6.0") == "rig runtime install 0.6.0"
    assert runtime.install_line("0.7.0") == "rig runtime install 2.51.0"
    assert seen == ["Triton 2.48.0 is the core of nvidia-pytriton 0.5.10: runtime embedded-0.5.10"]

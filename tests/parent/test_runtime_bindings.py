"""Which `tritonserver` bindings an official-API cycle ran (rig.parent.runtime.official_bindings):
a built runtime's own folder ahead of the environment's install, as the worker's path has it; the
version and whether it is the core's release's own go on every cycle (``tritonserver_version``,
``bindings_own``) and the run's ``tritonserver_version`` says the same."""

from __future__ import annotations

import sys

from rig.contract.runtime import BuiltRuntime, EmbeddedRuntime
from rig.parent import runtime
from rig.parent.orchestrator.prepare import package_versions


def _bindings(folder, version):
    (folder / "tritonserver").mkdir(parents=True)
    (folder / "tritonserver" / "__init__.py").write_text("")
    info = folder / f"tritonserver-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tritonserver\nVersion: {version}\n")
    return str(folder)


def _built(version, bindings=None):
    return BuiltRuntime(name=f"built-{version}", triton_version=version, server_dir="/x", core_library="/x/lib",
                        backend_dir="/x/backends", bindings=bindings)


def test_a_builds_own_bindings_come_first(tmp_path, monkeypatch):
    installed = tmp_path / "site"
    _bindings(installed, "2.71.0")  # the environment's install: PyPI's 2.71.0, as in the sandbox
    monkeypatch.setattr(sys, "path", [str(installed), *sys.path])
    own = _bindings(tmp_path / "own", "2.51.0")
    assert runtime.official_bindings(_built("2.51.0", own)) == ("2.51.0", True)
    # a variant's bindings are its release's
    assert runtime.official_bindings(_built("2.68.0-va606228022", _bindings(tmp_path / "v", "2.68.0"))) == (
        "2.68.0", True)
    # a core without bindings of its own: the environment's, not the release's
    assert runtime.official_bindings(_built("2.51.0")) == ("2.71.0", False)
    wheel = EmbeddedRuntime(name="embedded-0.5.10", triton_version="2.48.0", server_dir="/x", core_library="/x/lib",
                            backend_dir="/x/backends")
    assert runtime.official_bindings(wheel) == ("2.71.0", False)
    assert runtime.official_bindings(_built("2.71.0")) == ("2.71.0", True)
    # the run's row says the version the workers import
    got = package_versions("tritonserver", False, None, own)
    assert got["tritonserver_version"] == "2.51.0"
    assert package_versions("tritonserver", False, None)["tritonserver_version"] == "2.71.0"
    assert package_versions("capi", False, None, own)["tritonserver_version"] is None


def test_none_installed(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert runtime.official_bindings(_built("2.67.0")) == (None, None)


def test_every_official_cycle_carries_them_and_no_other(tmp_path, monkeypatch):
    import dataclasses
    from types import SimpleNamespace

    from rig.contract.rows import CycleRow
    from rig.parent.orchestrator.rows import bindings_tags

    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    own = _bindings(tmp_path / "own", "2.51.0")
    tags = bindings_tags(SimpleNamespace(engine="tritonserver", runtime=_built("2.51.0", own)))
    assert tags == {"tritonserver_version": "2.51.0", "bindings_own": True}
    assert set(tags) <= {f.name for f in dataclasses.fields(CycleRow)}
    assert bindings_tags(SimpleNamespace(engine="capi", runtime=_built("2.51.0", own))) == {}

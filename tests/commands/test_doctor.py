"""`rig doctor`'s report (rig.workflows.doctor), part by part, over stand-ins for the runtimes and
engines found here; and the command, which prints it. (The versions' and the GPU's lines:
tests/contract/test_versions.py, tests/common/test_gpu_probes.py; `rig doctor` run whole:
tests/contract/test_versions.py.)"""

from __future__ import annotations

from pathlib import Path

from rig.commands import doctor as doctor_command
from rig.common.errors import Exit, RigError
from rig.workflows import doctor


class _Rt:
    triton_version = "2.70.0"
    name = "embedded-0.7.0"


def _runtimes(monkeypatch, *, embedded=(), built=(), container=None, python="cp311"):
    from rig.parent import runtime

    def container_runtime():
        if isinstance(container, Exception):
            raise container
        return container

    monkeypatch.setattr(runtime, "container_runtime", container_runtime)
    monkeypatch.setattr(runtime, "libpython_problem", lambda: None)
    monkeypatch.setattr(runtime, "list_embedded", lambda: list(embedded))
    monkeypatch.setattr(runtime, "list_built", lambda: list(built))
    monkeypatch.setattr(runtime, "python_tag", lambda: python)
    monkeypatch.setattr("rig.runtimes.from_source.cache.describe", lambda b: f"about {b['name']}")


def test_the_runtimes_lines(monkeypatch):
    _runtimes(
        monkeypatch,
        embedded=[{"name": "embedded-0.7.0", "triton_version": "2.51.0", "stubs": ["cp312"]}],
        built=[
            {"name": "built-2.70.0", "triton_version": "2.70.0", "pythons": ["cp311"], "current": True},
            {"name": "built-2.60.0", "triton_version": "2.60.0", "pythons": ["cp311"], "current": False},
        ],
        container=_Rt(),
    )
    lines = doctor.runtime_lines(Path("/opt/tritonserver"))
    assert lines == [
        "runtime     container: Triton 2.70.0 in /opt/tritonserver",
        "libpython   found: the backend stubs of the embedded and built cores can start",
        "runtime     embedded-0.7.0: Triton 2.51.0 (no stub for Python cp311: unusable with this interpreter)",
        "runtime     built-2.70.0: Triton 2.70.0 built from source",
        "runtime       about built-2.70.0",
        "runtime     built-2.60.0: Triton 2.60.0 built from source (an older recipe: rig runtime build --force)",
        "runtime       about built-2.60.0",
    ]


def test_no_container_and_no_embedded_core_say_so(monkeypatch):
    _runtimes(monkeypatch)
    lines = doctor.runtime_lines(None)
    assert lines[0] == "runtime     container: none (/opt/tritonserver missing, TRITON_HOME unset)"
    assert lines[-1].startswith("runtime     embedded: none installed (`rig runtime install` adds ")
    _runtimes(monkeypatch, container=RigError("no tritonserver library"))
    assert doctor.runtime_lines(Path("/x"))[0] == "runtime     container: unusable: no tritonserver library"


def test_the_engines_lines(monkeypatch):
    from rig.parent import engines, runtime

    monkeypatch.setattr(engines, "official_probe", lambda paired=None: (True, "imports" if paired else "found"))
    monkeypatch.setattr(runtime, "resolve", lambda name, auto_install: _Rt())
    assert doctor.engine_lines() == [
        "engine      tritonserver: usable: over embedded-0.7.0: imports",
        "engine      capi: usable wherever a runtime's core loads (ctypes over tritonserver.h)",
    ]

    def nothing(name, auto_install):
        raise RigError("no runtime here")

    monkeypatch.setattr(runtime, "resolve", nothing)
    said = doctor.engine_lines()[0]
    assert said == "engine      tritonserver: usable: found; no runtime to pair it with (no runtime here)"
    monkeypatch.setattr(engines, "official_probe", lambda paired=None: (False, "No module named 'tritonserver'"))
    assert doctor.engine_lines()[0] == "engine      tritonserver: unusable: No module named 'tritonserver'"


def test_a_dependency_that_does_not_import_is_named(monkeypatch):
    monkeypatch.setattr(doctor, "DEPENDENCIES", {"rig_no_such_module": "rig-no-such-dist"})
    (line,) = doctor.dependency_problems()
    assert line.startswith("rig-no-such-dist not installed does not import: ")


def test_the_command_prints_the_report(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "report", lambda: "python      3.x\nlocust      2.x")
    assert doctor_command.run(None) == Exit.OK
    assert capsys.readouterr().out == "python      3.x\nlocust      2.x\n"

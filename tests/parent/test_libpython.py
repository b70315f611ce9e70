"""The backend stubs of the embedded and built cores link libpython3.X.so.1.0: a Python without it
is told what to install before a run, not left with Triton's "stub unhealthy"."""

from __future__ import annotations

from rig.parent import runtime


def test_this_interpreter_has_its_libpython():
    assert runtime.libpython_problem() is None  # the suite's own stubs start on it


def test_a_folder_with_the_library_is_enough(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "_SYSTEM_LIBDIRS", ())
    (tmp_path / "libpython3.99.so.1.0").write_bytes(b"")
    assert runtime.libpython_problem([str(tmp_path)], "3.99") is None


def test_without_it_one_line_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "_SYSTEM_LIBDIRS", ())
    problem = runtime.libpython_problem([str(tmp_path)], "3.99")
    assert "libpython3.99.so.1.0" in problem and "apt-get install libpython3.99" in problem
    assert "\n" not in problem

"""The backend stubs' crash recorder (rig/worker/hook/crash.c, built by rig/worker/hook/crashlib.py, armed by
the evidence hook): a process that arms it and dies of a signal of its own leaves a crash
marker and still dies of that signal; one that exits (cleanly, by os._exit, or killed by the
rig's SIGKILL) leaves none. End to end (slow): the `metrics` scenario's stub segfaults after
its finalize (server#8662), a stop the core calls clean, and the cycle says `aborted_at_exit` (a stub
that died after every finalize it owed, apart from one that crashed before or during the stop)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import ROOT, cycles, rig

from rig.contract import evidence

from rig.scenarios import catalog as scenarios
from rig.scenarios import setup as scenario_setup
from rig.common.errors import RigError
from rig.worker.hook import crashlib

HOOK = ROOT / "rig" / "worker" / "hook" / "evidence.py"


@pytest.fixture(scope="module")
def lib() -> str:
    return crashlib.build()


def _run(code: str, folder: Path, lib: str | None, **env) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter, after arming the recorder the way a stub does: the real
    hook file run with the evidence folder and the library named in the environment."""
    prelude = f"exec(compile(open({str(HOOK)!r}).read(), 'evidence.py', 'exec'), {{'__name__': 'rig_evidence_hook'}})\n"
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONFAULTHANDLER", crashlib.ENV)}
    full.update(env, RIG_EVIDENCE_DIR=str(folder), **({crashlib.ENV: lib} if lib else {}))
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=60)


def _crash_markers(folder: Path) -> list[dict]:
    return [m for m in evidence.read_markers(folder) if m.get("phase") == "crash"]


@pytest.mark.parametrize("code, sig", [
    ("import ctypes; ctypes.string_at(0)", signal.SIGSEGV),                     # a real fault
    ("import os; os.abort()", signal.SIGABRT),
    ("import signal; signal.raise_signal(signal.SIGBUS)", signal.SIGBUS),
    ("import signal; signal.raise_signal(signal.SIGFPE)", signal.SIGFPE),
    ("import signal; signal.raise_signal(signal.SIGILL)", signal.SIGILL),
], ids=["segv", "abort", "bus", "fpe", "ill"])
def test_a_crash_leaves_its_marker_and_the_process_still_dies_of_its_signal(tmp_path, lib, code, sig):
    t0 = time.monotonic()
    p = _run(code, tmp_path, lib)
    t1 = time.monotonic()
    assert p.returncode == -sig, p.stderr[-2000:]
    [marker] = _crash_markers(tmp_path)
    assert marker["signal"] == sig and marker["phase"] == "crash"
    assert (tmp_path / f"{marker['pid']}-crash-{int(sig)}.json").exists()
    assert t0 < marker["t_mono"] < t1  # the clock of the finalize markers and of the rig
    assert not list(tmp_path.glob("*.tmp"))
    assert evidence.summarize_markers(evidence.read_markers(tmp_path), None, crash_recorder=True)["stub_crashes"] == 1


def test_a_crash_after_python_is_finalized_is_recorded(tmp_path, lib):
    """server#8662's shape: the model initializes and finalizes, the interpreter is torn down,
    and only then the process dies of SIGSEGV (raised from a C exit handler)."""
    p = _run("""
        import ctypes, signal
        class TritonPythonModel:
            def initialize(self, args): pass
            def finalize(self): pass
        m = TritonPythonModel()
        m.initialize({"model_name": "m", "model_instance_name": "m_0"})
        m.finalize()
        libc = ctypes.CDLL(None)
        # __cxa_atexit(fn, arg, dso): raise(SIGSEGV) as exit() runs, after Py_Finalize
        libc.__cxa_atexit(ctypes.cast(libc["raise"], ctypes.c_void_p), ctypes.c_void_p(int(signal.SIGSEGV)), None)
        print("finalized", flush=True)
    """, tmp_path, lib)
    assert p.returncode == -signal.SIGSEGV and p.stdout.strip() == "finalized", p.stderr[-2000:]
    s = evidence.summarize_markers(evidence.read_markers(tmp_path), None, crash_recorder=True)
    assert (s["finalize_expected"], s["finalize_after_stop"], s["stub_crashes"]) == (1, 1, 1)


@pytest.mark.parametrize("code, status", [
    ("print('ok')", 0),
    ("import os; os._exit(3)", 3),                                  # the stub-exits fault
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),  # the rig's kill
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
], ids=["clean", "os_exit", "sigkill", "sigterm"])
def test_an_exit_or_a_kill_leaves_no_crash_marker(tmp_path, lib, code, status):
    p = _run(code, tmp_path, lib)
    assert p.returncode == status, p.stderr[-2000:]
    assert not list(tmp_path.iterdir())
    assert evidence.summarize_markers([], None, crash_recorder=True)["stub_crashes"] == 0


def test_a_forked_child_that_crashes_is_not_the_stub(tmp_path, lib):
    p = _run("""
        import ctypes, os
        pid = os.fork()
        if pid == 0:
            ctypes.string_at(0)
        _, status = os.waitpid(pid, 0)
        print(os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exited")
    """, tmp_path, lib)
    assert p.returncode == 0 and p.stdout.strip() == str(int(signal.SIGSEGV)), p.stderr[-2000:]
    assert not _crash_markers(tmp_path)


def test_faulthandler_still_runs_after_the_marker(tmp_path, lib):
    """The recorder hands the signal to the action it found (here Python's faulthandler), so a
    stub's own crash report is kept."""
    p = _run("import ctypes; ctypes.string_at(0)", tmp_path, lib, PYTHONFAULTHANDLER="1")
    assert p.returncode == -signal.SIGSEGV
    assert "Segmentation fault" in p.stderr and len(_crash_markers(tmp_path)) == 1


def test_a_library_that_is_missing_or_not_ours_never_breaks_the_stub(tmp_path, lib):
    shared = tmp_path / "shared.so"
    shared.write_bytes(Path(lib).read_bytes())
    shared.chmod(0o775)  # group-writable: the hook refuses to load it
    text = tmp_path / "text.so"
    text.write_text("not a library")
    text.chmod(0o755)
    for bad in (str(tmp_path / "missing.so"), str(text), str(shared)):
        folder = tmp_path / Path(bad).stem
        folder.mkdir()
        ok = _run("print('ok')", folder, bad)
        assert ok.returncode == 0 and ok.stdout.strip() == "ok" and not ok.stderr, (bad, ok.stderr)
        crash = _run("import ctypes; ctypes.string_at(0)", folder, bad)
        assert crash.returncode == -signal.SIGSEGV and not _crash_markers(folder), bad


def test_arm_env_names_the_library_to_the_stubs_or_nothing(tmp_path, monkeypatch, lib):
    monkeypatch.delenv(crashlib.ENV, raising=False)
    assert crashlib.arm_env() == lib == os.environ[crashlib.ENV]
    assert lib.startswith(str(crashlib.build_dir())) and not os.stat(lib).st_mode & 0o022
    monkeypatch.setenv("RIG_HOME", str(tmp_path))  # an empty cache: it must compile
    monkeypatch.setattr(crashlib, "_compiler", lambda: None)
    with pytest.raises(RigError, match="no C compiler"):
        crashlib.build()
    said = []
    assert crashlib.arm_env(log=said.append) is None
    assert crashlib.ENV not in os.environ and "not armed" in said[0]


def test_stub_crashes_is_not_measured_without_a_recorder(monkeypatch):
    crash = [{"pid": 7, "phase": "crash", "signal": 11, "t_mono": 1.0},
             {"pid": 7, "phase": "crash", "signal": 6, "t_mono": 1.0},     # the same stub
             {"pid": 8, "phase": "crash", "signal": 11, "t_mono": 1.0}]
    monkeypatch.delenv(crashlib.ENV, raising=False)
    assert evidence.summarize_markers(crash, None)["stub_crashes"] is None
    monkeypatch.setenv(crashlib.ENV, "/some/crash.so")
    assert evidence.summarize_markers(crash, None)["stub_crashes"] == 2
    assert evidence.summarize_markers([], None)["stub_crashes"] == 0


@pytest.mark.slow
def test_the_metrics_scenario_segfaults_after_finalize_and_its_control_does_not(tmp_path, lib):
    """Until the worker arms the recorder itself (crashlib.arm_env), the rig is started with
    RIG_CRASH_LIB already set: the worker and its stubs inherit it."""
    got = {}
    for name, control in (("on", False), ("off", True)):
        repo = scenario_setup.materialize(ROOT / "models" / "scenarios" / "metrics", tmp_path / name, control=control)
        results = tmp_path / f"results-{name}"
        proc = rig("cycle", "--model-repository", str(repo), "--runtime", "0.7.0", "--engine", "capi",
                   "--cycles", "2", "--requests", "5", "--exit-timeout", "5", "--results", str(results),
                   env={crashlib.ENV: lib}, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        got[name] = cycles(results)
        markers = [json.loads(f.read_text()) for f in results.glob("_work/*/evidence/*/*-crash-*.json")]
        assert {m["signal"] for m in markers} <= {int(signal.SIGSEGV)}
    on, off = got["on"], got["off"]
    assert list(on.outcome) == ["aborted_at_exit"] * 2 and (on.stub_crashes >= 1).all()
    assert (on.stub_exit_aborts == on.stub_crashes).all()
    assert (on.finalize_before_stop == on.finalize_expected).all() and on.stop_error.isna().all()
    assert list(off.outcome) == ["clean"] * 2 and (off.stub_crashes == 0).all()

"""The evidence hook's .pth line acts inside backend stubs only (its positive side, finalize
evidence from real stubs, is covered end to end by the cycle tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

from rig.contract import hook as pth
from rig.worker.hook import evidence


def test_the_pth_line_runs_nothing_in_an_ordinary_python_process(tmp_path):
    site = sysconfig.get_paths()["purelib"]
    if pth.install_pth(site) is None:
        import pytest

        pytest.skip(f"{site} is not writable")
    hook = tmp_path / "hook" / "evidence.py"
    hook.parent.mkdir()
    flag = tmp_path / "ran"
    hook.write_text(f"open({str(flag)!r}, 'w').write('yes')\n")
    env = dict(os.environ, RIG_EVIDENCE_HOOK=str(hook), RIG_EVIDENCE_DIR=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", "print('ok')"], env=env, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok"
    assert not flag.exists(), "the hook ran outside a backend stub"
    assert "triton_python_backend_stub" in pth.PTH_LINE.splitlines()[0]


def _as_stub(tmp_path):
    """This interpreter under the backend stub's name: the .pth line's own test of where it runs."""
    import shutil

    exe = tmp_path / "bin" / "triton_python_backend_stub"
    if not exe.exists():
        exe.parent.mkdir()
        shutil.copy(os.path.realpath(sys.executable), exe)
    return exe


def _hook_runs(tmp_path, mode: int) -> bool:
    import pytest

    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    if pth.install_pth(str(site)) is None:
        pytest.skip(f"{site} is not writable")
    hook = tmp_path / f"m{mode:o}" / "hook" / "evidence.py"
    hook.parent.mkdir(parents=True)
    flag = hook.parent / "ran"
    hook.write_text(f"open({str(flag)!r}, 'w').write('yes')\n")
    hook.chmod(mode)
    env = dict(os.environ, RIG_EVIDENCE_HOOK=str(hook), PYTHONHOME=sys.base_prefix)
    p = subprocess.run([str(_as_stub(tmp_path)), "-c", f"import site; site.addsitedir({str(site)!r})"],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return flag.exists()


def test_a_stub_runs_the_hook_only_when_no_one_else_may_write_it(tmp_path):
    assert _hook_runs(tmp_path, 0o644), "positive control: a stub runs a hook file only its owner writes"
    assert not _hook_runs(tmp_path, 0o666), "a world-writable hook file ran inside a stub"
    assert not _hook_runs(tmp_path, 0o664), "a group-writable hook file ran inside a stub"


def test_preflight_ignores_a_writable_hook_file_and_keeps_out_of_system_interpreters(tmp_path, monkeypatch):
    from rig.parent import preflight

    hook = tmp_path / "hook" / "evidence.py"
    hook.parent.mkdir()
    hook.write_text("")
    hook.chmod(0o646)
    assert "world-writable" in preflight.hook_file_problem(hook)
    hook.chmod(0o644)
    assert preflight.hook_file_problem(hook) is None
    monkeypatch.setattr(preflight, "hook_file", lambda: hook)
    # A system interpreter without the .pth: the rig says so and does not add it by itself.
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    monkeypatch.delenv("RIG_OWNS_ENVIRONMENT", raising=False)
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"purelib": str(site)})
    said = []
    assert preflight.ensure_evidence_hook(said.append) is None
    assert not (site / pth.PTH_NAME).exists() and "RIG_OWNS_ENVIRONMENT=1" in said[0]
    monkeypatch.setenv("RIG_OWNS_ENVIRONMENT", "1")
    assert preflight.ensure_evidence_hook(said.append) == str(hook)
    assert (site / pth.PTH_NAME).read_text() == pth.PTH_LINE


def test_a_stub_that_runs_the_hook_arms_the_crash_recorder(tmp_path):
    """The whole chain in a stub: the .pth line runs the hook file, which arms the library named
    in RIG_CRASH_LIB; the stub then dies of SIGSEGV as it would have, and leaves its marker
    (rig/worker/hook/crash.c; the recorder's own tests are in test_crash.py)."""
    import shutil
    import signal

    from rig.contract.evidence import read_markers
    from rig.worker.hook import crashlib

    site = tmp_path / "site"
    site.mkdir()
    if pth.install_pth(str(site)) is None:
        import pytest

        pytest.skip(f"{site} is not writable")
    hook = tmp_path / "rig" / "hook" / "evidence.py"
    hook.parent.mkdir(parents=True)
    shutil.copy(evidence.__file__, hook)
    hook.chmod(0o644)
    folder = tmp_path / "evidence"
    folder.mkdir()
    env = dict(os.environ, RIG_EVIDENCE_HOOK=str(hook), RIG_EVIDENCE_DIR=str(folder),
               PYTHONHOME=sys.base_prefix, **{crashlib.ENV: crashlib.build()})
    env.pop("PYTHONFAULTHANDLER", None)
    p = subprocess.run([str(_as_stub(tmp_path)), "-c",
                        f"import site; site.addsitedir({str(site)!r}); import ctypes; ctypes.string_at(0)"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, p.stderr[-2000:]
    assert [(m["phase"], m["signal"]) for m in read_markers(folder)] == [("crash", signal.SIGSEGV)]

"""The evidence hook's .pth line acts inside backend stubs only (its positive side, finalize
evidence from real stubs, is covered end to end by the cycle tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

from rig.hook import evidence


def test_the_pth_line_runs_nothing_in_an_ordinary_python_process(tmp_path):
    site = sysconfig.get_paths()["purelib"]
    if evidence.install_pth(site) is None:
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
    assert "triton_python_backend_stub" in evidence.PTH_LINE.splitlines()[0]

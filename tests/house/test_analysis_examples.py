"""The top-level analysis/ folder's examples, run as a user runs them, on the conformance table's own
store (docs/conformance/store: real cycles of 34 cores through both APIs)."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def run(script: str, *args: str) -> str:
    p = subprocess.run(
        [sys.executable, str(ROOT / "analysis" / script), *args], cwd=ROOT, capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_stop_and_finalize_shows_server_8755_on_every_version():
    out = run("stop_and_finalize.py")
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit() or line.startswith(" ")]
    on_2670 = next(r for r in rows if r[:2] == ["2.67.0", "capi"])
    # cycles, clean, exit_timeout, aborted_at_exit, finalized_before_stop, stop_median_s
    assert float(on_2670[4]) == 1.0 and float(on_2670[6]) == 0.0, out
    assert "retained-response" in out.splitlines()[0]


def test_upgrade_lists_the_abort_at_exit_from_2_67_to_2_68():
    out = run("upgrade.py", "--from", "2.67.0", "--to", "2.68.0")
    assert "2.67.0 -> 2.68.0" in out and "aborted_at_exit / ok" in out, out
    same = run("upgrade.py", "--from", "2.68.0", "--to", "2.68.0")
    assert "0 differ" in same


def test_throughput_prints_medians_and_draws_its_plot(tmp_path):
    png = tmp_path / "t.png"
    out = run("throughput.py", "--scenario", "execute-raises", "--control", "--out", str(png))
    assert "2.67.0" in out and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_store_without_the_scenario_says_so_in_one_line(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "analysis" / "stop_and_finalize.py"), "--scenario", "no-such"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert p.returncode == 1 and p.stderr.strip() == "no cycles of no-such in docs/conformance/store"

"""`rig repro`, the command: bad input in one line, a folder in use or a runtime not installed refused;
and, slow, a reproducer made on the embedded default core that reproduces its cell by itself, copied
elsewhere with nothing of the rig on the path. Its library's tests are in tests/repro/."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_repro_cell import NO_RIG_IMPORT

from rig import cli


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--scenario", "leaks-memory"], "rig repro does not cover leaks-memory: its verdict is a growth measure"),
        (["--scenario", "reload"], "it needs a restart mode (reload"),
        (["--scenario", "worker-killed"], "kills the server's process"),
        (["--scenario", "no-such"], "unknown scenario 'no-such'"),
        (["--scenario", "finalize-raises", "--shape", "batched"], "--shape batched: scenario finalize-raises runs in"),
        (["--scenario", "template", "--control"], "has no negative control"),
    ],
)
def test_bad_input_is_one_line(capsys, tmp_path, argv, words):
    code, _out, err = run(capsys, "repro", *argv, "--runtime", "0.7.0", "--out", str(tmp_path / "r"))
    assert code == 2 and words in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
    if "does not cover" in err:
        assert "run it with rig soak --scenario" in err


def test_a_folder_in_use_or_a_runtime_not_installed_is_refused(capsys, tmp_path, monkeypatch):
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("")
    code, _, err = run(capsys, "repro", "--scenario", "retained-response", "--runtime", "0.7.0", "--out", str(used))
    assert code == 2 and "is not an empty folder" in err
    monkeypatch.setenv("RIG_HOME", str(tmp_path / "home"))  # no runtime installed there
    code, _, err = run(capsys, "repro", "--scenario", "retained-response", "--runtime", "0.5.10", "--out",
                       str(tmp_path / "new"))
    assert code == 2 and "not installed" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_a_repro_on_the_embedded_default_reproduces_by_itself(capsys, tmp_path):
    """`rig repro` for retained-response on the embedded default; then its folder, copied elsewhere, run
    with PATH and HOME alone: exit_timeout, the finalize after the stop, exit 0, no rig imported."""
    from rig.parent import runtime

    runtime.resolve(runtime.DEFAULT_EMBEDDED, log=print)  # installed on first use, as the rig does
    out = tmp_path / "repro"
    code, text, err = run(capsys, "repro", "--scenario", "retained-response", "--runtime", runtime.DEFAULT_EMBEDDED,
                          "--out", str(out), "--exit-timeout", "3")
    assert code == 0, text + err
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "crash.c", "models", "repro.py", "run.sh"]
    assert not NO_RIG_IMPORT.search((out / "repro.py").read_text())
    assert not list(out.rglob("__pycache__"))
    readme = (out / "README.md").read_text()
    assert "server#8755" in readme and "## Observed" in readme and "verdict: exit_timeout" in readme
    fresh = tmp_path / "fresh"
    shutil.copytree(out, fresh, symlinks=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    proc = subprocess.run(["./run.sh", "--work", str(tmp_path / "work")], cwd=fresh, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "verdict: exit_timeout" in said and "REPRODUCED" in said
    assert re.search(r"finalize: 1 instance\(s\): 0 before stop\(\) returned, (1 after, 0|0 after, 1) never", said)
    result = json.loads((tmp_path / "work" / "result.json").read_text())
    assert result["lifecycle"] == "exit_timeout" and result["stop_seconds"] >= 2.9 and result["exit_timeout"] == 3
    assert Path(tmp_path / "work" / "evidence.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("scenario, verdict, words", [
    ("ready-stub-dead", "finalize_missing", ""),
    ("metrics", "aborted_at_exit", ""),
    ("ensemble-in-flight", "requests_lost", "8 request(s) submitted at once (to ensemble_pipeline in turn)"),
    ("sequence-at-stop", "clean", "the stateful model's finalize still held 4 sequence state(s)"),
])
def test_a_scenario_with_models_of_its_own_reproduces_elsewhere(capsys, tmp_path, scenario, verdict, words):
    """A scenario of its own models and client on the embedded default: its known verdict, by itself, from a
    copy run with PATH and HOME alone; run.sh and README.md name no path of the rig's checkout."""
    from rig.parent import runtime

    runtime.resolve(runtime.DEFAULT_EMBEDDED, log=print)
    out = tmp_path / "repro"
    code, text, err = run(capsys, "repro", "--scenario", scenario, "--runtime", "2.51.0", "--out", str(out))
    assert code == 0, text + err
    fresh = tmp_path / "fresh"
    shutil.copytree(out, fresh, symlinks=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    proc = subprocess.run(["./run.sh", "--work", str(tmp_path / "work")], cwd=fresh, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0 and f"verdict: {verdict}" in proc.stdout, proc.stdout + proc.stderr
    assert words in proc.stdout
    readme = (out / "README.md").read_text()
    assert str(out) not in readme and str(tmp_path) not in readme and "## What to set" in readme
    assert str(Path(runtime.resolve(runtime.DEFAULT_EMBEDDED).server_dir)) not in (out / "run.sh").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["ensemble-in-flight", "sequence-at-stop"])
def test_the_controls_of_an_ensemble_and_of_sequences_are_clean(capsys, tmp_path, scenario):
    """Their controls on the embedded default (the steps fast, no request in flight; every sequence ended):
    clean, in the run `rig repro` makes itself (exit 0: the script reproduced it)."""
    from rig.parent import runtime

    runtime.resolve(runtime.DEFAULT_EMBEDDED, log=print)
    out = tmp_path / "repro"
    code, text, err = run(capsys, "repro", "--scenario", scenario, "--control", "--runtime", "2.51.0",
                          "--out", str(out))
    assert code == 0 and "observed clean (expected clean)" in text, text + err
    readme = (out / "README.md").read_text()
    assert "verdict: clean" in readme and "REPRODUCED" in readme
    if scenario == "sequence-at-stop":
        assert "4 sequence(s) opened and each ended (END) at once" in readme
        assert "finalize still held 0 sequence state(s)" in readme

"""rig.repro.readme: run.sh takes the install from the environment, and the observed output is
written without this machine's paths."""

from __future__ import annotations

import subprocess

from test_repro_cell import embedded_runtime

from rig.contract.runtime import BuiltRuntime
from rig.repro import readme as repro_readme


def test_run_sh_takes_the_install_from_the_environment(tmp_path, monkeypatch):
    """run.sh names no path of this machine but as a default of a variable ($HOME's written as $HOME);
    repro.py finds the loader's folders itself."""
    monkeypatch.setenv("HOME", "/home/maker")
    rt = embedded_runtime(stub_site="/home/maker/.cache/site")
    text = repro_readme.run_sh(rt, "/venv/bin/python3")
    assert ': "${TRITON_HOME:=/rt/py3.11}"' in text and ': "${REPRO_STUB_SITE=$HOME/.cache/site}"' in text
    assert 'PYTHON="/venv/bin/python3"' in text and "LD_LIBRARY_PATH" not in text.split("set -e")[1]
    assert text.rstrip().endswith('exec "$PYTHON" "$here/repro.py" "$@"')
    built = BuiltRuntime(name="built-2.67.0", triton_version="2.67.0", server_dir="/b/py3.11",
                         core_library="/b/py3.11/lib/libtritonserver.so", backend_dir="/b/py3.11/backends",
                         library_path=("/py/lib", "/b/lib"))
    assert "unset REPRO_STUB_SITE" in repro_readme.run_sh(built, "/venv/bin/python3")
    sh = tmp_path / "run.sh"
    sh.write_text(text)
    assert subprocess.run(["sh", "-n", str(sh)], check=False).returncode == 0
    # run.sh's defaults give way to the variables: a fake python prints what it was given
    fake = tmp_path / "py"
    fake.write_text('#!/bin/sh\necho "$TRITON_HOME|$REPRO_STUB_SITE|$@"\n')
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/other", "PYTHON": str(fake), "TRITON_HOME": "/opt/tritonserver"}
    said = subprocess.run(["sh", str(sh), "--x"], env=env, capture_output=True, text=True, check=True).stdout
    assert said.strip() == f"/opt/tritonserver|/home/other/.cache/site|{tmp_path}/repro.py --x"


def test_the_observed_output_is_written_without_this_machines_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/maker")
    rt = embedded_runtime(stub_site="/home/maker/site")
    out = tmp_path / "r"
    text = (f"Triton install: /rt/py3.11 (core /rt/wheel/libs/libtritonserver-1.so)\npython: /venv/bin/python3 3.11\n"
            f"numpy /home/maker/site\nwork folder: /tmp/w1\nmodel {out}/models/numpy/1/model.py /rt/py3.11x")
    said = repro_readme.portable(text, rt, "/venv/bin/python3", out, "/tmp/w1")
    assert said.splitlines() == ["Triton install: $TRITON_HOME (core $TRITON_HOME/../wheel/libs/libtritonserver-1.so)",
                                 "python: $PYTHON 3.11", "numpy $REPRO_STUB_SITE", "work folder: $WORK",
                                 "model ./models/numpy/1/model.py $TRITON_HOME/../py3.11x"]

"""A ``rig repro`` folder written and run once: the model repository the rig serves for the cell
(``models/``: the template rendered for the scenario's fault and shape, or the scenario's own
models; each ``model.py`` with a few lines appended that record each ``initialize`` and
``finalize``: ``rig.repro.models``), ``repro.py`` (the parts of ``rig.repro`` and the rig's binding
``rig.capi``, as it is, joined by ``rig.repro.script``, the cell written into it: the standard
library, numpy and ctypes over ``libtritonserver.so``, no rig import), ``crash.c`` (the stubs' crash
recorder, which the script compiles where it finds ``cc``), ``run.sh`` (the install, the Python and
the stubs' numpy from environment variables, their defaults what it was made with) and
``README.md``, a bug report whose observed output is that of a run made here, once, with nothing of
the rig on the path (``rig.repro.readme``)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rig.common.errors import RigError
from rig.repro.cell import cell_config, cell_of, manifest_of, runtime_of, scenario_of


@dataclass(frozen=True)
class Made:
    """A folder ``write`` made: its models, the cell written into its script, and the run made of it
    once (``repro.py``'s exit status and its result.json)."""

    out: Path
    models: list[str]
    cell: dict[str, Any]
    rc: int
    result: dict


def script_text(cell: dict[str, Any]) -> str:
    """The script (``rig.repro.script``'s parts joined) with ``cell`` written into ``CELL``."""
    from rig.repro import script

    return script.text(cell)


# ---------------------------------------------------------------- the run and the report


def run_once(out: Path, timeout_s: float, log=print) -> tuple[int, str, dict, str]:
    """``run.sh`` run once in ``out`` with a bare environment (PATH and HOME alone: nothing of the
    rig on the path); (exit status, output, the script's result.json, its work folder, gone by then)."""
    work = Path(tempfile.mkdtemp(prefix="rig-repro-"))
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    lines: list[str] = []
    try:
        proc = subprocess.Popen(
            ["/bin/sh", str(out / "run.sh"), "--work", str(work)],
            cwd=out,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                log(f"  | {line.rstrip()}")
            rc = proc.wait()
        finally:
            timer.cancel()
        if killed.is_set():
            lines.append(f"(killed after {timeout_s:.0f} s)")
        elif rc < 0:
            lines.append(f"(repro.py died of signal {-rc})")
        try:
            result = json.loads((work / "result.json").read_text())
        except (OSError, ValueError):
            result = {}
        return rc, "\n".join(lines), result, str(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for cache in out.rglob("__pycache__"):  # the stubs compiled model.py: not part of the folder
            shutil.rmtree(cache, ignore_errors=True)


def write(
    scenario: str, control: bool, shape: str | None, runtime: str, out: Path, exit_timeout: int, log=print
) -> Made:
    """The folder ``out`` (new or empty) for the cell (``scenario``, its control or not, ``shape``,
    ``runtime``, the server's ``exit_timeout``), written, then run once (``run_once``) for its
    README's observed output; bad input is one ``RigError`` line, before anything is written."""
    from rig.repro import models as repro_models
    from rig.repro import readme as repro_readme

    s = scenario_of(scenario)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RigError(f"--out {out} exists and is not an empty folder: give a new one")
    if exit_timeout < 0:
        raise RigError("--exit-timeout must be >= 0")
    cfg = cell_config(s, control, shape, exit_timeout, runtime)  # bad input first: one line
    rt = runtime_of(runtime, log=log)
    if s.needs:  # a core built without ensembles: its models would not load
        from rig.scenarios import core_features

        core_features.check(s, rt)
    out.mkdir(parents=True, exist_ok=True)
    models = repro_models.write_models(s, cfg, control, out / "models")
    repro_models.write_crash_recorder(out / "crash.c")
    cell = cell_of(s, cfg, rt, control, models)
    (out / "repro.py").write_text(script_text(cell))
    sh = out / "run.sh"
    sh.write_text(repro_readme.run_sh(rt, sys.executable))
    sh.chmod(sh.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    log(f"running {out}/run.sh once (with PATH and HOME alone) ...")
    w = cell.get("workload") or {}
    limit = 180 + float(w.get("seconds", 0)) + 4 * exit_timeout + 2 * cfg.request_timeout + 120
    rc, output, result, work = run_once(out, limit, log=log)
    said = repro_readme.portable(output, rt, sys.executable, out, work)
    text = repro_readme.readme(cell, rt, manifest_of(rt), rc, said, result, out / "models")
    (out / "README.md").write_text(text)
    return Made(out, models, cell, rc, result)

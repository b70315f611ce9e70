"""Which engine a run uses (``select``), and whether the official bindings load over a core
(``official_probe``): asked of a child process, the worker's side, by its command line and its one
line of JSON back (a failing binding must not take the parent down, and the loader path is read
at exec)."""

from __future__ import annotations

import json
import os
import subprocess

from rig.common.errors import RigError
from rig.common.procs import python_m
from rig.contract.engines import ENGINES, explain_bindings
from rig.contract.runtime import Runtime

PROBE = "rig.worker.engines.official.probe"


def official_probe(runtime: Runtime | None = None, timeout_s: float = 120) -> tuple[bool, str]:
    """Do the ``tritonserver`` bindings load over ``runtime``'s core? Without a runtime, only
    whether the package is installed here."""
    args = [*python_m(PROBE), *([runtime.core_library] if runtime is not None else [])]
    env = runtime.worker_env() if runtime is not None else dict(os.environ)
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"could not run {args[0]} to probe the tritonserver bindings: {e}"
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            ok, why = json.loads(line)
            return bool(ok), str(why)
        except ValueError:
            continue
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return False, explain_bindings(tail[-1] if tail else f"the probe ended with status {proc.returncode}")


def select(requested: str, runtime: Runtime) -> tuple[str, str]:
    """``(engine name, reason)`` for ``auto``, ``capi`` or ``tritonserver``."""
    if requested == "capi":
        return "capi", "asked for"
    if requested not in ENGINES:
        raise RigError(f"unknown engine {requested!r}: choose {', '.join(ENGINES)}")
    if requested == "auto" and runtime.kind != "container":
        # Embedded cores are older than any tritonserver package; they pair only when asked.
        return "capi", "tritonserver is paired with embedded cores only when asked (--engine tritonserver)"
    ok, why = official_probe(runtime)
    if requested == "tritonserver":
        if not ok:
            raise RigError(f"the tritonserver engine does not load over {runtime.name} ({why}); use --engine capi")
        return "tritonserver", f"asked for: {why}"
    if ok:
        return "tritonserver", f"import tritonserver works ({why})"
    return "capi", f"import tritonserver fails ({why})"

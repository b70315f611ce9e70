"""The models of a ``rig repro`` folder: the template rendered for the cell, or the scenario's own
repository (its ``fault`` on, or off for the control), each ``model.py`` with ``EVIDENCE_BLOCK``
appended (the model records its own ``initialize`` and ``finalize``, and arms the stubs' crash
recorder); and ``crash.c``, the recorder, beside the script."""

from __future__ import annotations

import shutil
from pathlib import Path

# Appended to each model's model.py: the model records its own initialize and finalize (one JSON
# line in $REPRO_EVIDENCE each), so the script needs no hook of the rig's to tell when they ran.
EVIDENCE_BLOCK = """

# ---- added by `rig repro` (triton-soak-rig): finalize evidence, nothing else changed above ----
# Each initialize and finalize of an instance appends one JSON line (phase, pid, instance,
# CLOCK_MONOTONIC time, wall time, the error finalize raised) to the file $REPRO_EVIDENCE names; where
# $REPRO_CRASH_LIB names crash.c compiled, a stub that dies of a signal leaves a marker beside it.
def _repro_mark(phase, instance, error=None):
    import json as _json
    import os as _os
    import time as _time

    path = _os.environ.get("REPRO_EVIDENCE")
    if path:
        line = {"phase": phase, "pid": _os.getpid(), "instance": instance, "t_mono": _time.monotonic(),
                "t_wall": _time.time(), "error": error}
        with open(path, "a") as f:
            f.write(_json.dumps(line) + "\\n")


def _repro_arm_crash_recorder():
    # crash.c, compiled by repro.py where a C compiler is found: a marker when this stub dies of a signal
    import ctypes as _ctypes
    import os as _os

    lib, path = _os.environ.get("REPRO_CRASH_LIB"), _os.environ.get("REPRO_EVIDENCE")
    if lib and path:
        try:
            _ctypes.CDLL(lib).rig_crash_arm(_os.path.dirname(path).encode())
        except OSError:
            pass


_repro_arm_crash_recorder()
_repro_initialize = getattr(TritonPythonModel, "initialize", lambda self, args: None)
_repro_finalize = getattr(TritonPythonModel, "finalize", lambda self: None)


def _repro_initialize_marked(self, args):
    self._repro_instance = str(args.get("model_instance_name", "?"))
    _repro_initialize(self, args)
    _repro_mark("init", self._repro_instance)


def _repro_finalize_marked(self):
    instance = getattr(self, "_repro_instance", "?")
    _repro_mark("finalize_start", instance)
    try:
        _repro_finalize(self)
    except BaseException as e:
        _repro_mark("finalize_end", instance, f"{type(e).__name__}: {e}")
        raise
    _repro_mark("finalize_end", instance)


TritonPythonModel.initialize = _repro_initialize_marked
TritonPythonModel.finalize = _repro_finalize_marked
"""


def write_models(s, cfg, control: bool, dest: Path) -> list[str]:
    """``dest`` as the rig serves it for ``cfg`` (the template rendered, or scenario ``s``'s own
    repository materialized), each ``model.py`` with ``EVIDENCE_BLOCK`` appended; the models' names."""
    from rig.contract.spec import repository_models

    if s.repository is None:
        from rig.parent import repository
        from rig.parent.orchestrator.prepare import template_spec

        repository.render(template_spec(cfg), dest)
    else:
        from rig.scenarios.setup import materialize, repository_of

        materialize(repository_of(s), dest, control, str(cfg.model_shape))
    for py in sorted(dest.glob("*/*/model.py")):
        py.write_text(py.read_text().rstrip("\n") + "\n" + EVIDENCE_BLOCK)
    return repository_models(dest)


def write_crash_recorder(dest: Path) -> None:
    """``crash.c``, the worker's crash recorder (``rig/worker/hook/crash.c``: a data file here, read,
    never imported), beside the script, which compiles it."""
    source = Path(__file__).resolve().parents[1] / "worker" / "hook" / "crash.c"
    shutil.copyfile(source, dest)

"""The backend stubs' crash recorder (``crash.c``): compiled here, named to the stubs.

A stub is the core's child and the core reaps it, so the rig never sees a stub's exit status;
a stub that dies of SIGSEGV after its finalize (server#8662) leaves a stop that looks clean.
``crash.c`` is a signal handler that the evidence hook (``evidence.py``) arms inside every stub
the rig starts: it leaves ``<pid>-crash-<signal>.json`` in the cycle's evidence folder, then
lets the stub die as before. The worker calls ``arm_env`` once, before it starts the server:
it compiles the library (once per source version, into the native lanes' cache folder, with
the same compiler) and names it in ``RIG_CRASH_LIB``, which the stubs inherit. Without a
compiler nothing is armed and the cycles' ``stub_crashes`` read null (not measured).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rig.common.errors import RigError
from rig.contract.evidence import CRASH_LIB_ENV
from rig.worker import native

SOURCE = Path(__file__).with_name("crash.c")
CFLAGS = ("-O2", "-shared", "-fPIC")
ENV = CRASH_LIB_ENV  # read by the evidence hook in the stubs, and by rig.contract.evidence


def build_dir() -> Path:
    return native.build_dir()


def _compiler() -> str | None:
    return native.compiler()


def build() -> str:
    """Compile ``crash.c`` once per source version; returns the shared library's path."""
    return native.build(SOURCE, CFLAGS, "the backend stubs' crash recorder", find_compiler=_compiler)


def arm_env(log: Callable[[str], None] = lambda msg: None) -> str | None:
    """Name the crash recorder to the stubs this process will start (``RIG_CRASH_LIB``): its
    path, or None (the variable removed, ``log`` told why) where it cannot be built."""
    try:
        path = build()
    except (RigError, OSError) as e:
        os.environ.pop(ENV, None)
        log(f"backend stubs' crash recorder not armed (stub_crashes not measured): {e}")
        return None
    os.environ[ENV] = path
    return path

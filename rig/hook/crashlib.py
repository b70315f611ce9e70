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

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from rig import runtime
from rig.errors import RigError

SOURCE = Path(__file__).with_name("crash.c")
CFLAGS = ("-O2", "-shared", "-fPIC")
ENV = "RIG_CRASH_LIB"  # read by the evidence hook in the stubs, and by rig.evidence


def build_dir() -> Path:
    """The native lanes' folder (``rig.engines.capi.lane.build_dir``), named again here so the
    worker need not import an engine to arm the stubs."""
    return runtime.cache_dir().parent / "build"


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build() -> str:
    """Compile ``crash.c`` once per source version; returns the shared library's path."""
    src = SOURCE.read_bytes()
    key = hashlib.sha256(src + " ".join(CFLAGS).encode() + platform.machine().encode()).hexdigest()[:16]
    out = build_dir() / f"crash-{key}.so"
    if out.exists():
        return str(out)
    cc = _compiler()
    if cc is None:
        raise RigError("no C compiler found (cc, gcc or clang; or set CC): the backend stubs' crash "
                       "recorder is compiled on first use; install one, e.g. apt-get install gcc")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".crash-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        proc = subprocess.run([cc, *CFLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise RigError(f"compiling {SOURCE.name} with {cc} failed: {tail}")
        os.chmod(tmp, 0o755)  # the hook loads only a library no one else may write
        os.replace(tmp, out)  # atomic: a concurrent build leaves one complete file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(out)


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

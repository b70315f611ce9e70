"""Small C libraries the rig compiles on first use (the native load lanes, the stubs' crash
recorder): one cache folder, one compiler search, one atomic build per source version."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from rig.common.errors import RigError
from rig.common.procs import c_compiler
from rig.contract import runtime


def build_dir() -> Path:
    return runtime.cache_dir().parent / "build"


def compiler() -> str | None:
    return c_compiler()


def build(
    source: Path,
    cflags: tuple[str, ...],
    what: str,
    libs: tuple[str, ...] = (),
    find_compiler: Callable[[], str | None] = compiler,
    log: Callable[[str], None] = lambda msg: None,
) -> str:
    """Compile ``source`` into a shared library once per source, flags and machine; returns its
    path. ``what`` names it in messages ("the native load generator"). The library is written
    whole or not at all (a concurrent build leaves one complete file), and mode 0755: the stubs'
    hook loads only a library no one else may write."""
    src = source.read_bytes()
    key = hashlib.sha256(src + " ".join(cflags).encode() + platform.machine().encode()).hexdigest()[:16]
    out = build_dir() / f"{source.stem}-{key}.so"
    if out.exists():
        return str(out)
    cc = find_compiler()
    if cc is None:
        raise RigError(
            f"no C compiler found (cc, gcc or clang; or set CC): {what} is compiled on first "
            "use; install one, e.g. apt-get install gcc"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{source.stem}-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        log(f"compiling {what} ({cc}) ...")
        proc = subprocess.run([cc, *cflags, "-o", tmp, str(source), *libs], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise RigError(f"compiling {source.name} with {cc} failed: {tail}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(out)

"""Wheels from PyPI into a cache folder of their own: the stubs' numpy<2, the build's cmake and ninja."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from rig.common.errors import RigError
from rig.common.procs import python_m


def pip_install_into(folder: Path, requirements: list[str], what: str, hint: str) -> Path:
    """Wheels from PyPI into a cache folder of their own, once: installed beside it and renamed
    into place when complete (``.complete``), so a process that finds it finds all of it."""
    if (folder / ".complete").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    proc = subprocess.run(
        [
            *python_m("pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--target",
            str(tmp),
            *requirements,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise RigError(f"could not install {what} ({last}); {hint}")
    (tmp / ".complete").write_text(" ".join(requirements) + "\n")
    if folder.exists() and not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)  # an older, unfinished one
    try:
        os.rename(tmp, folder)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder

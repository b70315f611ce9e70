"""The environment the core and its stubs need: the loader's folders, a venv that gives the stubs
numpy, the stubs of this process (``/proc``), and the stubs' crash recorder (``crash.c``, compiled
here where a C compiler is found)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import numpy as np

from rig.repro.head import STUB

# ---------------------------------------------------------------- the environment


def library_dirs(triton: Path, extra: list[str]) -> list[str]:
    """The folders the loader must search (``LD_LIBRARY_PATH``): this Python's libpython (the stubs
    link it), the folder the core's file really lies in (its own libraries beside it: a wheel's
    ``nvidia_pytriton.libs``), the install's ``lib/``, and any given."""
    dirs = list(extra)
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir and os.path.isdir(libdir):
        dirs.append(libdir)
    core = triton / "lib" / "libtritonserver.so"
    dirs += [str(Path(os.path.realpath(core)).parent), str(triton / "lib")]
    return list(dict.fromkeys(d for d in dirs if d))


def ensure_environment(triton: Path, extra: list[str]) -> None:
    """Re-execute this script once with the library folders it needs on ``LD_LIBRARY_PATH`` (the
    loader reads it only at exec) where they are missing."""
    have = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    need = library_dirs(triton, extra)
    if all(d in have for d in need) or os.environ.get("REPRO_REEXEC") == "1":
        return
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*need, *[d for d in have if d]])
    env["REPRO_REEXEC"] = "1"  # once: never a loop
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def stub_environment(work: Path, stub_site: str | None) -> str:
    """A venv for the backend stubs (made with this interpreter) whose one ``.pth`` names the folder
    their numpy comes from: ``stub_site`` (numpy<2), else a folder of links to this interpreter's
    numpy alone. The stubs embed Python isolated and find their site-packages from the ``python3``
    on ``PATH``: its ``bin/`` goes first there. Returns the numpy folder named."""
    env = work / "stub-venv"
    venv.create(env, with_pip=False, symlinks=True, clear=True)
    numpy_dir = stub_site
    if not numpy_dir:
        own = Path(np.__file__).resolve().parent
        alone = work / "stub-numpy"
        alone.mkdir(exist_ok=True)
        for item in [own, *own.parent.glob("numpy.libs"), *own.parent.glob(f"numpy-{np.__version__}.dist-info")]:
            link = alone / item.name
            if not link.exists():
                link.symlink_to(item)
        numpy_dir = str(alone)
    found = sorted(env.glob("lib*/python*/site-packages"))
    site = found[0] if found else env / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (site / "repro_stub_numpy.pth").write_text(numpy_dir + "\n")
    os.environ["PATH"] = str(env / "bin") + os.pathsep + os.environ.get("PATH", "")
    return numpy_dir


def stubs() -> dict[int, str]:
    """The backend stubs of this process still running (``/proc``: children named like the stub, a
    zombie left out: a stub dead of a signal that the server has not reaped runs no more), each with
    its command line (which names its model's ``model.py``)."""
    me, out = os.getpid(), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me and fields[0] != "Z" and STUB.startswith(name):
            out[int(entry)] = cmdline
    return out


def stubs_alive() -> int:
    return len(stubs())


def crash_recorder(source: Path, work: Path) -> tuple[str | None, str]:
    """``crash.c`` (beside this script) compiled into the work folder with ``cc``: the library's
    path (None where there is no source or compiler, or it did not build) and what happened, in words."""
    if not source.exists():
        return None, "not asked for"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None, "not armed: no C compiler (cc) on PATH, stub crashes not measured"
    lib = work / "crash.so"
    proc = subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(source)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return None, f"not armed: {cc} failed ({proc.stderr.strip()[:200]}), stub crashes not measured"
    return str(lib), f"armed ({cc}): a stub that dies of a signal leaves a marker"

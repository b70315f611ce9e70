"""The last steps of a build: the official bindings beside the stub, the libraries the binaries
link carried into the runtime, a check that the core starts and says its version, and the
manifest; all in a hidden folder renamed into place only when complete."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import typing
from pathlib import Path

from rig.common.errors import RigError
from rig.common.probes import STUB_NAME
from rig.runtimes.from_source import preflight, recipe
from rig.runtimes.from_source.cache import RECIPE, built_root, runtimes_dir
from rig.runtimes.from_source.identity import Patch
from rig.runtimes.from_source.runner import Log, run
from rig.runtimes.from_source.sources import Sources


@dataclasses.dataclass
class Build:
    """One build as it goes: the release and the refs it is built from, where, for which Python,
    and what it learns on the way (the commits fetched, the adaptations made, each step's time).
    The manifest (``runtime.json``) is made from it."""

    version: str  # the Triton version: 2.67.0
    branch: str  # its release branch: r24.10 ... r26.06
    refs: dict[str, str]  # the ref built per repository (a branch, or --ref's)
    sources: Sources
    work: Path  # <cache>/builds/<version>: sources and build trees
    py: str  # the stub's Python: 3.11
    python: str  # that interpreter
    log: Log
    reuse: Path | None  # a core built before for another Python: only the backend is built
    old: dict  # the manifest of an earlier build of this version ({} where none)
    commits: dict[str, str] = dataclasses.field(default_factory=dict)  # the commit built per repository
    notes: list[str] = dataclasses.field(default_factory=list)  # adaptations made to build it here
    timings: dict[str, float] = dataclasses.field(default_factory=dict)  # each step's seconds
    t0: float = dataclasses.field(default_factory=time.monotonic)
    name: str = ""  # what follows built-: the version, or a variant's label (rig.runtimes.from_source.identity)
    patches: tuple[Patch, ...] = ()  # --patch: the diffs applied
    overrides: dict[str, str] = dataclasses.field(default_factory=dict)  # --ref as given

    @property
    def label(self) -> str:
        return self.name or self.version


def _dir_mb(path: Path) -> float:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total / 1e6


def assemble(b: Build, compiled: Path | None) -> dict:
    """The build's runtime laid out, checked and renamed into place; its manifest."""
    version, refs, work, py, log, notes, old = b.version, b.refs, b.work, b.py, b.log, b.notes, b.old
    root = built_root(b.label)
    staging = Path(tempfile.mkdtemp(prefix=f".built-{b.label}-", dir=runtimes_dir()))
    os.chmod(staging, 0o755)
    try:
        _lay_out(staging, work, py, b.reuse, log)
        dest = staging / f"py{py}" / "bindings"
        bindings = _official_bindings(version, py, dest, log) or _compiled_bindings(compiled, dest, version, refs, py)
        if bindings:
            notes.append(bindings)
        (staging / "TRITON_VERSION").write_text(version + "\n")
        carried = _carry_libraries(staging, log)
        api = _check_core(staging / "lib" / "libtritonserver.so", version, log)
        work_mb = _dir_mb(work)
        # this step is still running: its time so far (the others hold their durations)
        timings = {
            k: (round(time.monotonic() - v, 1) if k == "assemble and check" else v) for k, v in b.timings.items()
        }
        m: dict[str, typing.Any] = {
            "kind": "built",
            "recipe": RECIPE,
            "triton_version": version,
            "label": b.label,
            "branch": b.branch,
            "refs": refs,
            "commits": b.commits,
            "sources": b.sources.describe(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": os.uname().nodename,
            "cpus": len(os.sched_getaffinity(0)),
            "compiler": _first_line(["g++", "--version"]),
            "cmake": _first_line([preflight.tools(runtimes_dir().parent, log)[0], "--version"]),
            "core_flags": recipe.CORE_FLAGS,
            "backend_flags": recipe.BACKEND_FLAGS,
            "pythons": {py: b.python},
            "api_version": api,
            "adaptations": notes,
            "carried_libraries": carried,
            "differs_from_ngc": list(recipe.DIFFERS_FROM_NGC),
            "step_seconds": timings,
            "pybind11": _pybind11_version(work / "src" / "pybind11"),
            "build_seconds": round(time.monotonic() - b.t0, 1),
            "work_mb": round(work_mb, 1),
        }
        # pybind11 before 2.12 (python_backend r24.10) knows numpy 1 only: its stub, given numpy 2,
        # answers every output with zeros (measured on 2.51.0), so it gets numpy<2 as the PyPI cores' do
        m["stub_numpy1"] = (
            tuple(int(x) for x in m["pybind11"].split(".")[:2]) < (2, 12) if m["pybind11"] != "unknown" else False
        )
        if b.label != version:  # a variant: what it is beside the release it was built from
            m["release"] = version
            m["variant"] = {
                "refs": b.overrides,
                "patches": [
                    {"component": p.component, "file": p.name, "path": p.path, "sha256": p.sha256} for p in b.patches
                ],
            }
        m["size_mb"] = round(_dir_mb(staging), 1)
        if b.reuse is not None:
            m["reused"] = _reused(b.reuse, old)
            m["step_seconds"] = {**old.get("step_seconds", {}), **timings}
        if root.exists() and old.get("recipe") == RECIPE and old.get("commits", {}).get("core") == b.commits["core"]:
            # the same core built for another Python: keep its stubs beside this one
            for other in root.glob("py*"):
                if other.name != f"py{py}" and not (staging / other.name).exists():
                    shutil.copytree(other, staging / other.name, symlinks=True)
                    m["pythons"].update({k: v for k, v in old.get("pythons", {}).items() if f"py{k}" == other.name})
        (staging / "runtime.json").write_text(json.dumps(m, indent=1))
        _replace(root, staging, b.label)
        return m
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _lay_out(staging: Path, work: Path, py: str, reuse: Path | None, log) -> None:
    """The core, the Python backend and its stub in perf_analyzer's layout."""
    (staging / "lib").mkdir()
    core = reuse or work / "build" / "core" / "libtritonserver.so"
    if not core.exists():
        found = sorted((work / "build" / "core").rglob("libtritonserver.so"))
        if not found:
            raise RigError(f"the core built but no libtritonserver.so is in {work / 'build' / 'core'}; see {log.path}")
        core = found[0]
    shutil.copy2(core, staging / "lib" / "libtritonserver.so")
    pb = staging / f"py{py}" / "backends" / "python"
    pb.mkdir(parents=True)
    bb = work / "build" / f"python_backend-py{py}"
    for name in ("libtriton_python.so", STUB_NAME):
        found = sorted(bb.rglob(name))
        if not found:
            raise RigError(f"the Python backend built but {name} is not in {bb}; see {log.path}")
        shutil.copy2(found[0], pb / name)
    utils = sorted((work / "src" / "python_backend").rglob("triton_python_backend_utils.py"))
    if utils:
        shutil.copy2(utils[0], pb / utils[0].name)
    os.symlink("../lib", staging / f"py{py}" / "lib")


def _compiled_bindings(compiled: Path | None, dest: Path, version: str, refs: dict, py: str) -> str | None:
    if compiled is None:
        return None
    shutil.copytree(compiled, dest / "tritonserver", symlinks=True)
    info = dest / f"tritonserver-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tritonserver\nVersion: {version}\n")
    return (
        f"official bindings: compiled here from core/python of {refs['core']} for Python {py} "
        "(PyPI has none of this version for it)"
    )


def _replace(root: Path, staging: Path, version: str) -> None:
    """The complete runtime into place: a rename, the older one moved aside first."""
    if not root.exists():
        os.rename(staging, root)
        return
    trash = Path(tempfile.mkdtemp(prefix=f".old-built-{version}-", dir=runtimes_dir()))
    os.rename(root, trash / "old")
    os.rename(staging, root)
    shutil.rmtree(trash, ignore_errors=True)


def compile_bindings(src: Path, out: Path, python: str, core_dir: Path, log) -> Path | None:
    """The in-process Python API of this core's own branch (core/python: the ``tritonserver``
    package and its one pybind11 module), compiled for ``python`` against the built core. None
    where the branch has no such sources."""
    cc = src / "core" / "python" / "tritonserver" / "_c" / "tritonserver_pybind.cc"
    if not cc.exists():
        log("no core/python bindings in this branch")
        return None
    info = subprocess.run(
        [
            python,
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    include, suffix = info.stdout.split()[:2]
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(cc.parent.parent, out, ignore=shutil.ignore_patterns("CMakeLists.txt", "*.cc"))
    core_lib = core_dir / "libtritonserver.so"
    run(
        [
            "g++",
            "-O2",
            "-shared",
            "-fPIC",
            "-std=c++17",
            "-fvisibility=hidden",
            f"-I{include}",
            f"-I{src / 'pybind11' / 'include'}",
            f"-I{src / 'core' / 'include'}",
            str(cc),
            "-o",
            str(out / "_c" / f"triton_bindings{suffix}"),
            f"-L{core_lib.parent}",
            "-ltritonserver",
        ],
        log,
    )
    return out


def _official_bindings(version: str, py: str, dest: Path, log) -> str | None:
    """The PyPI ``tritonserver`` bindings of this very version, where PyPI has them for this
    Python (2.70.0 and later, CPython 3.12): the official engine then runs over its own core."""
    tag = "cp" + py.replace(".", "")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                py,
                "--implementation",
                "cp",
                "--abi",
                tag,
                "--platform",
                "manylinux_2_39_x86_64",
                "-d",
                tmp,
                f"tritonserver=={version}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        wheels = sorted(Path(tmp).glob("tritonserver-*.whl"))
        if proc.returncode != 0 or not wheels:
            log(f"no tritonserver {version} bindings for Python {py} on PyPI: {proc.stderr.strip()[-300:]}")
            return None
        import zipfile

        with zipfile.ZipFile(wheels[0]) as zf:
            zf.extractall(dest)
    log(f"official bindings: {wheels[0].name} into {dest}")
    return f"official bindings: {wheels[0].name} from PyPI (the official engine runs over this core with them)"


# Libraries every Linux the runtime runs on has, in versions at least as new as here's: not carried.
BASE_LIBRARIES = (
    "libc.so",
    "libm.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "ld-linux",
    "libstdc++.so",
    "libgcc_s.so",
    "libpython",
    "linux-vdso",
)


def _carry_libraries(staging: Path, log) -> list[str]:
    """Copy the libraries the core, backend and stub link directly (Debian 12's protobuf, re2,
    prometheus-cpp, ...) into the runtime's lib/, so it runs where those versions are not
    installed: the official engine's Debian 13 sandbox, a fleet node."""
    carried = []
    binaries = [
        staging / "lib" / "libtritonserver.so",
        *staging.glob("py*/backends/python/libtriton_python.so"),
        *staging.glob("py*/backends/python/" + STUB_NAME),
    ]
    for binary in binaries:
        needed = re.findall(
            r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
            subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=False).stdout,
        )
        resolved = dict(
            re.findall(
                r"^\s*(\S+) => (/\S+)",
                subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout,
                flags=re.MULTILINE,
            )
        )
        for name in needed:
            # the backend links the core by name: never carry what the runtime itself provides
            if any(name.startswith(b) for b in BASE_LIBRARIES) or name in carried or (staging / "lib" / name).exists():
                continue
            path = resolved.get(name)
            if path is None:
                raise RigError(f"{binary.name} needs {name}, which is not found here; see {log.path}")
            shutil.copy2(os.path.realpath(path), staging / "lib" / name)
            carried.append(name)
    log("carried libraries: " + ", ".join(carried))
    return carried


def _pybind11_version(src: Path) -> str:
    header = src / "include" / "pybind11" / "detail" / "common.h"
    try:
        text = header.read_text()
        major = re.search(r"#define PYBIND11_VERSION_MAJOR (\d+)", text).group(1)
        minor = re.search(r"#define PYBIND11_VERSION_MINOR (\d+)", text).group(1)
        return f"{major}.{minor}"
    except (OSError, AttributeError):
        return "unknown"


def _first_line(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


CHECK = """
import ctypes, json, sys, tempfile
from ctypes import POINTER, byref, c_char_p, c_size_t, c_uint32, c_void_p
lib = ctypes.CDLL(sys.argv[1])
a, b = c_uint32(), c_uint32()
lib.TRITONSERVER_ApiVersion(byref(a), byref(b))
for name, args in {"TRITONSERVER_ServerOptionsNew": [POINTER(c_void_p)],
                   "TRITONSERVER_ServerOptionsSetModelRepositoryPath": [c_void_p, c_char_p],
                   "TRITONSERVER_ServerOptionsSetExitTimeout": [c_void_p, c_uint32],
                   "TRITONSERVER_ServerNew": [POINTER(c_void_p), c_void_p],
                   "TRITONSERVER_ServerMetadata": [c_void_p, POINTER(c_void_p)],
                   "TRITONSERVER_MessageSerializeToJson": [c_void_p, POINTER(c_char_p), POINTER(c_size_t)],
                   "TRITONSERVER_ServerStop": [c_void_p], "TRITONSERVER_ServerDelete": [c_void_p]}.items():
    getattr(lib, name).argtypes = args
    getattr(lib, name).restype = c_void_p
opts, server, msg = c_void_p(), c_void_p(), c_void_p()
with tempfile.TemporaryDirectory() as repo:
    assert not lib.TRITONSERVER_ServerOptionsNew(byref(opts))
    lib.TRITONSERVER_ServerOptionsSetModelRepositoryPath(opts, repo.encode())
    lib.TRITONSERVER_ServerOptionsSetExitTimeout(opts, 5)
    assert not lib.TRITONSERVER_ServerNew(byref(server), opts), "ServerNew failed"
    assert not lib.TRITONSERVER_ServerMetadata(server, byref(msg))
    base, size = c_char_p(), c_size_t()
    lib.TRITONSERVER_MessageSerializeToJson(msg, byref(base), byref(size))
    meta = json.loads(ctypes.string_at(base, size.value) or b"null")
    lib.TRITONSERVER_ServerStop(server)
    lib.TRITONSERVER_ServerDelete(server)
print(json.dumps({"api": f"{a.value}.{b.value}", "metadata": meta}))
"""


def _check_core(lib: Path, version: str, log) -> str:
    """Start the built core in a fresh process over an empty repository and ask its metadata:
    every library it links resolves, and it reports its version as JSON, or the build is refused."""
    env = dict(
        os.environ, LD_LIBRARY_PATH=os.pathsep.join(filter(None, [str(lib.parent), os.environ.get("LD_LIBRARY_PATH")]))
    )
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(lib)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    log(f"core check: {proc.stdout.strip()}\n{proc.stderr.strip()[-2000:]}")
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RigError(f"the built core does not start ({last}); see {log.path}") from None
    meta = got.get("metadata") or {}
    if meta.get("version") != version:
        raise RigError(
            f"the built core started but its metadata says {json.dumps(meta)[:120]} where version "
            f"{version} was expected; see {log.path}"
        )
    return got["api"]


def _reused(path: Path, old: dict) -> dict:
    """What a build that reused a core did not do again, and the build it took it from (``old``:
    that build's manifest)."""
    return {
        "core": {
            "path": str(path),
            "built_at": old.get("built_at"),
            "commit": old.get("commits", {}).get("core"),
            "for_pythons": sorted(old.get("pythons", {})),
            "steps": ["configure core", "build core"],
        }
    }

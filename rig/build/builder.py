"""``rig runtime build VERSION``: fetch, configure, compile and lay out one Triton release.

The work happens in ``<cache>/builds/<version>/`` (sources and build trees, kept when a build is
interrupted so the next attempt resumes where ninja stopped); the result is assembled in a hidden
folder and renamed to ``<cache>/runtimes/built-<version>`` only when complete, so nothing that
looks finished is ever half-made. The log of every attempt is ``<cache>/builds/<version>.log``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rig.build import preflight, recipe, releases
from rig.build.sources import Sources
from rig.errors import RigError
from rig.probes import STUB_NAME

# Bump when the recipe changes what a build produces: a runtime built by an older recipe is rebuilt.
RECIPE = 1

STEPS = ("sources", "configure core", "build core", "configure python backend",
         "build python backend", "python bindings", "assemble and check")


@dataclasses.dataclass
class Request:
    version: str                 # what the user typed: 2.67.0 or r26.03
    sources: str | None = None   # a folder of git bundles; None: GitHub
    refs: dict[str, str] = dataclasses.field(default_factory=dict)   # --ref overrides
    force: bool = False
    jobs: int | None = None
    python: str | None = None    # the interpreter whose backend stub is built; None: this one


def python_tag(python: str | None = None) -> str:
    if python is None or os.path.realpath(python) == os.path.realpath(sys.executable):
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    proc = subprocess.run([python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RigError(f"--python {python}: not a Python interpreter that runs here; give the path of one")
    return proc.stdout.strip()


def runtimes_dir() -> Path:
    from rig.runtime import cache_dir
    return cache_dir()


def builds_dir() -> Path:
    return runtimes_dir().parent / "builds"


def built_root(version: str) -> Path:
    return runtimes_dir() / f"built-{version}"


def manifest(root: Path) -> dict:
    f = root / "runtime.json"
    return json.loads(f.read_text()) if f.exists() else {}


def is_built(root: Path, py: str | None = None) -> bool:
    """A complete build for this interpreter (its stub) by the current recipe."""
    m = manifest(root)
    py = py or python_tag()
    return (m.get("recipe") == RECIPE and py in m.get("pythons", {})
            and (root / f"py{py}" / "backends" / "python" / STUB_NAME).exists()
            and (root / "lib" / "libtritonserver.so").exists())


class _Log:
    """The build log: every command and every line it printed, kept after the build."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._f = open(path, "a", buffering=1)

    def __call__(self, line: str) -> None:
        self._f.write(line.rstrip("\n") + "\n")

    def close(self) -> None:
        self._f.close()


def _run(args: list[str], log: _Log, step=None, cwd: str | None = None) -> None:
    """Run one build command, its output to the log; ninja's [n/N] drives the step's bar."""
    log("$ " + " ".join(args))
    env = dict(os.environ, NINJA_STATUS="[%f/%t] ", LC_ALL="C")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=cwd, env=env, start_new_session=True)
    tail: list[str] = []
    try:
        for line in proc.stdout:
            log(line)
            tail = (tail + [line.rstrip()])[-40:]
            m = re.match(r"\[(\d+)/(\d+)\]", line)
            if m and step is not None:
                step(int(m.group(1)), int(m.group(2)))
        rc = proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
        raise
    if rc != 0:
        errors = [t for t in tail if "error" in t.lower() or "Error" in t] or tail[-3:] or ["no output"]
        raise RigError(f"{Path(args[0]).name} {' '.join(args[1:3])} ... failed (exit {rc}): "
                       f"{errors[0].strip()[:240]}; the whole log: {log.path}")


class Progress:
    """A bar over the build's steps; inside a step that compiles, ninja's own count."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._p = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                       TextColumn, TimeElapsedColumn)
            self._p = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(),
                                   MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                                   TimeElapsedColumn(), transient=False)
            self._p.__enter__()
            self._overall = self._p.add_task("build", total=len(STEPS), detail="")
            self._step = None
        return self

    def __exit__(self, *exc):
        if self._p is not None:
            self._p.__exit__(*exc)

    def start(self, name: str) -> None:
        if self._p is None:
            print(f"  {name} ...", file=sys.stderr, flush=True)
            return
        self._p.update(self._overall, detail=name)
        if self._step is not None:
            self._p.remove_task(self._step)
        self._step = self._p.add_task(f"  {name}", total=None, detail="")

    def tick(self, done: int, total: int) -> None:
        if self._p is not None and self._step is not None:
            self._p.update(self._step, completed=done, total=total, detail="compiling")

    def finish(self) -> None:
        if self._p is not None:
            self._p.advance(self._overall)


def build(req: Request, out=print, progress: bool | None = None) -> dict:
    """Build (or find built) a runtime; returns its manifest. Raises RigError with one line."""
    version, branch = releases.parse(req.version)
    root = built_root(version)
    py = python_tag(req.python)
    if not req.force and is_built(root, py):
        m = manifest(root)
        out(f"built-{version} is already built (cache hit): Triton {version} from {m.get('branch')} "
            f"in {root}")
        return m
    preflight.check(req.python or sys.executable)
    sources = Sources(req.sources)
    runtimes_dir().mkdir(parents=True, exist_ok=True)
    builds_dir().mkdir(parents=True, exist_ok=True)
    with open(builds_dir() / f".{version}.lock", "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            out(f"waiting for another process that is building Triton {version} ...")
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if not req.force and is_built(root, py):
            out(f"built-{version} was built meanwhile (cache hit): {root}")
            return manifest(root)
        return _build_locked(req, version, branch, py, sources, out,
                             sys.stderr.isatty() if progress is None else progress)


def _build_locked(req: Request, version: str, branch: str, py: str, sources: Sources, out, show: bool) -> dict:
    refs = {}
    why = {}
    if not req.refs and not sources.has_release(branch, releases.COMPONENTS):
        newest = max((h for n in releases.COMPONENTS for h in sources.heads(n) if h in releases.BRANCHES),
                     default=None)
        raise RigError(f"{sources.describe()} has no {branch} branch of any of {', '.join(releases.COMPONENTS)}: "
                       f"Triton {version} is not there (its newest release: "
                       f"{releases.BRANCHES.get(newest, 'none')}{f' ({newest})' if newest else ''}); "
                       "fetch it, or build from GitHub without --sources")
    for name in releases.COMPONENTS:
        refs[name], why[name] = sources.pick(name, branch, req.refs.get(name), nearest=True)
    work = builds_dir() / version
    stamp = {"recipe": RECIPE, "refs": refs, "sources": sources.describe()}
    if (work / "stamp.json").exists() and json.loads((work / "stamp.json").read_text()) != stamp:
        shutil.rmtree(work)  # another recipe or ref: start over
    python = req.python or sys.executable
    old = manifest(built_root(version))
    # the same core built before (for another Python): only the Python backend is built now
    reuse = None if req.force else (built_root(version) / "lib" / "libtritonserver.so")
    if reuse is not None and not (old.get("recipe") == RECIPE and old.get("refs") == refs and reuse.exists()):
        reuse = None
    resumed = (work / "build").exists()  # an earlier attempt's trees: ninja goes on from them
    work.mkdir(parents=True, exist_ok=True)
    (work / "stamp.json").write_text(json.dumps(stamp))
    log = _Log(builds_dir() / f"{version}.log")
    log(f"\n==== rig runtime build {version} ({branch}) {time.strftime('%Y-%m-%d %H:%M:%S')} ====")
    out(f"building Triton {version} ({branch}) for CPU, backend stub for Python {py}, from "
        f"{sources.describe()}{'; the core is reused from ' + str(reuse) if reuse else ''}; log: {log.path}")
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    cmake, ninja = preflight.tools(runtimes_dir().parent, log)
    src, bld = work / "src", work / "build"
    commits: dict[str, str] = {}
    notes: list[str] = [f"{n}: {w}" for n, w in why.items() if w != "release branch"]
    jobs = ["-j", str(req.jobs)] if req.jobs else []
    try:
        with Progress(show) as bar:
            def step(name):
                bar.start(name)
                timings[name] = time.monotonic()

            def done(name):
                timings[name] = round(time.monotonic() - timings[name], 1)
                bar.finish()

            step("sources")
            commits.update(_fetch_all(sources, refs, src, notes, log))
            shim = recipe.shims(work / "shims")
            done("sources")

            if reuse is None:
                step("configure core")
                _run(recipe.core_configure(cmake, ninja, src, bld / "core", shim, version, refs), log)
                done("configure core")
                step("build core")
                _run([ninja, "-C", str(bld / "core"), *jobs, "triton-core"], log, bar.tick)
                done("build core")
            else:
                for name in ("configure core", "build core"):
                    bar.start(name + " (reused)")
                    bar.finish()

            pbuild = bld / f"python_backend-py{py}"
            step("configure python backend")
            _run(recipe.backend_configure(cmake, ninja, src, pbuild, shim, version, refs, python), log)
            done("configure python backend")
            step("build python backend")
            # the two targets only: "all" also compiles common's unit tests
            _run([ninja, "-C", str(pbuild), *jobs, "triton-python-backend", "triton-python-backend-stub"],
                 log, bar.tick)
            done("build python backend")

            step("python bindings")
            compiled = _compile_bindings(src, work / "build" / f"bindings-py{py}", python,
                                         reuse.parent if reuse else bld / "core", log)
            done("python bindings")

            step("assemble and check")
            m = _assemble(version, branch, refs, commits, notes, sources, work, timings, t0, log,
                          py, python, reuse, old, compiled)
            if resumed:  # its times are the last attempt's only: say so
                m["resumed"] = True
                (built_root(version) / "runtime.json").write_text(json.dumps(m, indent=1))
            done("assemble and check")
    except KeyboardInterrupt:
        log("interrupted")
        raise
    except RigError as e:
        log(f"FAILED: {e}")
        raise
    finally:
        log.close()
    shutil.rmtree(work, ignore_errors=True)  # the result is in runtimes/; the trees are not needed
    out(f"built-{version}: Triton {version} in {built_root(version)} "
        f"({m['build_seconds'] / 60:.1f} min, {m['size_mb']:.0f} MB; peak work tree {m['work_mb']:.0f} MB)")
    return m


def _fetch_all(sources: Sources, refs: dict[str, str], src: Path, notes: list[str], log) -> dict[str, str]:
    commits = {}
    for name in releases.COMPONENTS:
        dest = src / name
        if not (dest / ".git").exists():
            shutil.rmtree(dest, ignore_errors=True)
            sources.fetch(name, refs[name], dest, log)
        commits[name] = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True,
                                       text=True).stdout.strip()
    logging_cc = src / "common" / "src" / "logging.cc"
    header = src / "common" / "include" / "triton" / "common" / "triton_json.h"
    if logging_cc.exists() and header.exists():
        text = logging_cc.read_text()
        patched = recipe.common_logging_patch(text, header.read_text())
        if patched != text:
            logging_cc.write_text(patched)
        if recipe.JSON_MARK in patched:
            notes.append("common: TritonJson renamed in src/logging.cc, whose status type clashed with the "
                         "core's (fixed upstream in r25.10)")
    cml = src / "python_backend" / "CMakeLists.txt"
    text = cml.read_text()
    patched = recipe.python_backend_patch(text)
    if patched != text:
        cml.write_text(patched)
    if recipe.BOOST_MARK in patched:
        notes.append("python_backend: its Boost download (URL and SHA256 pin) replaced by the system's Boost headers")
    for name in ("pybind11", "dlpack"):
        want = recipe.pinned(text, name)
        dest = src / name
        if not (dest / ".git").exists():
            shutil.rmtree(dest, ignore_errors=True)
            if sources.folder:
                _clone_bundle_at(sources, name, want, dest, notes, log)
            else:
                sources.fetch(name, want or "master", dest, log)
        commits[name] = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True,
                                       text=True).stdout.strip()
    return commits


def _clone_bundle_at(sources: Sources, name: str, want: str | None, dest: Path, notes, log) -> None:
    """A bundle holds named refs; the pinned commit is checked out if the bundle has it."""
    from rig.build.sources import _git

    _git(["git", "clone", "-q", "--no-checkout", sources.url(name), str(dest)], log)
    _git(["git", "-C", str(dest), "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*",
          "+refs/tags/*:refs/tags/*"], log)
    ok = want and subprocess.run(["git", "-C", str(dest), "cat-file", "-e", f"{want}^{{commit}}"],
                                 capture_output=True).returncode == 0
    if not ok:
        have = sources.heads(name)
        fallback = have[-1] if have else "HEAD"
        notes.append(f"{name}: the pinned {want} is not in {sources.url(name)}; built with {fallback}")
        want = fallback
    _git(["git", "-C", str(dest), "checkout", "-q", want], log)


def _dir_mb(path: Path) -> float:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total / 1e6


def _assemble(version, branch, refs, commits, notes, sources, work, timings, t0, log,
              py, python, reuse, old, compiled) -> dict:
    root = built_root(version)
    staging = Path(tempfile.mkdtemp(prefix=f".built-{version}-", dir=runtimes_dir()))
    os.chmod(staging, 0o755)
    try:
        (staging / "lib").mkdir()
        core = reuse or work / "build" / "core" / "libtritonserver.so"
        if not core.exists():
            found = sorted((work / "build" / "core").rglob("libtritonserver.so"))
            if not found:
                raise RigError(f"the core built but no libtritonserver.so is in {work / 'build' / 'core'}; "
                               f"see {log.path}")
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
        dest = staging / f"py{py}" / "bindings"
        bindings = _official_bindings(version, py, dest, log)
        if bindings:
            notes.append(bindings)
        elif compiled is not None:
            shutil.copytree(compiled, dest / "tritonserver", symlinks=True)
            info = dest / f"tritonserver-{version}.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tritonserver\nVersion: {version}\n")
            notes.append(f"official bindings: compiled here from core/python of {refs['core']} for Python {py} "
                         "(PyPI has none of this version for it)")
        (staging / "TRITON_VERSION").write_text(version + "\n")
        carried = _carry_libraries(staging, log)
        api = _check_core(staging / "lib" / "libtritonserver.so", version, log)
        work_mb = _dir_mb(work)
        # this step is still running: its time so far (the others hold their durations)
        timings = {k: (round(time.monotonic() - v, 1) if k == "assemble and check" else v)
                   for k, v in timings.items()}
        m = {
            "kind": "built", "recipe": RECIPE, "triton_version": version, "branch": branch,
            "refs": refs, "commits": commits, "sources": sources.describe(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": os.uname().nodename,
            "cpus": len(os.sched_getaffinity(0)), "compiler": _first_line(["g++", "--version"]),
            "cmake": _first_line([preflight.tools(runtimes_dir().parent, log)[0], "--version"]),
            "core_flags": recipe.CORE_FLAGS, "backend_flags": recipe.BACKEND_FLAGS,
            "pythons": {py: python}, "api_version": api, "adaptations": notes, "carried_libraries": carried,
            "differs_from_ngc": list(recipe.DIFFERS_FROM_NGC), "step_seconds": timings,
            "pybind11": _pybind11_version(work / "src" / "pybind11"),
            "build_seconds": round(time.monotonic() - t0, 1), "work_mb": round(work_mb, 1),
        }
        # pybind11 before 2.12 (python_backend r24.10) knows numpy 1 only: its stub, given numpy 2,
        # answers every output with zeros (measured on 2.51.0), so it gets numpy<2 as the PyPI cores' do
        m["stub_numpy1"] = tuple(int(x) for x in m["pybind11"].split(".")[:2]) < (2, 12) \
            if m["pybind11"] != "unknown" else False
        m["size_mb"] = round(_dir_mb(staging), 1)
        if reuse is not None:
            m["step_seconds"] = {**old.get("step_seconds", {}), **timings}
        if root.exists() and old.get("recipe") == RECIPE and old.get("commits", {}).get("core") == commits["core"]:
            # the same core built for another Python: keep its stubs beside this one
            for other in root.glob("py*"):
                if other.name != f"py{py}" and not (staging / other.name).exists():
                    shutil.copytree(other, staging / other.name, symlinks=True)
                    m["pythons"].update({k: v for k, v in old.get("pythons", {}).items() if f"py{k}" == other.name})
        (staging / "runtime.json").write_text(json.dumps(m, indent=1))
        if root.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".old-built-{version}-", dir=runtimes_dir()))
            os.rename(root, trash / "old")
            os.rename(staging, root)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(staging, root)
        return m
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _compile_bindings(src: Path, out: Path, python: str, core_dir: Path, log) -> Path | None:
    """The in-process Python API of this core's own branch (core/python: the ``tritonserver``
    package and its one pybind11 module), compiled for ``python`` against the built core. None
    where the branch has no such sources."""
    cc = src / "core" / "python" / "tritonserver" / "_c" / "tritonserver_pybind.cc"
    if not cc.exists():
        log("no core/python bindings in this branch")
        return None
    info = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include']); "
                           "print(sysconfig.get_config_var('EXT_SUFFIX'))"], capture_output=True, text=True)
    include, suffix = info.stdout.split()[:2]
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(cc.parent.parent, out, ignore=shutil.ignore_patterns("CMakeLists.txt", "*.cc"))
    core_lib = core_dir / "libtritonserver.so"
    _run(["g++", "-O2", "-shared", "-fPIC", "-std=c++17", "-fvisibility=hidden", f"-I{include}",
          f"-I{src / 'pybind11' / 'include'}", f"-I{src / 'core' / 'include'}", str(cc),
          "-o", str(out / "_c" / f"triton_bindings{suffix}"), f"-L{core_lib.parent}", "-ltritonserver"], log)
    return out


def _official_bindings(version: str, py: str, dest: Path, log) -> str | None:
    """The PyPI ``tritonserver`` bindings of this very version, where PyPI has them for this
    Python (2.70.0 and later, CPython 3.12): the official engine then runs over its own core."""
    tag = "cp" + py.replace(".", "")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                               "--no-deps", "--only-binary=:all:", "--python-version", py, "--implementation", "cp",
                               "--abi", tag, "--platform", "manylinux_2_39_x86_64", "-d", tmp,
                               f"tritonserver=={version}"], capture_output=True, text=True, timeout=600)
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
BASE_LIBRARIES = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux", "libstdc++.so",
                  "libgcc_s.so", "libpython", "linux-vdso")


def _carry_libraries(staging: Path, log) -> list[str]:
    """Copy the libraries the core, backend and stub link directly (Debian 12's protobuf, re2,
    prometheus-cpp, ...) into the runtime's lib/, so it runs where those versions are not
    installed: the official engine's Debian 13 sandbox, a fleet node."""
    carried = []
    binaries = [staging / "lib" / "libtritonserver.so", *staging.glob("py*/backends/python/libtriton_python.so"),
                *staging.glob("py*/backends/python/" + STUB_NAME)]
    for binary in binaries:
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                            subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True).stdout)
        resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(
            ["ldd", str(binary)], capture_output=True, text=True).stdout, flags=re.M))
        for name in needed:
            # the backend links the core by name: never carry what the runtime itself provides
            if any(name.startswith(b) for b in BASE_LIBRARIES) or name in carried \
                    or (staging / "lib" / name).exists():
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
        return subprocess.run(args, capture_output=True, text=True).stdout.splitlines()[0]
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
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(filter(None, [str(lib.parent),
                                                                         os.environ.get("LD_LIBRARY_PATH")])))
    proc = subprocess.run([sys.executable, "-c", CHECK, str(lib)], capture_output=True, text=True, timeout=120,
                          env=env)
    log(f"core check: {proc.stdout.strip()}\n{proc.stderr.strip()[-2000:]}")
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RigError(f"the built core does not start ({last}); see {log.path}") from None
    meta = got.get("metadata") or {}
    if meta.get("version") != version:
        raise RigError(f"the built core started but its metadata says {json.dumps(meta)[:120]} where version "
                       f"{version} was expected; see {log.path}")
    return got["api"]


def list_built() -> list[dict]:
    out = []
    base = runtimes_dir()
    if not base.is_dir():
        return out
    for root in sorted(base.glob("built-*")):
        m = manifest(root)
        if not m:
            continue
        out.append({"name": root.name, "triton_version": m.get("triton_version"), "branch": m.get("branch"),
                    "pythons": sorted(m.get("pythons", {})), "path": str(root), "manifest": m,
                    "current": m.get("recipe") == RECIPE})
    return out


def describe(b: dict) -> str:
    """How a built runtime was built, in one line (rig runtime list, rig doctor)."""
    m = b["manifest"]
    refs = ", ".join(f"{k} {v}@{m.get('commits', {}).get(k, '?')[:8]}" for k, v in m.get("refs", {}).items())
    stale = "" if b["current"] else "; built by an older recipe: rebuild with --force"
    stale += "".join(f"; NOTE {n}" for n in m.get("adaptations", []) if "not exactly" in n)
    return (f"from {m.get('sources', '?')} ({refs}); {m.get('compiler', '?')}; "
            f"{m.get('build_seconds', 0) / 60:.1f} min{' (resumed)' if m.get('resumed') else ''} on {m.get('cpus', '?')} CPUs, {m.get('size_mb', 0):.0f} MB; "
            f"CPU only, {len(m.get('differs_from_ngc', []))} differences from the NGC image in "
            f"{b['path']}/runtime.json{stale}")

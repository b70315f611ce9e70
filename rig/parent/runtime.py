"""Find or assemble a Triton runtime: the container's install or an embedded one from PyPI.

A runtime is a plain value (``Runtime``) that can be written into a worker spec and sent to
another process or host. Embedded runtimes are unpacked from the ``nvidia-pytriton`` wheel,
which bundles a whole Triton core, its Python backend and one backend stub per interpreter
version; several of them sit side by side in the cache folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

from rig.common.errors import RigError
from rig.common.probes import STUB_NAME
from rig.common.procs import python_m
from rig.common.wheels import pip_install_into

# The core each nvidia-pytriton release bundles, from the one version table (measured here with
# TRITONSERVER_ServerMetadata); results are filed under it, a cycle whose core reports another says so.
from rig.contract.ngc import PYTRITON_CORE, embedded_alias, pytriton_of
from rig.contract.runtime import (
    BuiltRuntime,
    ContainerRuntime,
    EmbeddedRuntime,
    Runtime,
    cache_dir,
    python_tag,
)
from rig.contract.versions import UnknownVersion, resolve_version

DEFAULT_EMBEDDED = "0.7.0"


def said(pytriton: str) -> str:
    """An embedded runtime as a person names it: its Triton version, the wheel beside it
    (``0.5.10`` -> ``Triton 2.48.0 (nvidia-pytriton 0.5.10)``)."""
    core = PYTRITON_CORE.get(pytriton)
    return f"Triton {core} (nvidia-pytriton {pytriton})" if core else f"nvidia-pytriton {pytriton}"


def install_line(pytriton: str) -> str:
    """The command that installs an embedded runtime, in the Triton version where one names it
    alone (``rig runtime install 2.48.0``; 2.51.0 is also a source build, and four wheels bundle
    it: the wheel's own version then)."""
    core = PYTRITON_CORE.get(pytriton)
    if core and pytriton_of(core) == pytriton:
        return f"rig runtime install {core}"
    return f"rig runtime install {pytriton}"


def _python_libdir() -> list[str]:
    libdir = sysconfig.get_config_var("LIBDIR")
    return [libdir] if libdir and os.path.isdir(libdir) else []


def _system_libpython_dir() -> list[str]:
    """The system folder that holds this interpreter's libpython, where its LIBDIR does not."""
    soname = f"libpython{python_tag()}.so.1.0"
    if any(os.path.exists(os.path.join(d, soname)) for d in _python_libdir()):
        return []
    return [d for d in _SYSTEM_LIBDIRS if os.path.exists(os.path.join(d, soname))][:1]


# Where a distribution puts a shared libpython that its interpreter does not link (Debian and
# Ubuntu: the libpython3.X package beside a statically linked /usr/bin/python3.X).
_SYSTEM_LIBDIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)


def libpython_problem(libdirs: list[str] | None = None, version: str | None = None) -> str | None:
    """Why a backend stub for this interpreter could not start here, or None: the stubs of the
    embedded and built cores link ``libpython3.X.so.1.0``, found through the library path the rig
    gives them (this interpreter's LIBDIR). A Python without it (a static build; Ubuntu's without
    its libpython3.X package) loads no Python-backend model, and Triton says only that the stub
    is unhealthy; this says what to install."""
    version = version or python_tag()
    soname = f"libpython{version}.so.1.0"
    dirs = _python_libdir() if libdirs is None else libdirs
    if any(os.path.exists(os.path.join(d, soname)) for d in [*dirs, *_SYSTEM_LIBDIRS]):
        return None
    return (
        f"the backend stubs need {soname}, which this Python {version} ({sys.executable}) does not have "
        f"(looked in {', '.join(dirs) or 'no LIBDIR'} and the system's library folders): install it "
        f"(Debian/Ubuntu: apt-get install libpython{version}), or use a Python built with --enable-shared"
    )


# ---------------------------------------------------------------- container install


def container_home() -> Path | None:
    """The container's Triton: ``$TRITON_HOME`` if set, else ``/opt/tritonserver`` if present."""
    home = os.environ.get("TRITON_HOME")
    if home:
        return Path(home)
    p = Path("/opt/tritonserver")
    return p if (p / "lib" / "libtritonserver.so").exists() else None


def container_runtime() -> ContainerRuntime:
    home = container_home()
    if home is None:
        raise RigError(
            "no container Triton here (/opt/tritonserver missing and TRITON_HOME unset); "
            "use an embedded runtime: " + install_line(DEFAULT_EMBEDDED)
        )
    lib = home / "lib" / "libtritonserver.so"
    if not lib.exists():
        raise RigError(f"TRITON_HOME={home} has no lib/libtritonserver.so; point it at a Triton install")
    version = "unknown"
    vfile = home / "TRITON_VERSION"
    if vfile.exists():
        version = vfile.read_text().strip()
    return ContainerRuntime(
        name="container",
        triton_version=version,
        server_dir=str(home),
        core_library=str(lib),
        backend_dir=str(home / "backends"),
        library_path=(str(home / "lib"), *_python_libdir()),
    )


# ---------------------------------------------------------------- embedded runtimes


def _embedded_root(version: str) -> Path:
    return cache_dir() / f"embedded-{version}"


def _find_core(wheel_dir: Path) -> Path:
    libs = wheel_dir / "nvidia_pytriton.libs"
    found = sorted(libs.glob("libtritonserver*.so*")) if libs.is_dir() else []
    if not found:
        found = sorted(wheel_dir.rglob("libtritonserver*.so*"))
    if not found:
        raise RigError(f"{wheel_dir} holds no libtritonserver; reinstall it: rig runtime install --force")
    return found[0]


def _assemble_server_dir(root: Path, wheel_dir: Path, py: str) -> Path:
    """Lay out ``py<ver>/{lib,backends/python}`` for one interpreter version (idempotent)."""
    sdir = root / f"py{py}"
    if (sdir / "backends" / "python" / STUB_NAME).exists():
        return sdir
    stub = wheel_dir / "pytriton" / "tritonserver" / "python_backend_stubs" / py / STUB_NAME
    if not stub.exists():
        have = sorted(p.name for p in (wheel_dir / "pytriton" / "tritonserver" / "python_backend_stubs").glob("*"))
        raise RigError(
            f"this runtime has no Python-backend stub for Python {py} (it has: "
            f"{', '.join(have) or 'none'}); run the rig with one of those, or another runtime"
        )
    tmp = Path(tempfile.mkdtemp(prefix=f".py{py}-", dir=root))
    os.chmod(tmp, 0o755)
    (tmp / "lib").mkdir()
    (tmp / "backends" / "python").mkdir(parents=True)
    core = _find_core(wheel_dir)
    os.symlink(core, tmp / "lib" / "libtritonserver.so")
    libs = wheel_dir / "nvidia_pytriton.libs"
    # perf_analyzer in C API mode links these by their plain names (it fails to start without).
    for plain, pattern in (("libb64.so.0d", "libb64*.so*"), ("libcudart.so.12", "libcudart*.so*")):
        hits = sorted(libs.glob(pattern))
        if hits:
            os.symlink(hits[0], tmp / "lib" / plain)
    src_backend = wheel_dir / "pytriton" / "tritonserver" / "backends" / "python"
    for f in src_backend.iterdir():
        os.symlink(f, tmp / "backends" / "python" / f.name)
    shutil.copy2(stub, tmp / "backends" / "python" / STUB_NAME)
    for extra in ("caches",):
        src = wheel_dir / "pytriton" / "tritonserver" / extra
        if src.exists():
            os.symlink(src, tmp / extra)
    try:
        os.rename(tmp, sdir)
    except OSError:  # another process assembled it first
        shutil.rmtree(tmp, ignore_errors=True)
    return sdir


def stub_site(log=lambda msg: None) -> str | None:
    """A folder with numpy<2 for the embedded cores' backend stubs, where this env has numpy 2.

    The stubs of the PyPI cores (<= 2.51) are built against numpy 1: with numpy 2 they return
    every output as 0 bytes, silently (measured). Installed once per interpreter version.
    """
    if os.environ.get("RIG_STUB_NUMPY") == "as-is":  # to show what numpy 2 does to the stubs
        return None
    try:
        import numpy

        if int(numpy.__version__.split(".")[0]) < 2:
            return None
    except ImportError:
        pass
    site = cache_dir().parent / f"stub-site-py{python_tag()}"
    if not (site / ".complete").exists():
        log("installing numpy<2 for the backend stubs of the embedded core ...")
    pip_install_into(
        site, ["numpy<2"], "numpy<2 for the backend stubs", "or run the rig in an environment with numpy<2"
    )
    return str(site)


def _embedded_from_root(version: str, root: Path, py: str | None = None) -> EmbeddedRuntime:
    wheel_dir = root / "wheel"
    py = py or python_tag()
    sdir = _assemble_server_dir(root, wheel_dir, py)
    meta = {}
    mfile = root / "runtime.json"
    if mfile.exists():
        meta = json.loads(mfile.read_text())
    libs = str(wheel_dir / "nvidia_pytriton.libs")
    return EmbeddedRuntime(
        name=f"embedded-{version}",
        triton_version=meta.get("triton_version") or PYTRITON_CORE.get(version, "unknown"),
        server_dir=str(sdir),
        core_library=str(sdir / "lib" / "libtritonserver.so"),
        backend_dir=str(sdir / "backends"),
        library_path=(*_python_libdir(), *_system_libpython_dir(), libs, str(sdir / "lib")),
        stub_site=stub_site(),
    )


def install_embedded(version: str = DEFAULT_EMBEDDED, force: bool = False, log=lambda msg: None) -> Runtime:
    """Download ``nvidia-pytriton==version`` and unpack it into the cache (atomic rename).
    ``version`` may also name the Triton core a wheel bundles (``2.48.0``: nvidia-pytriton 0.5.10,
    the newest release with that core), by any of its names (``24.07``, ``r24.07``, ``2.48``:
    ``rig.contract.versions``)."""
    if version not in PYTRITON_CORE:
        named = runtime_name(version)  # a name that looks like a release and is none: one line
        core = resolve_version(version) if named != version or named.startswith("2.") else None
        if core and pytriton_of(core):
            log(f"Triton {core} is the core of nvidia-pytriton {pytriton_of(core)}")
            version = str(pytriton_of(core))
        elif core:
            raise RigError(
                f"no PyPI wheel bundles Triton {core} (they stop at 2.51.0): rig runtime build {shlex.quote(core)}"
            )
    root = _embedded_root(version)
    if (root / "wheel").is_dir() and not force:
        return _embedded_from_root(version, root)
    cache_dir().mkdir(parents=True, exist_ok=True)
    # One install of a version at a time: two rig processes (or test workers) starting on a fresh
    # machine would otherwise download it twice and the second would remove the first's folder
    # while that one runs from it. The lock goes with the process; the later one finds it done.
    with open(cache_dir() / f".install-{version}.lock", "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # say why this process waits, then wait
            log(f"waiting for another process that is installing nvidia-pytriton=={version} ...")
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if (root / "wheel").is_dir() and not force:
            return _embedded_from_root(version, root)
        return _install_embedded_locked(version, root, log)


def _install_embedded_locked(version: str, root: Path, log) -> Runtime:
    with tempfile.TemporaryDirectory(prefix=".dl-", dir=cache_dir()) as tmp:
        log(f"downloading nvidia-pytriton=={version} (bundles Triton {PYTRITON_CORE.get(version, '?')}) ...")
        proc = subprocess.run(
            [
                *python_m("pip"),
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
                tmp,
                f"nvidia-pytriton=={version}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise RigError(
                f"could not download nvidia-pytriton=={version} ({last}); give a Triton version a "
                f"wheel bundles ({', '.join(sorted(set(PYTRITON_CORE.values())))}) or an "
                f"nvidia-pytriton release ({', '.join(PYTRITON_CORE)}); newer Tritons: "
                "rig runtime build VERSION"
            )
        staging = Path(tmp) / "root"
        log("unpacking ...")
        with zipfile.ZipFile(wheels[0]) as zf:
            for info in zf.infolist():
                out = zf.extract(info, staging / "wheel")
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    os.chmod(out, mode)
        for exe in (staging / "wheel").rglob(STUB_NAME):
            exe.chmod(0o755)
        (staging / "runtime.json").write_text(
            json.dumps(
                {
                    "package": "nvidia-pytriton",
                    "package_version": version,
                    "triton_version": PYTRITON_CORE.get(version, "unknown"),
                    "wheel": wheels[0].name,
                }
            )
        )
        if root.exists():
            shutil.rmtree(root)
        os.rename(staging, root)
    return _embedded_from_root(version, root)


def list_embedded() -> list[dict]:
    out = []
    base = cache_dir()
    if not base.is_dir():
        return out
    for root in sorted(base.glob("embedded-*")):
        version = root.name[len("embedded-") :]
        meta = json.loads((root / "runtime.json").read_text()) if (root / "runtime.json").exists() else {}
        stubs_dir = root / "wheel" / "pytriton" / "tritonserver" / "python_backend_stubs"
        stubs = sorted((p.name for p in stubs_dir.glob("*")), key=lambda s: tuple(map(int, s.split("."))))
        out.append(
            {
                "name": root.name,
                "package_version": version,
                "triton_version": meta.get("triton_version", PYTRITON_CORE.get(version, "unknown")),
                "stubs": stubs,
                "path": str(root),
            }
        )
    return out


# ---------------------------------------------------------------- built from source


def is_built_spec(spec: str) -> bool:
    """``built-2.67.0`` or a Triton version (``2.67.0``): a runtime `rig runtime build` makes."""
    v = spec.removeprefix("built-")
    return spec.startswith("built-") or (v.startswith("2.") and v.count(".") == 2)


def built_runtime(spec: str) -> BuiltRuntime:
    """A runtime built here from source, for the running interpreter."""
    from rig.runtimes.from_source import cache

    v = spec.removeprefix("built-")
    root = cache.built_root(v)
    m = cache.manifest(root)
    if not m:
        have = ", ".join(r["name"] for r in cache.list_built()) or "none"
        raise RigError(
            f"runtime {spec!r} is not built here (built: {have}): run `rig runtime build "
            f"{shlex.quote(v)}` (add --sources DIR for a folder of git bundles)"
        )
    py = python_tag()
    if not cache.is_built(root, py):
        why = (
            f"it was built for Python {', '.join(sorted(m.get('pythons', {})))} only"
            if m.get("recipe") == cache.RECIPE
            else "it was built by an older recipe"
        )
        raise RigError(
            f"runtime built-{v} is not usable with Python {py}: {why}; "
            f"`rig runtime build {shlex.quote(v)}` with this interpreter builds what it needs"
        )
    sdir = root / f"py{py}"
    bindings = sdir / "bindings"
    return BuiltRuntime(
        name=f"built-{v}",
        # a variant (a patch, another ref: rig.runtimes.from_source.identity) is filed under its own name, beside
        # its release, never in the release's column
        triton_version=str(m.get("label") or v) if m.get("variant") else m.get("triton_version", v),
        server_dir=str(sdir),
        core_library=str(sdir / "lib" / "libtritonserver.so"),
        backend_dir=str(sdir / "backends"),
        library_path=(*_python_libdir(), *_system_libpython_dir(), str(root / "lib")),
        # a stub built with pybind11 < 2.12 needs numpy<2 (builds before that field: r24.10's)
        stub_site=stub_site() if m.get("stub_numpy1", m.get("branch") == "r24.10") else None,
        bindings=str(bindings) if (bindings / "tritonserver").is_dir() else None,
    )


# What looks like a release's name (a Triton version, an NGC tag, a branch): one the resolver does not
# know is refused with its line, not taken for a runtime that is merely not installed.
_VERSION_LIKE = re.compile(r"v?2\.\d+(\.\d+)?|r?\d\d\.\d\d(-py3)?")


def runtime_name(spec: str) -> str:
    """The runtime a name says, in the rig's own words, so that every option that takes a runtime
    takes any name of a release (``rig.contract.versions``): ``26.03``, ``r26.03``, ``2.67`` and
    ``2.67.0`` are ``2.67.0`` (``built-2.67.0``); a core only a PyPI wheel bundles is that wheel's
    runtime (``2.48.0``, ``24.07`` -> ``0.5.10``). An nvidia-pytriton release (``0.5.10``), a
    runtime's own name (``embedded-0.5.10``, ``built-2.67.0``, a variant) and the keywords stay as
    they are. A name that looks like a release but is none known is ``UnknownVersion`` (one line).
    ``rig matrix --runtimes`` and ``--runtime`` resolve through it."""
    text = spec.strip()
    if text in ("", "auto", "container", "embedded", "all", "installed") or text.startswith(("embedded-", "built-")):
        return text
    if text in PYTRITON_CORE:
        return text
    try:
        version = resolve_version(text)
    except UnknownVersion:
        if _VERSION_LIKE.fullmatch(text):
            raise
        return text
    return embedded_alias(version) or version


def official_bindings(rt: Runtime) -> tuple[str | None, bool | None]:
    """The ``tritonserver`` bindings a worker of the official engine imports over ``rt``: (their
    version, whether they are the release's own). A built runtime's own folder comes first on the
    worker's path (``BuiltRuntime.worker_env``: the bindings compiled from its branch's
    ``core/python``, or PyPI's wheel of its version), then this environment's install, as the
    worker (this interpreter, ``-P``) finds them. Own: the bindings' version is the core's release
    (a variant's release; the container's and a wheel's core by their Triton version); the PyPI
    2.70/2.71 bindings over an older core are not. (None, None) where none is installed."""
    import importlib.metadata

    from rig.runtimes.from_source.identity import release_of

    first = [rt.bindings] if isinstance(rt, BuiltRuntime) and rt.bindings else []
    found = next(iter(importlib.metadata.distributions(name="tritonserver", path=[*first, *sys.path])), None)
    if found is None:
        return None, None
    version = found.version
    return version, version == release_of(rt.triton_version)


def list_built() -> list[dict]:
    from rig.runtimes.from_source import cache

    return cache.list_built()


def resolve(spec: str | None, auto_install: bool = True, log=lambda msg: None) -> Runtime:
    """Turn what the user typed into a runtime.

    ``None``/``auto``: the container's Triton where there is one, else the embedded default
    (installed on first use). ``container``; ``embedded`` (the default version);
    ``embedded-0.6.0`` or ``0.6.0``: that embedded runtime, which must be installed;
    ``2.67.0`` or ``built-2.67.0``: the runtime `rig runtime build 2.67.0` made.
    """
    if spec in (None, "", "auto"):
        if container_home() is not None:
            return container_runtime()
        spec = DEFAULT_EMBEDDED
        if not (_embedded_root(spec) / "wheel").is_dir():
            if not auto_install:
                raise RigError(f"the embedded runtime {said(spec)} is not installed: {install_line(spec)}")
            return install_embedded(spec, log=log)
    if spec == "container":
        return container_runtime()
    if spec == "embedded":
        spec = DEFAULT_EMBEDDED
    named = runtime_name(spec)
    if named != spec:  # another name of a release: said back as the runtime it names
        v = resolve_version(spec)
        words = f"Triton {v} is" if v == spec.strip() else f"{spec.strip()} is Triton {v},"
        log(
            f"{words} the core of nvidia-pytriton {named}: runtime embedded-{named}"
            if named != v
            else f"{words} runtime built-{v}"
        )
        spec = named
    if is_built_spec(spec):
        return built_runtime(spec)
    version = spec.removeprefix("embedded-")
    root = _embedded_root(version)
    if not (root / "wheel").is_dir():
        if version == DEFAULT_EMBEDDED and auto_install:
            return install_embedded(version, log=log)
        raise RigError(
            f"runtime {spec!r} is not installed: run `{install_line(str(version))}` "
            f"(installed: {', '.join(said(r['package_version']) for r in list_embedded()) or 'none'})"
        )
    return _embedded_from_root(version, root)

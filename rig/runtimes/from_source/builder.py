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
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rig.common.errors import RigError
from rig.runtimes.from_source import identity, preflight, recipe, releases
from rig.runtimes.from_source.assemble import Build, assemble, compile_bindings
from rig.runtimes.from_source.cache import (
    RECIPE,
    builds_dir,
    built_root,
    is_built,
    manifest,
    python_tag,
    runtimes_dir,
)
from rig.runtimes.from_source.identity import Patch
from rig.runtimes.from_source.runner import Log, Progress, run
from rig.runtimes.from_source.sources import Sources, apply_patch, checkout, git


@dataclasses.dataclass
class Request:
    version: str  # what the user typed: 2.67.0 or r26.03
    sources: str | None = None  # a folder of git bundles; None: GitHub
    refs: dict[str, str] = dataclasses.field(default_factory=dict)  # --ref overrides: a branch, tag or commit
    patches: tuple[Patch, ...] = ()  # --patch: diffs applied before the build (identity.parse_patches)
    force: bool = False
    jobs: int | None = None
    python: str | None = None  # the interpreter whose backend stub is built; None: this one


def build(req: Request, out=print, progress: bool | None = None) -> dict:
    """Build (or find built) a runtime; returns its manifest. Raises RigError with one line."""
    version, branch = releases.parse(req.version)
    # a --ref to the release's own branch changes nothing: what is left makes a variant
    req = dataclasses.replace(req, refs={c: r for c, r in req.refs.items() if r != branch})
    py = python_tag(req.python)
    sources = Sources(req.sources) if (req.refs or req.patches) else None
    resolved = _resolve_variant(req, version, branch, sources) if sources is not None else None
    name = identity.label(version, resolved[1], req.patches) if resolved else version
    root = built_root(name)
    if not req.force and is_built(root, py):
        m = manifest(root)
        what = identity.describe_variant(m) or f"Triton {version} from {m.get('branch')}"
        out(f"built-{name} is already built (cache hit): {what}, in {root}")
        return m
    preflight.check(req.python or sys.executable)
    sources = sources or Sources(req.sources)
    runtimes_dir().mkdir(parents=True, exist_ok=True)
    builds_dir().mkdir(parents=True, exist_ok=True)
    target = Target(version, branch, py, name, *(resolved or (None, None)))
    with open(builds_dir() / f".{name}.lock", "a") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            out(f"waiting for another process that is building built-{name} ...")
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if not req.force and is_built(root, py):
            out(f"built-{name} was built meanwhile (cache hit): {root}")
            return manifest(root)
        return _build_locked(req, target, sources, out, sys.stderr.isatty() if progress is None else progress)


@dataclasses.dataclass(frozen=True)
class Target:
    """What one build makes: a release (``name`` is its version) or a variant of it (``name`` is
    its label, ``refs`` and ``commits`` resolved before the build: ``identity``)."""

    version: str
    branch: str
    py: str
    name: str
    refs: dict[str, str] | None = None
    commits: dict[str, str] | None = None


def _resolve_variant(req: Request, version: str, branch: str, sources: Sources) -> tuple[dict, dict]:
    """A variant's ref and commit per component, read from mirrors of the repositories
    (``<cache>/builds/mirrors``) before anything is built: its name is derived from them."""
    refs, _ = _pick_refs(req, version, branch, sources)
    log = Log(builds_dir() / "mirrors.log")
    try:
        commits = {n: sources.resolve(n, refs[n], sources.mirror(n, builds_dir() / "mirrors", log)) for n in refs}
    finally:
        log.close()
    return refs, commits


def _pick_refs(req: Request, version: str, branch: str, sources: Sources) -> tuple[dict, dict]:
    """(ref, why) per repository; a release none of them has is refused in one line."""
    if not req.refs and not sources.has_release(branch, releases.COMPONENTS):
        newest = max((h for n in releases.COMPONENTS for h in sources.heads(n) if h in releases.BRANCHES), default=None)
        raise RigError(
            f"{sources.describe()} has no {branch} branch of any of {', '.join(releases.COMPONENTS)}: "
            f"Triton {version} is not there (its newest release: "
            f"{releases.BRANCHES.get(newest, 'none')}{f' ({newest})' if newest else ''}); "
            "fetch it, or build from GitHub without --sources"
        )
    picked = {name: sources.pick(name, branch, req.refs.get(name), nearest=True) for name in releases.COMPONENTS}
    return {n: p[0] for n, p in picked.items()}, {n: p[1] for n, p in picked.items()}


def _reusable_core(req: Request, name: str, refs: dict) -> Path | None:
    """The core built before for another Python, where it is this build's own: only the Python
    backend is built then."""
    old, core = manifest(built_root(name)), built_root(name) / "lib" / "libtritonserver.so"
    if req.force or not (old.get("recipe") == RECIPE and old.get("refs") == refs and core.exists()):
        return None
    return core


def _work_tree(name: str, refs: dict, sources: Sources, patches: tuple[Patch, ...]) -> tuple[Path, bool]:
    """The build's work folder, and whether an earlier attempt's trees are there (ninja goes on
    from them); one made by another recipe, other refs or other patches is started over."""
    work = builds_dir() / name
    stamp = {"recipe": RECIPE, "refs": refs, "sources": sources.describe(), "patches": [p.sha256 for p in patches]}
    if (work / "stamp.json").exists() and json.loads((work / "stamp.json").read_text()) != stamp:
        shutil.rmtree(work)
    resumed = (work / "build").exists()
    work.mkdir(parents=True, exist_ok=True)
    (work / "stamp.json").write_text(json.dumps(stamp))
    return work, resumed


@dataclasses.dataclass(frozen=True)
class _Tools:
    """What compiles: cmake and ninja (from PyPI, in the cache), ccache where used, ninja's jobs."""

    cmake: str
    ninja: str
    ccache: str | None
    jobs: tuple[str, ...]


class _Steps:
    """The bar over the build's steps and each step's time in ``timings``: while a step runs its
    entry holds when it began (``assemble`` reads its own that way), then its seconds."""

    def __init__(self, bar: Progress, timings: dict[str, float]):
        self.bar, self.timings = bar, timings

    @contextlib.contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        self.bar.start(step)
        self.timings[step] = time.monotonic()
        yield  # a step that raises is not finished: its bar and time stay as they were
        self.timings[step] = round(time.monotonic() - self.timings[step], 1)
        self.bar.finish()

    def skipped(self, step: str, why: str) -> None:
        self.bar.start(f"{step} ({why})")
        self.bar.finish()


def _build_locked(req: Request, target: Target, sources: Sources, out, show: bool) -> dict:
    """The build itself, under its lock: sources, the core (or the one built before, reused), the
    Python backend and its stub, the bindings, then the runtime assembled, checked and moved into
    place; the work tree removed once it is."""
    b, resumed = _start(req, target, sources, out)
    try:
        tools = _tools(req, b.log)
        with Progress(show) as bar:
            steps = _Steps(bar, b.timings)
            with steps("sources"):
                b.commits.update(_fetch_all(sources, b, target.commits, b.log))
                shim = recipe.shims(b.work / "shims")
                _check_reuse(b)
            _compile_core(b, tools, shim, steps)
            _compile_backend(b, tools, shim, steps)
            with steps("python bindings"):
                core_dir = b.reuse.parent if b.reuse else b.work / "build" / "core"
                compiled = compile_bindings(
                    b.work / "src", b.work / "build" / f"bindings-py{b.py}", b.python, core_dir, b.log
                )
            with steps("assemble and check"):
                m = assemble(b, compiled)
                _add_to_manifest(m, b.label, tools.ccache, resumed, b.log)
    except KeyboardInterrupt:
        b.log("interrupted")
        raise
    except RigError as e:
        b.log(f"FAILED: {e}")
        raise
    finally:
        b.log.close()
    shutil.rmtree(b.work, ignore_errors=True)  # the result is in runtimes/; the trees are not needed
    out(_built_line(m, target))
    return m


def _start(req: Request, target: Target, sources: Sources, out) -> tuple[Build, bool]:
    """The build as it starts: its refs, its work tree (and whether an earlier attempt's is there
    to resume), a core built before that it may reuse, its log; announced in one line."""
    refs, why = _pick_refs(req, target.version, target.branch, sources)
    work, resumed = _work_tree(target.name, refs, sources, req.patches)
    reuse = _reusable_core(req, target.name, refs)
    log = Log(builds_dir() / f"{target.name}.log")
    _announce(target, sources, reuse, log, out, _variant_words(req, target))
    b = Build(
        target.version,
        target.branch,
        refs,
        sources,
        work,
        target.py,
        req.python or sys.executable,
        log,
        reuse,
        old=manifest(built_root(target.name)),
        notes=[f"{n}: {w}" for n, w in why.items() if w != "release branch"],
        name=target.name,
        patches=req.patches,
        overrides=dict(req.refs),
    )
    return b, resumed


def _tools(req: Request, log: Log) -> _Tools:
    cmake, ninja = preflight.tools(runtimes_dir().parent, log)
    return _Tools(cmake, ninja, _compiler_cache(log), ("-j", str(req.jobs)) if req.jobs else ())


def _check_reuse(b: Build) -> None:
    """A core built before is reused only where it was built from the commits just fetched (a
    branch that moved since makes a new core): else it is built again, and the log says why."""
    if b.reuse is None:
        return
    before = b.old.get("commits", {})
    moved = [c for c in ("core", "common") if before.get(c) != b.commits.get(c)]
    if moved:
        b.log(f"the core built before is not reused: {', '.join(moved)} moved since ({before})")
        b.reuse = None


def _compile_core(b: Build, tools: _Tools, shim: Path, steps: _Steps) -> None:
    if b.reuse is not None:
        for step in ("configure core", "build core"):
            steps.skipped(step, "reused")
        return
    src, core = b.work / "src", b.work / "build" / "core"
    with steps("configure core"):
        run(
            recipe.core_configure(tools.cmake, tools.ninja, src, core, shim, b.version, b.refs)
            + recipe.ccache_flags(tools.ccache),
            b.log,
        )
    with steps("build core"):
        run([tools.ninja, "-C", str(core), *tools.jobs, "triton-core"], b.log, steps.bar.tick)


def _compile_backend(b: Build, tools: _Tools, shim: Path, steps: _Steps) -> None:
    src, pbuild = b.work / "src", b.work / "build" / f"python_backend-py{b.py}"
    with steps("configure python backend"):
        run(
            recipe.backend_configure(tools.cmake, tools.ninja, src, pbuild, shim, b.version, b.refs, b.python)
            + recipe.ccache_flags(tools.ccache),
            b.log,
        )
    with steps("build python backend"):
        # the two targets only: "all" also compiles common's unit tests
        targets = ["triton-python-backend", "triton-python-backend-stub"]
        run([tools.ninja, "-C", str(pbuild), *tools.jobs, *targets], b.log, steps.bar.tick)


def _built_line(m: dict, target: Target) -> str:
    """What a finished build says: the runtime, where, how long, what it reused and the cache served."""
    reused = m.get("reused", {}).get("core")
    cc = m.get("compiler_cache")
    return (
        f"built-{target.name}: Triton {target.version}{' (a variant)' if target.commits else ''} in "
        f"{built_root(target.name)} ({m['build_seconds'] / 60:.1f} min, {m['size_mb']:.0f} MB; peak work tree "
        f"{m['work_mb']:.0f} MB"
        + (f"; the core reused from its build of {reused.get('built_at') or '?'}" if reused else "")
        + (f"; compiler cache: {cc['hits']} of {cc['hits'] + cc['misses']} compiles served" if cc else "")
        + f"; backend stubs for Python {', '.join(sorted(m.get('pythons', {})))})"
    )


def _announce(target: Target, sources: Sources, reuse, log, out, words: list[str]) -> None:
    version, branch, py = target.version, target.branch, target.py
    log(f"\n==== rig runtime build {target.name} ({branch}) {time.strftime('%Y-%m-%d %H:%M:%S')} ====")
    variant = f" as built-{target.name} (a variant: {', '.join(words)})" if target.commits else ""
    out(
        f"building Triton {version} ({branch}){variant} for CPU, backend stub for Python {py}, from "
        f"{sources.describe()}{'; the core is reused from ' + str(reuse) if reuse else ''}; log: {log.path}"
    )


def _add_to_manifest(m: dict, name: str, ccache: str | None, resumed: bool, log) -> None:
    """What the manifest learns after assembly: the compiler cache's counts, and that a resumed
    build's times are its last attempt's only."""
    if ccache:
        m["compiler_cache"] = _cache_stats(ccache)
        log(f"compiler cache: {m['compiler_cache']}")
    if resumed:
        m["resumed"] = True
    if resumed or ccache:
        (built_root(name) / "runtime.json").write_text(json.dumps(m, indent=1))


def _compiler_cache(log) -> str | None:
    """ccache (Debian's ``ccache``) where installed and not turned off (``RIG_CCACHE=off``): what one
    release compiled serves the next, whose sources mostly did not change. Its folder is the rig's
    cache's (``CCACHE_DIR`` wins), paths are hashed relative to the builds' folder (each release builds
    in a folder of its own), and its counts start at zero for this build (one build at a time)."""
    if os.environ.get("RIG_CCACHE") == "off":
        log("compiler cache: off (RIG_CCACHE=off)")
        return None
    path = shutil.which("ccache")
    if not path:
        log("compiler cache: none (install ccache: apt-get install ccache; neighbouring releases build faster)")
        return None
    os.environ.setdefault("CCACHE_DIR", str(runtimes_dir().parent / "ccache"))
    os.environ["CCACHE_BASEDIR"] = str(builds_dir())
    os.environ.setdefault("CCACHE_NOHASHDIR", "true")
    os.environ.setdefault("CCACHE_MAXSIZE", "4G")
    subprocess.run([path, "--zero-stats"], capture_output=True, check=False)
    log(f"compiler cache: {path} in {os.environ['CCACHE_DIR']}")
    return path


def _cache_stats(ccache: str) -> dict[str, int]:
    """This build's compiles served by the cache (``hits``), compiled anew (``misses``)."""
    p = subprocess.run([ccache, "--print-stats"], capture_output=True, text=True, check=False)
    stats = dict(line.split("\t", 1) for line in p.stdout.splitlines() if "\t" in line)

    def n(key):
        try:
            return int(stats.get(key, 0))
        except ValueError:
            return 0

    return {"hits": n("direct_cache_hit") + n("preprocessed_cache_hit"), "misses": n("cache_miss")}


def _variant_words(req: Request, target: Target) -> list[str]:
    """What makes a variant, in words: the components given another ref (with the commit it
    named), the patches applied."""
    commits = target.commits or {}
    words = [f"{c} at {r} ({commits.get(c, '?')[:8]})" for c, r in sorted(req.refs.items())]
    return words + [f"{p.component} patched with {p.name}" for p in req.patches]


def _fetch_all(sources: Sources, b: Build, commits_wanted: dict[str, str] | None, log) -> dict[str, str]:
    """Every component checked out into the work tree (a variant's at the commits resolved for its
    name, from the mirrors), its patches applied, then the recipe's adaptations."""
    refs, src, notes = b.refs, b.work / "src", b.notes
    commits = {}
    for name in releases.COMPONENTS:
        dest = src / name
        if not (dest / ".git").exists():
            shutil.rmtree(dest, ignore_errors=True)
            if commits_wanted:
                checkout(builds_dir() / "mirrors" / f"{name}.git", commits_wanted[name], dest, log)
            else:
                sources.fetch(name, refs[name], dest, log)
            try:
                for patch in (p for p in b.patches if p.component == name):
                    apply_patch(dest, name, commits_wanted[name] if commits_wanted else refs[name], patch, log)
            except RigError:
                shutil.rmtree(dest, ignore_errors=True)  # never a checkout half patched
                raise
        notes.extend(
            f"{name}: patched with {p.name} (sha256 {p.sha256[:12]})" for p in b.patches if p.component == name
        )
        commits[name] = subprocess.run(
            ["git", "-C", str(dest), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    logging_cc = src / "common" / "src" / "logging.cc"
    header = src / "common" / "include" / "triton" / "common" / "triton_json.h"
    if logging_cc.exists() and header.exists():
        text = logging_cc.read_text()
        patched = recipe.common_logging_patch(text, header.read_text())
        if patched != text:
            logging_cc.write_text(patched)
        if recipe.JSON_MARK in patched:
            notes.append(
                "common: TritonJson renamed in src/logging.cc, whose status type clashed with the "
                "core's (fixed upstream in r25.10)"
            )
    core_cml = src / "core" / "src" / "CMakeLists.txt"
    if core_cml.exists():
        text = core_cml.read_text()
        patched = recipe.core_version_patch(text)
        if patched != text:
            core_cml.write_text(patched)
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
        commits[name] = subprocess.run(
            ["git", "-C", str(dest), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    return commits


def _clone_bundle_at(sources: Sources, name: str, want: str | None, dest: Path, notes, log) -> None:
    """A bundle holds named refs; the pinned commit is checked out if the bundle has it."""
    git(["git", "clone", "-q", "--no-checkout", sources.url(name), str(dest)], log)
    git(
        [
            "git",
            "-C",
            str(dest),
            "fetch",
            "-q",
            "origin",
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/tags/*:refs/tags/*",
        ],
        log,
    )
    ok = (
        want
        and subprocess.run(
            ["git", "-C", str(dest), "cat-file", "-e", f"{want}^{{commit}}"],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    if not ok:
        have = sources.heads(name)
        fallback = have[-1] if have else "HEAD"
        notes.append(f"{name}: the pinned {want} is not in {sources.url(name)}; built with {fallback}")
        want = fallback
    git(["git", "-C", str(dest), "checkout", "-q", want], log)

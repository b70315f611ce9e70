"""``rig runtime build VERSION``: fetch, configure, compile and lay out one Triton release.

The work happens in ``<cache>/builds/<version>/`` (sources and build trees, kept when a build is
interrupted so the next attempt resumes where ninja stopped); the result is assembled in a hidden
folder and renamed to ``<cache>/runtimes/built-<version>`` only when complete, so nothing that
looks finished is ever half-made. The log of every attempt is ``<cache>/builds/<version>.log``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
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


def _build_locked(req: Request, target: Target, sources: Sources, out, show: bool) -> dict:
    version, branch, py, name = target.version, target.branch, target.py, target.name
    refs, why = _pick_refs(req, version, branch, sources)
    work, resumed = _work_tree(name, refs, sources, req.patches)
    python = req.python or sys.executable
    reuse = _reusable_core(req, name, refs)
    log = Log(builds_dir() / f"{name}.log")
    _announce(target, sources, reuse, log, out, _variant_words(req, target))
    b = Build(
        version,
        branch,
        refs,
        sources,
        work,
        py,
        python,
        log,
        reuse,
        old=manifest(built_root(name)),
        notes=[f"{n}: {w}" for n, w in why.items() if w != "release branch"],
        name=name,
        patches=req.patches,
        overrides=dict(req.refs),
    )
    timings, commits = b.timings, b.commits
    cmake, ninja = preflight.tools(runtimes_dir().parent, log)
    ccache = _compiler_cache(log)
    src, bld = work / "src", work / "build"
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
            commits.update(_fetch_all(sources, b, target.commits, log))
            shim = recipe.shims(work / "shims")
            done("sources")

            if reuse is None:
                step("configure core")
                run(
                    recipe.core_configure(cmake, ninja, src, bld / "core", shim, version, refs)
                    + recipe.ccache_flags(ccache),
                    log,
                )
                done("configure core")
                step("build core")
                run([ninja, "-C", str(bld / "core"), *jobs, "triton-core"], log, bar.tick)
                done("build core")
            else:
                for reused in ("configure core", "build core"):  # not ``name``: the runtime's, used below
                    bar.start(reused + " (reused)")
                    bar.finish()

            pbuild = bld / f"python_backend-py{py}"
            step("configure python backend")
            run(
                recipe.backend_configure(cmake, ninja, src, pbuild, shim, version, refs, python)
                + recipe.ccache_flags(ccache),
                log,
            )
            done("configure python backend")
            step("build python backend")
            # the two targets only: "all" also compiles common's unit tests
            run([ninja, "-C", str(pbuild), *jobs, "triton-python-backend", "triton-python-backend-stub"], log, bar.tick)
            done("build python backend")

            step("python bindings")
            compiled = compile_bindings(
                src, work / "build" / f"bindings-py{py}", python, reuse.parent if reuse else bld / "core", log
            )
            done("python bindings")

            step("assemble and check")
            m = assemble(b, compiled)
            _add_to_manifest(m, name, ccache, resumed, log)
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
    out(
        f"built-{name}: Triton {version}{' (a variant)' if target.commits else ''} in {built_root(name)} "
        f"({m['build_seconds'] / 60:.1f} min, {m['size_mb']:.0f} MB; peak work tree {m['work_mb']:.0f} MB"
        + (
            f"; compiler cache: {cc['hits']} of {cc['hits'] + cc['misses']} compiles served"
            if (cc := m.get("compiler_cache"))
            else ""
        )
        + ")"
    )
    return m


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

"""Where a source build's repositories come from: GitHub, or a folder of git bundles.

A git bundle is a git remote like any other (``git clone -b r26.03 core.bundle core``), so both
routes are the same few git commands; only the address differs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from rig.common.errors import RigError
from rig.runtimes.from_source.identity import COMMIT

_ALL_REFS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")

GITHUB = "https://github.com/triton-inference-server/{name}.git"
# Third-party repositories the Python backend pins (its CMakeLists names them).
THIRD_PARTY = {"pybind11": "https://github.com/pybind/pybind11.git", "dlpack": "https://github.com/dmlc/dlpack.git"}

# A release branch some repositories never cut: upstream's build then takes main (the backend
# helpers stopped branching after r26.02). Used, and recorded, only where the branch is absent.
FALLBACK_TO_MAIN = ("backend",)


class Sources:
    """The address of each repository, and which branches it has."""

    def __init__(self, folder: str | None):
        self.folder = Path(folder).resolve() if folder else None
        if self.folder is not None and not self.folder.is_dir():
            raise RigError(
                f"--sources {folder}: no such folder; give a folder of git bundles "
                "(core.bundle, common.bundle, ...) or leave it out to fetch from GitHub"
            )
        self._heads: dict[str, list[str]] = {}

    def describe(self) -> str:
        return str(self.folder) if self.folder else "github.com/triton-inference-server"

    def url(self, name: str) -> str:
        if self.folder is None:
            return THIRD_PARTY.get(name) or GITHUB.format(name=name)
        bundle = self.folder / f"{name}.bundle"
        if not bundle.exists():
            raise RigError(
                f"--sources {self.folder} has no {name}.bundle; add it (git bundle create "
                f"{name}.bundle --all in a clone of {name}) or leave --sources out to fetch from GitHub"
            )
        return str(bundle)

    def heads(self, name: str) -> list[str]:
        """Branch and tag names the repository has (``git ls-remote``, which reads bundles too)."""
        if name not in self._heads:
            proc = subprocess.run(
                ["git", "ls-remote", "--heads", "--tags", self.url(name)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["git ls-remote failed"])[-1]
                raise RigError(
                    f"cannot list the branches of {name} at {self.url(name)} ({last}); "
                    "without a network use --sources DIR with git bundles"
                )
            names = []
            for line in proc.stdout.splitlines():
                ref = line.split("\t", 1)[-1]
                for prefix in ("refs/heads/", "refs/tags/"):
                    if ref.startswith(prefix):
                        names.append(ref[len(prefix) :].removesuffix("^{}"))
            self._heads[name] = sorted(set(names))
        return self._heads[name]

    def pick(self, name: str, branch: str, override: str | None = None, nearest: bool = False) -> tuple[str, str]:
        """(ref to build, why) for one repository. A release branch it lacks is refused, unless
        ``nearest`` (the release is there, in other repositories): then main, said loudly."""
        if override:
            if override not in self.heads(name) and not COMMIT.fullmatch(override):
                raise RigError(
                    f"--ref {name}={override}: {self.describe()} has no such branch or tag of {name} "
                    f"(it has {_span(self.heads(name))}; a commit is 7 to 40 hex digits)"
                )
            return override, f"--ref {name}={override}"
        if branch in self.heads(name):
            return branch, "release branch"
        if name in FALLBACK_TO_MAIN and "main" in self.heads(name):
            return "main", f"no {branch} branch of {name}: main, as upstream's build takes"
        if nearest and "main" in self.heads(name):
            return "main", (
                f"no {branch} branch of {name} in {self.describe()}: built from its main "
                f"(the nearest there), so this is not exactly the release's {name}"
            )
        raise RigError(
            f"{self.describe()} has no {branch} branch of {name} (it has {_span(self.heads(name))}); "
            f"fetch it, or build from another branch with --ref {name}=BRANCH"
        )

    def has_release(self, branch: str, names) -> bool:
        return any(branch in self.heads(n) for n in names)

    def mirror(self, name: str, into: Path, log) -> Path:
        """A bare copy of the repository with every branch and tag (``into/NAME.git``), made once
        and brought up to date: where a commit is resolved and its history read."""
        path = into / f"{name}.git"
        if (path / "HEAD").exists():
            git(["git", "-C", str(path), "fetch", "-q", "--prune", self.url(name), *_ALL_REFS], log)
        else:
            into.mkdir(parents=True, exist_ok=True)
            tmp = into / f".{name}.git.part"
            shutil.rmtree(tmp, ignore_errors=True)
            git(["git", "clone", "-q", "--bare", self.url(name), str(tmp)], log)
            git(["git", "-C", str(tmp), "fetch", "-q", self.url(name), *_ALL_REFS], log)
            tmp.rename(path)
        return path

    def resolve(self, name: str, ref: str, mirror: Path) -> str:
        """The commit ``ref`` (a branch, a tag or a commit, whole or abbreviated) names in
        ``name``'s mirror; one line where it names none."""
        proc = subprocess.run(
            ["git", "-C", str(mirror), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise RigError(
                f"--ref {name}={ref}: {self.describe()} has no such branch, tag or commit of {name} "
                f"(branches {_span(self.heads(name))})"
            )
        return proc.stdout.strip()

    def fetch(self, name: str, ref: str, dest: Path, log) -> str:
        """Check ``ref`` of ``name`` out into ``dest``; returns the commit."""
        url = self.url(name)
        args = ["git", "clone", "-q", "--no-checkout", url, str(dest)]
        if self.folder is None and name not in THIRD_PARTY:
            args[3:3] = ["--depth", "1", "--branch", ref]
        git(args, log)
        git(["git", "-C", str(dest), "checkout", "-q", ref if self.folder or name in THIRD_PARTY else "HEAD"], log)
        return git(["git", "-C", str(dest), "rev-parse", "HEAD"], log).strip()


def first_parent(mirror: Path, good: str, bad: str) -> list[tuple[str, str]]:
    """(commit, subject) of every first-parent commit reachable from ``bad`` and not from ``good``,
    oldest first: the changes a bisection walks between two releases of one repository."""
    proc = subprocess.run(
        ["git", "-C", str(mirror), "log", "--first-parent", "--reverse", "--format=%H %s", f"{good}..{bad}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RigError(f"git log {good[:8]}..{bad[:8]} failed in {mirror}: {proc.stderr.strip()[-200:]}")
    return [(line[:40], line[41:]) for line in proc.stdout.splitlines() if line.strip()]


def checkout(mirror: Path, commit: str, dest: Path, log) -> str:
    """``commit`` of a mirrored repository checked out into ``dest``; returns the commit."""
    git(["git", "clone", "-q", "--no-checkout", str(mirror), str(dest)], log)
    git(["git", "-C", str(dest), "checkout", "-q", commit], log)
    return git(["git", "-C", str(dest), "rev-parse", "HEAD"], log).strip()


def apply_patch(dest: Path, component: str, commit: str, patch, log) -> None:
    """``patch`` (``identity.Patch``) applied to the checkout ``dest``; a diff that does not apply
    is one line, before anything is compiled."""
    check = subprocess.run(
        ["git", "-C", str(dest), "apply", "--check", patch.path], capture_output=True, text=True, check=False
    )
    if check.returncode != 0:
        first = (check.stderr.strip().splitlines() or ["git apply failed"])[0]
        raise RigError(
            f"--patch {component}={patch.path} does not apply to {component} at {commit[:8]} ({first}): "
            "give a diff made against that commit, or build the commit it was made against with --ref"
        )
    git(["git", "-C", str(dest), "apply", patch.path], log)


def _span(names: list[str]) -> str:
    branches = [n for n in names if n.startswith("r")]
    others = [n for n in names if not n.startswith("r")]
    parts = [f"{branches[0]} to {branches[-1]}" if len(branches) > 2 else ", ".join(branches)] if branches else []
    return ", ".join(parts + others) or "none"


def git(args: list[str], log) -> str:
    log("$ " + " ".join(args))
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=False)
    if proc.stdout.strip():
        log(proc.stdout.rstrip())
    if proc.stderr.strip():
        log(proc.stderr.rstrip())
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["git failed"])[-1]
        raise RigError(f"{' '.join(args[:3])} ... failed ({last})")
    return proc.stdout

#!/usr/bin/env python3
"""Runs pip's resolver, as a dry run, on every documented install of the rig (docs/guide/runtimes.md,
"One install per place"): the host's, the device image's, the official engine's and the NGC images'
of the nightly's pair, each under the Python it runs on. One line each: ``resolves`` (with the
versions that matter), ``conflict`` (with pip's reason) or ``skipped`` (with why). Exit 1 on a
conflict or a broken check, 0 otherwise: an unreachable PyPI, or no CPython 3.12 here, skips (.ci/run
must not fail for the network), a conflict never does, so that it fails CI rather than the night.

    .venv/bin/python .ci/resolve-installs.py [--only TEXT] [--jobs N]

Stdlib only (the version table, rig/contract/ngc.py, is too). Each dry run resolves a copy of the
project's sources in a temporary folder: pip builds the metadata in the tree it is given, and two
runs at once, or a run beside someone's `pip install -e .`, must not share one.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from rig.contract import ngc  # noqa: E402  (after the path: the script runs from a checkout)

# The PyPI `tritonserver` bindings (measured: `pip download tritonserver==0` lists 2.70.0 to 2.73.0).
PYPI_BINDINGS = ("2.70.0", "2.71.0", "2.72.0", "2.73.0")
# What an NGC image's own bindings declare, where PyPI has no wheel of their version: core's
# python/ pyproject.toml says `dependencies = ["numpy<2"]` on every release branch from r25.01 to
# r26.06 and on main (read from ../shared/triton-src/core.bundle); r24.10's setup.py says the same.
NGC_BINDINGS_REQUIRE = ("numpy<2",)
# What the NGC images hold before the rig: server's build.py (r26.03, r26.06) installs `numpy<2`
# for the Python backend, then the image's tritonserver wheel (which pins it too).
NGC_IMAGE_CONSTRAINTS = ("numpy<2",)
# The device machines' image (.library/device/KINDS.md, its pip list): Python 3.12.3 with these.
DEVICE_IMAGE_CONSTRAINTS = ("numpy==2.5.2", "cupy-cuda13x==14.2.0")
# A CUDA 12 row of the table, beside the pair (CUDA 13): the newest CUDA 12 image.
CUDA12_TAG = "25.07"

# Where a pair imports badly although pip installs it, because one of them declares no bound
# (pyarrow declares no numpy dependency at all): measured here, pyarrow 26.0.1 over numpy 1.26.4
# fails its import ("pyarrow requires NumPy 2.0 or newer, found 1.26.4"), 25.0.1 imports and works.
RUNTIME_CONFLICTS = (("pyarrow", 26, "numpy", 2, "pyarrow 26 imports only over numpy 2 (ImportError): pin pyarrow<26"),)
# The packages whose versions each line reports: what decides whether the GPU path works.
REPORTED = re.compile(r"^(numpy|cupy-cuda\d+x|pyarrow|pandas|tritonserver)$")
# pip's words for a network failure, as opposed to a conflict.
NETWORK = re.compile(
    r"NewConnectionError|Max retries exceeded|ConnectTimeout|ReadTimeout|Temporary failure in name "
    r"resolution|Name or service not known|Network is unreachable|Could not fetch URL|SSLError|"
    r"ConnectionResetError|ProxyError|HTTP error 5\d\d"
)
# PyPI's manylinux tags pip matches for Ubuntu 24.04 (glibc 2.39): pip takes each --platform
# literally, so every older glibc's tag is named too.
UBUNTU_2404_PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]


@dataclasses.dataclass(frozen=True)
class Combo:
    """One documented install: where it runs, under which Python, what `pip install` is given."""

    place: str
    python: str  # "host" (the interpreter that runs this script) or "3.12" (with Ubuntu 24.04's glibc)
    args: tuple[str, ...]  # after `pip install`, as the docs give it ("." is the checkout)
    # What the place holds already: pins of what is installed (constraints), and installed
    # distributions whose own requirements must hold too (requirements added to the resolution).
    constraints: tuple[str, ...] = ()
    holds: tuple[str, ...] = ()
    stand_in: tuple[str, tuple[str, ...]] | None = None  # bindings not on PyPI: (version, Requires-Dist)
    expect: tuple[tuple[str, str], ...] = ()  # (package, version prefix) the resolution must pick

    @property
    def command(self) -> str:
        """The documented command, as a user types it."""
        quoted = [f"'{a}'" if "[" in a or "<" in a or ">" in a else a for a in self.args]
        return f"pip install {' '.join(quoted)}"

    @property
    def over(self) -> str:
        """What the place holds already, that the command runs over ("" where nothing counts)."""
        held = [*self.holds, *self.constraints]
        if self.stand_in:
            held = [
                f"{h} (declaring {', '.join(self.stand_in[1])})" if h.startswith("tritonserver==") else h for h in held
            ]
        return ", ".join(held)


def ngc_combo(tag: str) -> Combo:
    """An NGC image of the table: its own bindings and numpy, then what the Dockerfile installs."""
    row = ngc.by_tag(tag)
    bindings = row.triton_version
    stand_in = None if bindings in PYPI_BINDINGS else (bindings, NGC_BINDINGS_REQUIRE)
    major = row.cuda_major
    return Combo(
        place=f"NGC {tag} (Triton {bindings}, CUDA {major}, Python {row.python})",
        python=row.python,
        args=(".[ngc]", row.cupy),
        constraints=NGC_IMAGE_CONSTRAINTS,
        holds=(f"tritonserver=={bindings}",),
        stand_in=stand_in,
        expect=(("numpy", "1."), (row.cupy, "13.")),
    )


def combos() -> list[Combo]:
    """Every documented install, in the order of the docs' table."""
    return [
        Combo("host: the quick start", "host", ("-e", ".")),
        Combo("host: tests and docs (.ci/run)", "host", ("-e", ".[test,docs]")),
        Combo(
            "device image (numpy 2, CuPy 14)",
            "3.12",
            (".[gpu-cuda13]",),
            constraints=DEVICE_IMAGE_CONSTRAINTS,
            expect=(("numpy", "2."), ("cupy-cuda13x", "14.")),
        ),
        Combo("CUDA 12 machine, numpy 2", "3.12", (".[gpu-cuda12]",), expect=(("cupy-cuda12x", "14."),)),
        Combo("official engine's sandbox", "3.12", (".[official,test]",), expect=(("numpy", "1."),)),
        Combo(
            "official engine with CuPy (CUDA 13)",
            "3.12",
            (".[official,gpu-cuda13]",),
            expect=(("numpy", "1."), ("cupy-cuda13x", "13.")),
        ),
        ngc_combo(ngc.BASELINE_TAG),
        ngc_combo(ngc.CANDIDATE_TAG),
        ngc_combo(CUDA12_TAG),
    ]


@dataclasses.dataclass
class Result:
    combo: Combo
    status: str  # resolves, conflict, skipped, error
    detail: str

    def line(self) -> str:
        over = f" over {self.combo.over}" if self.combo.over else ""
        return f"{self.status:<9} {self.combo.place}: {self.combo.command}{over} -> {self.detail}"


def python312() -> str | None:
    """A CPython 3.12 to resolve under: $RIG_SANDBOX_PYTHON (as .ci/run), pyenv's, or python3.12."""
    found = [os.environ.get("RIG_SANDBOX_PYTHON", "")]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")), reverse=True)
    found.append(shutil.which("python3.12") or "")
    return next((p for p in found if p and os.access(p, os.X_OK)), None)


def pip_config(key: str) -> str | None:
    """A value of pip's own configuration (a mirror in pip.conf, say), or None."""
    p = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", key], check=False, capture_output=True, text=True, timeout=60
    )
    return p.stdout.strip() or None if p.returncode == 0 else None


def index_unreachable(timeout: float = 15) -> str | None:
    """Why the package index cannot be reached, or None where it answers."""
    index = os.environ.get("PIP_INDEX_URL") or pip_config("global.index-url") or "https://pypi.org/simple"
    index = index.rstrip("/")
    try:
        with urllib.request.urlopen(f"{index}/pip/", timeout=timeout) as r:
            r.read(1)
    except (OSError, urllib.error.URLError) as e:
        return f"{index} does not answer ({getattr(e, 'reason', e)})"
    return None


def stand_in_wheel(folder: Path, version: str, requires: tuple[str, ...]) -> Path:
    """A wheel of `tritonserver` that carries only an image's bindings' metadata: pip resolves
    against what they declare, as it would against the installed bindings."""
    name = f"tritonserver-{version}"
    path = folder / f"{name}-py3-none-any.whl"
    meta = "".join(
        ["Metadata-Version: 2.1\n", "Name: tritonserver\n", f"Version: {version}\n"]
        + [f"Requires-Dist: {r}\n" for r in requires]
    )
    files = {
        f"{name}.dist-info/METADATA": meta,
        f"{name}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: resolve-installs\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{f},,\n" for f in files) + f"{name}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for f, text in {**files, f"{name}.dist-info/RECORD": record}.items():
            z.writestr(f, text)
    return path


def copy_project(dest: Path) -> Path:
    """The files `pip install .` reads, copied (see the module's docstring for why)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("rig", "models", "workloads"):
        shutil.copytree(ROOT / name, dest / name, symlinks=True, ignore=ignore)
    return dest


def conflict_reason(output: str) -> str:
    """pip's own words for why it could not resolve, in one line."""
    lines = output.splitlines()
    if "The conflict is caused by:" in output:
        start = lines.index("The conflict is caused by:") + 1
        cause = []
        for line in lines[start:]:
            if not line.strip() or line.startswith("To fix this"):
                break
            if line.strip() not in cause:
                cause.append(line.strip())
        return "; ".join(cause[:6]) + (f" (+{len(cause) - 6} more)" if len(cause) > 6 else "")
    errors = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR: ")]
    return "; ".join(errors[:3]) or (lines[-1] if lines else "pip said nothing")


def runtime_conflicts(versions: dict[str, str]) -> list[str]:
    """The pairs RUNTIME_CONFLICTS names that a resolution chose together."""

    def major(v: str) -> int:
        return int(re.match(r"\d+", v).group(0)) if re.match(r"\d+", v) else 0

    out = []
    for pkg, at_least, other, below, why in RUNTIME_CONFLICTS:
        if (
            pkg in versions
            and other in versions
            and major(versions[pkg]) >= at_least > 0
            and major(versions[other]) < below
        ):
            out.append(f"{pkg} {versions[pkg]} with {other} {versions[other]}: {why}")
    return out


def judge(combo: Combo, rc: int, output: str, report: dict | None) -> Result:
    """What one dry run says: resolves (and the versions that matter), conflict (and why), skipped."""
    output = "\n".join(line for line in output.splitlines() if not line.startswith("WARNING: Location"))
    if rc != 0:
        if NETWORK.search(output) and "ResolutionImpossible" not in output:
            return Result(combo, "skipped", f"the index did not answer ({NETWORK.search(output).group(0)})")
        if "ResolutionImpossible" in output or "No matching distribution" in output:
            return Result(combo, "conflict", conflict_reason(output))
        return Result(combo, "error", f"pip exited {rc}: {conflict_reason(output)}")
    missing = re.findall(r"does not provide the extra '([^']+)'", output)
    if missing:
        return Result(combo, "conflict", f"pyproject.toml has no extra {', '.join(sorted(set(missing)))}")
    versions = {
        i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
        for i in (report or {}).get("install", [])
    }
    problems = runtime_conflicts(versions)
    problems += [
        f"{pkg} {versions.get(pkg, 'not installed')}, not {prefix}*"
        for pkg, prefix in combo.expect
        if not versions.get(pkg, "").startswith(prefix)
    ]
    if problems:
        return Result(combo, "conflict", "; ".join(problems))
    chosen = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if REPORTED.match(k))
    return Result(combo, "resolves", chosen or "nothing to install")


def pip_argv(combo: Combo, python: str, work: Path) -> list[str]:
    """The dry run of one combination, in `work` (a copy of the project, the report, the pins)."""
    argv = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", str(work / "report.json")]
    argv += ["--disable-pip-version-check", "--retries", "2", "--timeout", "60"]
    if combo.python != "host":
        # the image's Python and glibc, not this machine's: only wheels, as that platform takes them
        argv += ["--target", str(work / "target"), "--only-binary=:all:", "--python-version", combo.python]
        argv += ["--implementation", "cp"] + [a for p in UBUNTU_2404_PLATFORMS for a in ("--platform", p)]
    if combo.constraints:
        (work / "constraints.txt").write_text("\n".join(combo.constraints) + "\n")
        argv += ["--constraint", str(work / "constraints.txt")]
    if combo.stand_in:
        wheels = work / "stand-in"
        wheels.mkdir()
        stand_in_wheel(wheels, *combo.stand_in)
        argv += ["--find-links", str(wheels)]
    project = work / "project"
    for a in (*combo.args, *combo.holds):
        argv.append(str(project) + a[1:] if a.startswith(".") else a)
    return argv


def check(combo: Combo, python: str | None, timeout: float = 900) -> Result:
    """Resolve one combination; a missing interpreter or a silent index skips it."""
    if python is None:
        return Result(combo, "skipped", "no CPython 3.12 here (set RIG_SANDBOX_PYTHON to one)")
    with tempfile.TemporaryDirectory(prefix="resolve-installs-") as tmp:
        work = Path(tmp)
        (work / "project").mkdir()
        copy_project(work / "project")
        argv = pip_argv(combo, python, work)
        try:
            p = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            return Result(combo, "skipped", f"pip did not finish in {timeout:.0f} s (a slow index?)")
        report = json.loads((work / "report.json").read_text()) if (work / "report.json").exists() else None
        return judge(combo, p.returncode, p.stdout + p.stderr, report)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="the combinations whose place contains this text")
    ap.add_argument("--jobs", type=int, default=2, help="dry runs at once (mostly waiting on the network)")
    args = ap.parse_args(argv)
    chosen = [c for c in combos() if not args.only or args.only.lower() in c.place.lower()]
    unreachable = index_unreachable()
    if unreachable:
        for c in chosen:
            print(Result(c, "skipped", f"PyPI unreachable: {unreachable}").line(), flush=True)
        return 0
    py312 = python312()
    interpreters = {"host": sys.executable, "3.12": py312}
    host = f"Python {sys.version.split()[0]}"
    print(f"pip's resolver, dry runs: host {host} ({sys.executable}); 3.12: {py312 or 'none'}", flush=True)
    bad = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(check, c, interpreters.get(c.python)) for c in chosen]
        for f in futures:  # in the docs' order, each as soon as it and those before it are done
            result = f.result()
            print(result.line(), flush=True)
            bad += result.status in ("conflict", "error")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

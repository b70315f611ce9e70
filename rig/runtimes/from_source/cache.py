"""Built runtimes on disk: where they live, their manifests, which are complete for which Python,
and how each was built, in one line (``rig runtime list``, ``rig doctor``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rig.common.errors import RigError
from rig.common.probes import STUB_NAME

# Bump when the recipe changes what a build produces: a runtime built by an older recipe is rebuilt.
RECIPE = 1

STEPS = (
    "sources",
    "configure core",
    "build core",
    "configure python backend",
    "build python backend",
    "python bindings",
    "assemble and check",
)


def python_tag(python: str | None = None) -> str:
    if python is None or os.path.realpath(python) == os.path.realpath(sys.executable):
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    proc = subprocess.run(
        [python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RigError(f"--python {python}: not a Python interpreter that runs here; give the path of one")
    return proc.stdout.strip()


def runtimes_dir() -> Path:
    from rig.contract.runtime import cache_dir

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
    return (
        m.get("recipe") == RECIPE
        and py in m.get("pythons", {})
        and (root / f"py{py}" / "backends" / "python" / STUB_NAME).exists()
        and (root / "lib" / "libtritonserver.so").exists()
    )


def list_built() -> list[dict]:
    out = []
    base = runtimes_dir()
    if not base.is_dir():
        return out
    for root in sorted(base.glob("built-*")):
        m = manifest(root)
        if not m:
            continue
        out.append(
            {
                "name": root.name,
                "triton_version": m.get("triton_version"),
                "branch": m.get("branch"),
                "pythons": sorted(m.get("pythons", {})),
                "path": str(root),
                "manifest": m,
                "current": m.get("recipe") == RECIPE,
            }
        )
    return out


def describe(b: dict) -> str:
    """How a built runtime was built, in one line (rig runtime list, rig doctor)."""
    m = b["manifest"]
    refs = ", ".join(f"{k} {v}@{m.get('commits', {}).get(k, '?')[:8]}" for k, v in m.get("refs", {}).items())
    stale = "" if b["current"] else "; built by an older recipe: rebuild with --force"
    stale += "".join(f"; NOTE {n}" for n in m.get("adaptations", []) if "not exactly" in n)
    return (
        f"from {m.get('sources', '?')} ({refs}); {m.get('compiler', '?')}; "
        f"{m.get('build_seconds', 0) / 60:.1f} min{' (resumed)' if m.get('resumed') else ''} "
        f"on {m.get('cpus', '?')} CPUs, {m.get('size_mb', 0):.0f} MB; "
        f"CPU only, {len(m.get('differs_from_ngc', []))} differences from the NGC image in "
        f"{b['path']}/runtime.json{stale}"
    )

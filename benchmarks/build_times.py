"""How long each `rig runtime build` took and how much disk it used, read from the manifests of the
runtimes built here (``runtime.json``), as a Markdown table.

    for v in 2.51.0 2.55.0 2.60.0 2.67.0 2.70.0 2.71.0; do rig runtime build $v --sources DIR; done
    python benchmarks/build_times.py

Times are the build's own (wall, per step); a runtime whose core was reused from an earlier build
(``--python``) shows the earlier build's core steps. Disk: the peak work tree (sources and both
build trees, removed after a build) and the runtime kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rig.runtimes.from_source.cache import list_built  # noqa: E402


def key(v: str):
    return tuple(int(x) for x in v.split("."))


def _cache(m: dict) -> str:
    """The compiles ccache served of this build's (``compiler_cache`` in the manifest): ``68 of 114``;
    ``-`` where the build ran without it."""
    c = m.get("compiler_cache") or {}
    hits, misses = c.get("hits"), c.get("misses")
    return "-" if hits is None or misses is None else f"{hits} of {hits + misses}"


def main() -> int:
    rows = sorted(list_built(), key=lambda b: key(b["triton_version"]))
    if not rows:
        print("no runtime built here: rig runtime build VERSION", file=sys.stderr)
        return 2
    steps = ["sources", "configure core", "build core", "configure python backend", "build python backend",
             "assemble and check"]
    print("| Triton | branch | " + " | ".join(steps) + " | whole build | compiles from the cache | work tree | kept | CPUs |")
    print("| --- | --- | " + " | ".join("---" for _ in steps) + " | --- | --- | --- | --- | --- |")
    for b in rows:
        m = b["manifest"]
        t = m.get("step_seconds", {})
        cells = [f"{t[s] / 60:.1f} min" if isinstance(t.get(s), (int, float)) and t[s] >= 60 else
                 f"{t[s]:.0f} s" if isinstance(t.get(s), (int, float)) else "-" for s in steps]
        print(f"| {m['triton_version']} | {m['branch']} | " + " | ".join(cells)
              + f" | {m['build_seconds'] / 60:.1f} min{' (resumed)' if m.get('resumed') else ''} | {_cache(m)} "
              f"| {m['work_mb']:.0f} MB | {m['size_mb']:.0f} MB | {m['cpus']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

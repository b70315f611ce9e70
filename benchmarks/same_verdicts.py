"""Do two runs of the conformance matrix give the same table? Cell for cell, the verdicts of every
cell the two stores share: a run with cells side by side (`rig matrix --jobs N`) against a
sequential one (`--jobs 1`) of a sample of its cells, or one shard's store against another.

    python benchmarks/same_verdicts.py PARALLEL_STORE SEQUENTIAL_STORE [--markdown]

A cell is (scenario, control, shape, Triton version, engine); its verdicts are the lifecycle,
load and growth verdicts its cycles gave, counted. Exit 0 where every shared cell gives the same,
1 where one differs (each named), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

KEYS = ["scenario", "control", "shape", "triton_version", "engine"]


def cells(path: str) -> dict[tuple, Counter]:
    from rig.store import Store

    f = Store(path).read("cycles")
    if f is None or not len(f) or "scenario" not in f:
        raise SystemExit(f"same_verdicts: {path} holds no scenario cycles")
    f = f[f["scenario"].notna()].copy()
    f["shape"] = f["shape"].fillna("unbatched") if "shape" in f else "unbatched"
    f["control"] = f["control"].fillna(False).astype(bool)
    out = {}
    for key, g in f.groupby(KEYS):
        out[key] = Counter(zip(g["outcome"], g["load_outcome"].fillna("-"), g["growth_outcome"].fillna("-")))
    return out


def text(c: Counter) -> str:
    return ", ".join(f"{' / '.join(v)} x{n}" for v, n in sorted(c.items()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--markdown", action="store_true", help="every shared cell as a Markdown table")
    args = p.parse_args(argv)
    a, b = cells(args.a), cells(args.b)
    shared = sorted(set(a) & set(b), key=str)
    if not shared:
        print("same_verdicts: the two stores share no cell", file=sys.stderr)
        return 2
    differ = [k for k in shared if a[k] != b[k]]
    if args.markdown:
        print(f"| scenario | shape | Triton | engine | {args.a} | {args.b} | same |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for k in shared:
            name = k[0] + (" (control)" if k[1] else "")
            print(f"| {name} | {k[2]} | {k[3]} | {k[4]} | {text(a[k])} | {text(b[k])} | "
                  f"{'yes' if k not in differ else '**no**'} |")
    for k in differ:
        print(f"differs: {k[0]}{' (control)' if k[1] else ''} [{k[2]}] Triton {k[3]} {k[4]}: {text(a[k])} against "
              f"{text(b[k])}")
    print(f"{len(shared)} shared cell(s), {len(shared) - len(differ)} with the same verdicts, {len(differ)} not "
          f"({len(set(a) - set(b))} only in the first, {len(set(b) - set(a))} only in the second)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

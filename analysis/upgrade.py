"""The cells whose verdicts differ between two Triton versions, in pandas alone.
`python analysis/upgrade.py [STORE] --from 2.60.0 --to 2.67.0`. The rig's own answer, with where
each cell changed in between and its evidence: `rig report --conformance STORE --from A --to B`."""

# %%
import argparse

from rig import Store

parser = argparse.ArgumentParser()
parser.add_argument("store", nargs="?", default="docs/conformance/store")
parser.add_argument("--from", dest="old", default="2.60.0")
parser.add_argument("--to", dest="new", default="2.67.0")
args, _ = parser.parse_known_args()

# %% A cell is a scenario (or its control) in a shape through an API; its verdict is what most of
# its cycles gave (lifecycle / load)
cell = ["scenario", "control", "shape", "engine"]
cycles = Store(args.store).read(
    "cycles", columns=[*cell, "triton_version", "outcome", "load_outcome"],
    triton_version=[args.old, args.new],  # partitions: only these versions' files are opened
)
cycles["shape"] = cycles["shape"].fillna("unbatched")
cycles["verdict"] = cycles["outcome"] + " / " + cycles["load_outcome"].fillna("-")
verdicts = (
    cycles.groupby([*cell, "triton_version"])["verdict"]
    .agg(lambda s: s.value_counts().index[0])
    .unstack("triton_version")
)
missing = [v for v in (args.old, args.new) if v not in verdicts.columns]
if missing:
    raise SystemExit(f"no cycles of {', '.join(missing)} in {args.store}")

# %% The cells run on both, and the ones that differ
both = verdicts.dropna(subset=[args.old, args.new])
changed = both[both[args.old] != both[args.new]]
print(f"{args.old} -> {args.new}: {len(both)} cells run on both, {len(changed)} differ")
print(changed[[args.old, args.new]].to_string())

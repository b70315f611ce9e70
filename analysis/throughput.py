"""Throughput and p99 per Triton version and API, from the measurement windows, and a plot.
`python analysis/throughput.py [STORE] [--scenario NAME [--control]] [--out FILE.png]`."""

# %%
import argparse

import matplotlib

matplotlib.use("Agg")  # a file, not a window (in a notebook, drop this line)
import matplotlib.pyplot as plt

from rig import Store

parser = argparse.ArgumentParser()
parser.add_argument("store", nargs="?", default="docs/conformance/store")
parser.add_argument("--scenario", default="all", help="only the windows of this scenario's cycles")
parser.add_argument("--control", action="store_true", help="of its negative control's cycles instead")
parser.add_argument("--out", default="throughput.png")
args, _ = parser.parse_known_args()

# %% The windows (of one scenario's cycles: a window row carries its run and cycle, not the scenario)
store = Store(args.store)
windows = store.read("windows", columns=["run_id", "cycle", "triton_version", "engine", "throughput", "p99_us"])
if args.scenario != "all":
    cycles = store.read("cycles", columns=["run_id", "cycle", "scenario", "control"])
    keep = cycles[(cycles["scenario"] == args.scenario) & (cycles["control"].fillna(False).astype(bool) == args.control)]
    windows = windows.merge(keep[["run_id", "cycle"]], on=["run_id", "cycle"])
if windows.empty:
    raise SystemExit(f"no windows of {args.scenario} in {args.store}")

# %% Medians per version and API
table = windows.groupby(["triton_version", "engine"]).agg(
    windows=("throughput", "size"), throughput=("throughput", "median"), p99_us=("p99_us", "median")
)
# versions in numeric order; a variant (2.71.0-v086b04dea9: a patched build) right after its release
order = sorted(table.index.get_level_values(0).unique(), key=lambda v: [int(x) if x.isdigit() else x for x in v.replace("-", ".").split(".")])
table = table.reindex(order, level=0)
print(f"{args.scenario}: {len(windows)} windows in {args.store} (medians)")
print(table.to_string(float_format=lambda x: f"{x:.0f}"))

# %% The plot: throughput per version, one line per API
fig, ax = plt.subplots(figsize=(9, 3.5))
for engine, g in table.reset_index().groupby("engine"):
    ax.plot(g["triton_version"], g["throughput"], marker="o", label=engine)
ax.set_xlabel("Triton version")
ax.set_ylabel("infer/s (median window)")
ax.tick_params(axis="x", rotation=60)
ax.legend()
fig.tight_layout()
fig.savefig(args.out)
print(f"plot: {args.out}")

"""Per Triton version and API: what stop() did, whether every finalize() ran before it returned,
and how long it took. `python analysis/stop_and_finalize.py [STORE] [--scenario NAME]`."""

# %%
import argparse

import pandas as pd

from rig import Store

parser = argparse.ArgumentParser()
parser.add_argument("store", nargs="?", default="docs/conformance/store")
parser.add_argument("--scenario", default="retained-response", help="a scenario's name; 'all' for every cycle")
args, _ = parser.parse_known_args()  # parse_known_args: a notebook kernel passes its own

# %% One row per cycle; the scenario's own cycles (not its negative control)
columns = ["triton_version", "engine", "scenario", "control", "outcome", "stop_latency_s",
           "finalize_expected", "finalize_before_stop"]
cycles = Store(args.store).read("cycles", columns=columns)
if args.scenario != "all":
    cycles = cycles[(cycles["scenario"] == args.scenario) & ~cycles["control"].fillna(False).astype(bool)]
if cycles.empty:
    raise SystemExit(f"no cycles of {args.scenario} in {args.store}")

# %% Per version and API: the share of each lifecycle verdict, finalize before stop, the stop's median
cycles["finalized_before_stop"] = cycles["finalize_before_stop"] >= cycles["finalize_expected"]
table = cycles.groupby(["triton_version", "engine"]).agg(
    cycles=("outcome", "size"),
    clean=("outcome", lambda s: (s == "clean").mean()),
    exit_timeout=("outcome", lambda s: (s == "exit_timeout").mean()),
    aborted_at_exit=("outcome", lambda s: (s == "aborted_at_exit").mean()),
    finalized_before_stop=("finalized_before_stop", "mean"),
    stop_median_s=("stop_latency_s", "median"),
)
# versions in numeric order; a variant (2.71.0-v086b04dea9: a patched build) right after its release
order = sorted(table.index.get_level_values(0).unique(), key=lambda v: [int(x) if x.isdigit() else x for x in v.replace("-", ".").split(".")])
table = table.reindex(order, level=0)
pd.set_option("display.width", 160)
print(f"{args.scenario}: {len(cycles)} cycles in {args.store}")
print(table.to_string(float_format=lambda x: f"{x:.2f}"))

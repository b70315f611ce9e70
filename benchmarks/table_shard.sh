#!/usr/bin/env bash
# One shard of the whole conformance table on this one node, timed: the capi half (every core
# named), the official half on the host (the cores built here, each with the bindings built from its
# own sources: every monthly release 2.52.0 to 2.71.0) and the official half in the Debian 13
# sandbox (the wheels' cores), all three side by side as the table runs, into one store. Prints
# each half's wall time and the shard's; the cells' verdicts are in each half's log (the matrix's
# table) and the store.
#
#   bash benchmarks/table_shard.sh 0/4 results/T0            # shard 0 of the Indexed Job's 4
#   bash benchmarks/table_shard.sh 0/1 results/T             # the whole table (over 4 hours here)
#
# Environment: BUILT, CAPI, HOST_OFFICIAL, SANDBOX_OFFICIAL (comma-separated runtimes; defaults: the
# 34 cores of docs/conformance.md), LOGS (default: RESULTS/../table-K-of-N).
set -uo pipefail
shard="${1:?K/N}"; results="${2:?results folder, inside the repository (the sandbox sees only it)}"
cd "$(dirname "$0")/.."
rig="${RIG:-.venv/bin/rig}"
built="${BUILT:-2.52.0,2.53.0,2.54.0,2.55.0,2.56.0,2.57.0,2.58.0,2.59.0,2.59.1,2.60.0,2.61.0,2.62.0,2.63.0,2.64.0,2.65.0,2.66.0,2.67.0,2.68.0,2.69.0,2.70.0,2.71.0}"  # every monthly release from 2.52.0 (rig runtime build)
capi="${CAPI:-0.3.1,0.4.2,0.5.0,0.5.2,0.5.3,0.5.6,0.5.7,0.5.8,0.5.9,0.5.10,0.5.11,0.5.12,0.7.0,$built}"
host_official="${HOST_OFFICIAL:-$built}"   # a built core brings its own bindings
sandbox_official="${SANDBOX_OFFICIAL:-0.5.9,0.5.10,0.5.11,0.5.12,0.7.0}"   # the wheels' cores, under the PyPI bindings
logs="${LOGS:-$(dirname "$results")/table-${shard/\//-of-}}"
mkdir -p "$logs"
half() {  # name, command...: run one half, print its wall time and exit status
  local name="$1" start rc; shift
  start=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1; rc=$?
  echo "$name: $(( $(date +%s) - start )) s, exit $rc ($(head -1 "$logs/$name.log"))"
}
start=$(date +%s)
echo "shard $shard from $(date -u +%FT%TZ); logs in $logs"
half capi "$rig" matrix --scenarios all --runtimes "$capi" --engines capi --cycles 3 --shard "$shard" \
  --results "$results" &
half host-official "$rig" matrix --scenarios all --runtimes "$host_official" --engines tritonserver --cycles 3 \
  --jobs 3 --shard "$shard" --results "$results" &
half sandbox-official bash tests/sandbox/official.sh --run rig matrix --scenarios all --runtimes "$sandbox_official" \
  --engines tritonserver --cycles 3 --jobs 3 --shard "$shard" --results "$results" &
wait
echo "shard $shard: $(( $(date +%s) - start )) s on one node"

#!/usr/bin/env bash
# The growth verdict's positive and negative controls on every core and engine named: the template
# with leaks-memory (1 MiB kept per request), slows-down (each execute 100 us slower) and no
# fault, each with no workload (100 requests) and under 5 s of steady load at 2 users; 2 cycles
# each, into one store. Prints each cycle's line; read the store with pandas or `rig report`.
#
#   bash benchmarks/growth_controls.sh RESULTS "0.7.0 0.5.10" capi
#   bash tests/sandbox/official.sh --run bash benchmarks/growth_controls.sh RESULTS "0.7.0 0.5.10" tritonserver
set -uo pipefail
results="${1:?results folder}"; runtimes="${2:-0.7.0 0.5.10}"; engine="${3:-capi}"
for rt in $runtimes; do
  for f in leaks-memory slows-down none; do
    rig soak --engine "$engine" --runtime "$rt" --cycles 2 --fault "$f" --results "$results" \
      --allow-outcomes leaking,slowing | grep '^cycle'
    rig soak --engine "$engine" --runtime "$rt" --cycles 2 --fault "$f" --workload steady --workload-seconds 5 \
      --users 2 --results "$results" --allow-outcomes leaking,slowing | grep '^cycle'
  done
done

#!/usr/bin/env bash
# The GPU path in one short run: rig doctor, a 3-cycle soak and a 2-point bench of the CuPy model
# with the NVML probes, then the figures with the GPU's name (read back from the store).
#
#   benchmarks/gpu_check.sh [RESULTS_DIR]      # default results/gpu-check-<UTC time>
#
# Where there is no GPU it prints "SKIPPED: no GPU (why)" and exits 0. A GPU without a usable
# CuPy or NVML is a setup fault: it says what to install and exits 2. Otherwise the exit status
# is the soak's or the bench's, whichever failed (0 when both passed).
# GPU_CHECK_MODEL=numpy runs the same steps on the numpy model, without a GPU (a dry run of the
# script itself; its figures say nothing about a GPU). GPU_CHECK_QUICK=1 shortens both steps
# (one cycle, 1 s of load; one bench point, two 0.5 s windows): for the script's own test.
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then
  py="$PYTHON"
elif [ -x .venv/bin/python ]; then
  py=.venv/bin/python
else
  py=python3
fi
model="${GPU_CHECK_MODEL:-cupy}"
out="${1:-results/gpu-check-$(date -u +%Y%m%dT%H%M%S)}"

# The GPU's name from NVML (the rig's probe), else from nvidia-smi; CuPy's verdict as the rig gives it.
probe=$("$py" - <<'EOF'
import shutil, subprocess
from rig.parent.preflight import cupy_usable
from rig.common.probes import Gpu

gpu = Gpu()
name, why = (gpu.name, "") if gpu.available else ("", gpu.why)
if not name and shutil.which("nvidia-smi"):
    r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                       capture_output=True, text=True)
    smi = r.stdout.strip().splitlines()
    if r.returncode == 0 and smi:
        name = smi[0].strip()
    else:
        why += f"; nvidia-smi: {(r.stderr or r.stdout).strip() or 'exit ' + str(r.returncode)}"
elif not name:
    why += "; nvidia-smi: not found"
ok, cupy_why = cupy_usable()
print(name)
print(why)
print("nvml" if gpu.available else "no-nvml")
print("ok" if ok else cupy_why)
EOF
)
{ read -r gpu_name; read -r gpu_why; read -r nvml; read -r cupy; } <<<"$probe"

if [ "$model" = cupy ]; then
  if [ -z "$gpu_name" ]; then
    echo "SKIPPED: no GPU ($gpu_why)"
    exit 0
  fi
  if [ "$nvml" != nvml ] || [ "$cupy" != ok ]; then
    echo "GPU $gpu_name is here, but the GPU path cannot run:" \
         "NVML ${nvml/no-nvml/missing ($gpu_why)}, CuPy ${cupy}." \
         "Install the GPU extra: pip install -e '.[gpu]' (cupy-cuda13x instead of cupy-cuda12x for CUDA 13)" >&2
    exit 2
  fi
  echo "GPU: $gpu_name"
else
  echo "dry run on the $model model (GPU: ${gpu_name:-none})"
fi

mkdir -p "$out"
"$py" -m rig doctor | tee "$out/doctor.txt"

soak_args=(--cycles 3 --workload-seconds 5)
bench_args=(--concurrency 1,4 --windows 3)
if [ "${GPU_CHECK_QUICK:-0}" = 1 ]; then
  soak_args=(--cycles 1 --workload-seconds 1)
  bench_args=(--concurrency 1 --windows 2 --window-seconds 0.5)
fi
soak=0
"$py" -m rig soak --model "$model" "${soak_args[@]}" --workload steady --results "$out" || soak=$?
bench=0
"$py" -m rig bench --model "$model" "${bench_args[@]}" --repeats 1 --results "$out" || bench=$?

"$py" - "$out" "${gpu_name:-none}" "$model" <<'EOF'
import sys

import pandas as pd

from rig.analysis import frames
from rig.store import Store

out, gpu_name, model = sys.argv[1:4]
store = Store(out)
runs = store.read("runs")
cycles = store.read("cycles")
windows = store.read("windows")


def mib(v) -> str:
    return "-" if pd.isna(v) else f"{v / 2**20:,.0f} MiB"


def pct(v) -> str:
    return "-" if pd.isna(v) else f"{v:.0f} %"


stored = runs["gpu"].dropna().unique()
print(f"\n## GPU check: {model} model on {gpu_name} (runs record GPU: {', '.join(stored) or 'none'}), "
      f"Triton {', '.join(runs['triton_version'].astype(str).unique())}")
soak = cycles[cycles["run_id"].isin(runs.loc[runs["command"].str.contains("soak"), "run_id"])]
if len(soak):
    done, expected = frames.finalize_counts(soak)
    print(f"soak: {len(soak)} cycles, outcomes {soak['outcome'].value_counts().to_dict()}; "
          f"stop latency median {soak['stop_latency_s'].median():.3f} s (max {soak['stop_latency_s'].max():.3f}); "
          f"finalize {done}/{expected} before stop; throughput median {soak['throughput'].median():,.0f} infer/s; "
          f"GPU memory max {mib(soak['gpu_memory_bytes'].max())}")
bench_runs = runs.loc[runs["command"].str.contains("bench"), "run_id"]
perf = frames.performance(windows[windows["run_id"].isin(bench_runs)])
for _, row in perf.iterrows():
    w = windows[(windows["run_id"].isin(bench_runs)) & (windows["concurrency"] == row["concurrency"])]
    print(f"bench {row['point']}: {row['throughput']:,.0f} infer/s, p50 {row['p50_us']:,.0f} us, "
          f"p99 {row['p99_us']:,.0f} us, GPU memory max {mib(w['gpu_memory_bytes'].max())}, "
          f"GPU utilisation max {pct(w['gpu_utilization'].max())}")
if not len(soak) and perf.empty:
    sys.exit("nothing was stored: see the soak's and the bench's output above")
EOF

echo "results: $out (soak exit $soak, bench exit $bench)"
[ "$soak" = 0 ] || exit "$soak"
exit "$bench"

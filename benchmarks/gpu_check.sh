#!/usr/bin/env bash
# The GPU path in one short run: a self-test of each boundary the GPU path crosses, rig doctor, a
# 3-cycle soak and a 2-point bench of the CuPy model with the NVML probes, then the figures with the
# GPU's name (read back from the store).
#
#   benchmarks/gpu_check.sh [RESULTS_DIR]      # default results/gpu-check-<UTC time>
#   benchmarks/gpu_check.sh --kit ARCHIVE [RESULTS_DIR]   # offline, from benchmarks/gpu_kit.sh's archive
#
# The first step, in both forms, is benchmarks/gpu_selftest.py: one line per check, before any soak
# (CuPy's version and each DLPack export's capsule; a kernel compiled and a matmul run; a buffer
# over CUDA IPC to a second process and back; NVML's device order against CUDA's), written to
# RESULTS_DIR/selftest.tsv. Without a GPU or CuPy each line says "skipped: <why>". A failed check
# makes the exit status 1 at the end; the steps after it still run, so one call says everything.
#
# Where there is no GPU it prints "SKIPPED: no GPU (why)" and exits 0. A GPU without a usable
# CuPy or NVML is a setup fault: it says what to install and exits 2. Otherwise the exit status
# is the soak's or the bench's, whichever failed, else 1 where a self-test check failed (0 when all passed).
# GPU_CHECK_MODEL=numpy runs the same steps on the numpy model, without a GPU (a dry run of the
# script itself; its figures say nothing about a GPU). GPU_CHECK_QUICK=1 shortens both steps
# (one cycle, 1 s of load; one bench point, two 0.5 s windows): for the script's own test.
#
# --kit ARCHIVE: on a machine that reaches no package registry (docs/measurements/gpu.md). The
# archive is unpacked into a new temporary folder; a virtual environment is made there over the
# current Python's packages (the active venv's, or $PYTHON's: numpy 2, pandas, pyarrow, psutil,
# rich, scipy, matplotlib, nvidia-ml-py, cupy), the kit's wheels and the kit's rig are installed
# into it with pip --no-index (the current Python is left as it was), and RIG_HOME points at the
# kit's trimmed Triton and its stubs' numpy<2. Then, from the unpacked rig: rig doctor; a 3-cycle
# soak with inputs in CPU memory, then in GPU memory; the seed's case (--scenario retained-response,
# exit_timeout or clean allowed); a bench at concurrency 1 and 4 of the model and of numpy; NVML's
# figures per process and per device. A step that cannot apply (no GPU, the numpy model for GPU
# memory) is skipped with its reason; the exit status is 1 when a step or a self-test check failed.
# The figures, the self-test's lines first, go to RESULTS_DIR/gpu.md (default ./gpu-check-<UTC time>)
# in docs/measurements/gpu.md's form.
# GPU_CHECK_KEEP=1 keeps the temporary folder.
set -euo pipefail

kit=0
if [ "${1:-}" = --kit ]; then
  kit=1
  archive="${2:?usage: benchmarks/gpu_check.sh --kit ARCHIVE [RESULTS_DIR]}"
  archive="$(cd "$(dirname "$archive")" && pwd)/$(basename "$archive")"
  out="${3:-gpu-check-$(date -u +%Y%m%dT%H%M%S)}"
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  base="${PYTHON:-python3}"
  t_setup=$SECONDS
  work=$(mktemp -d -t rig-gpu-check.XXXXXX)
  if [ "${GPU_CHECK_KEEP:-0}" = 1 ]; then
    echo "keeping $work"
  else
    trap 'rm -rf "$work"' EXIT
  fi
  echo "== unpacking $archive into $work"
  "$base" - "$archive" "$work" <<'EOF'
import sys
import tarfile

with tarfile.open(sys.argv[1]) as tf:
    tf.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
EOF
  kitdir=$(echo "$work"/rig-gpu-kit-*)
  [ -d "$kitdir/rig" ] || { echo "$archive is not a kit of benchmarks/gpu_kit.sh (no rig-gpu-kit-*/rig)" >&2; exit 2; }
  head -3 "$kitdir/KIT.txt"
  # A venv of the kit's own over the current Python's packages (a .pth adds its site folders, after
  # the venv's own), so pip sees numpy & co. as installed and the current Python stays untouched.
  "$base" -m venv --without-pip "$work/venv"
  vpy="$work/venv/bin/python"
  "$base" - "$vpy" <<'EOF'
import os
import subprocess
import sys

sites = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
venv_site = subprocess.run([sys.argv[1], "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
with open(os.path.join(venv_site, "_rig_kit_base.pth"), "w") as f:
    f.write("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in sites) + "\n")
EOF
  "$vpy" -c "import pip" 2>/dev/null || "$vpy" -m ensurepip -q
  export PIP_NO_INDEX=1 PIP_FIND_LINKS="$kitdir/wheels" PIP_DISABLE_PIP_VERSION_CHECK=1
  echo "== installing the kit's wheels and rig (pip --no-index)"
  "$vpy" -m pip install -q --find-links "$kitdir/wheels" "$kitdir/rig"
  export RIG_HOME="$kitdir/rig-home" VIRTUAL_ENV="$work/venv" PATH="$work/venv/bin:$PATH"
  unset PYTHONHOME
  py="$vpy"
  cd "$kitdir/rig"
  echo "setup: $((SECONDS - t_setup)) s ($("$py" -c 'import sys; print(sys.version.split()[0])'), RIG_HOME=$RIG_HOME)"
else
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then
  py="$PYTHON"
elif [ -x .venv/bin/python ]; then
  py=.venv/bin/python
else
  py=python3
fi
out="${1:-results/gpu-check-$(date -u +%Y%m%dT%H%M%S)}"
fi
model="${GPU_CHECK_MODEL:-cupy}"

# The self-test, first: one line per boundary, before anything else runs on the GPU. It sets
# CUDA_DEVICE_ORDER in its own process only, as the rig does for its workers.
if [ "$kit" = 1 ]; then
  selftest_tsv="$out/selftest.tsv"
else
  selftest_tsv=$(mktemp -t rig-gpu-selftest.XXXXXX)
  trap 'rm -f "$selftest_tsv"' EXIT
fi
selftest=0
if [ -f benchmarks/gpu_selftest.py ]; then
  "$py" benchmarks/gpu_selftest.py --out "$selftest_tsv" || selftest=$?
else
  echo "self-test: failed: benchmarks/gpu_selftest.py is not in this tree (a kit made before it was committed?)"
  printf 'self-test\tfailed\tbenchmarks/gpu_selftest.py is not in this tree\n' > "$selftest_tsv"
  selftest=1
fi
[ "$selftest" = 0 ] || echo "FAIL: the self-test (exit $selftest): the steps still run; the exit status will be 1"

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

if [ "$kit" = 1 ]; then
  mkdir -p "$out/logs"
  printf 'step\tstatus\texit\tseconds\tresults\tcommand\tnote\n' > "$out/steps.tsv"
  failed=0
  record() {  # step status exit seconds results command note
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$out/steps.tsv"
  }
  skip() {  # step command reason
    echo "== $1: SKIPPED: $3"
    record "$1" skipped - - - "$2" "$3"
  }
  step() {  # step results-subfolder-or-- rig args...
    local name=$1 dir=$2 t0=$SECONDS rc=0
    shift 2
    local args=("$@")
    [ "$dir" = - ] || args+=(--results "$out/$dir")
    echo "== $name: rig ${args[*]}"
    "$py" -m rig "${args[@]}" 2>&1 | tee "$out/logs/$name.log" || rc=$?
    if [ "$rc" = 0 ]; then
      record "$name" passed 0 "$((SECONDS - t0))" "$dir" "rig $*" ""
    else
      failed=1
      record "$name" failed "$rc" "$((SECONDS - t0))" "$dir" "rig $*" "exit $rc"
      echo "FAIL: $name exited $rc"
    fi
  }
  t_steps=$SECONDS
  step doctor - doctor
  cp "$out/logs/doctor.log" "$out/doctor.txt"

  cycles=3 seconds=5 concurrency=1,4 windows=(--windows 3)
  if [ "${GPU_CHECK_QUICK:-0}" = 1 ]; then
    cycles=1 seconds=1 concurrency=1 windows=(--windows 2 --window-seconds 0.5)
  fi
  no_gpu=""
  if [ "$model" = cupy ]; then
    if [ -z "$gpu_name" ]; then
      no_gpu="no GPU ($gpu_why)"
    elif [ "$nvml" != nvml ] || [ "$cupy" != ok ]; then
      no_gpu="GPU $gpu_name, but NVML ${nvml/no-nvml/missing ($gpu_why)}, CuPy ${cupy}"
    fi
    echo "GPU: ${gpu_name:-none}${no_gpu:+ ($no_gpu)}"
  else
    echo "dry run on the $model model (GPU: ${gpu_name:-none}): every step on $model"
  fi
  memory_option=1
  "$py" -m rig soak --help | grep -q -- --input-memory || memory_option=0

  soak=(soak --model "$model" --cycles "$cycles" --workload steady --workload-seconds "$seconds")
  if [ -n "$no_gpu" ]; then
    skip soak-cpu-inputs "rig ${soak[*]} --input-memory cpu" "$no_gpu"
    skip soak-gpu-inputs "rig ${soak[*]} --input-memory gpu" "$no_gpu"
  elif [ "$memory_option" = 0 ]; then
    step soak-cpu-inputs soak-cpu "${soak[@]}"
    skip soak-gpu-inputs "rig ${soak[*]} --input-memory gpu" "this rig has no --input-memory (inputs in CPU memory only)"
  else
    step soak-cpu-inputs soak-cpu "${soak[@]}" --input-memory cpu
    if [ "$model" = numpy ]; then
      skip soak-gpu-inputs "rig ${soak[*]} --input-memory gpu" "the numpy model: inputs in GPU memory are the cupy model's (a dry run)"
    else
      step soak-gpu-inputs soak-gpu "${soak[@]}" --input-memory gpu
    fi
  fi

  # The seed's case (server#8755): the last response kept across stop(). exit_timeout is its known
  # verdict on 2.51.0 (rig scenarios); clean would be news, shown in the table, not a failure.
  seed=(soak --scenario retained-response --model "$model" --cycles "$cycles" --exit-timeout 3
        --allow-outcomes clean,exit_timeout)
  if [ -n "$no_gpu" ]; then
    skip retained-response "rig ${seed[*]}" "$no_gpu"
  else
    step retained-response retained-response "${seed[@]}"
  fi

  bench=(bench --concurrency "$concurrency" "${windows[@]}" --repeats 1)
  if [ "$model" != numpy ]; then
    if [ -n "$no_gpu" ]; then
      skip "bench-$model" "rig ${bench[*]} --model $model" "$no_gpu"
    else
      step "bench-$model" bench "${bench[@]}" --model "$model"
    fi
  fi
  step bench-numpy bench "${bench[@]}" --model numpy
  echo "steps: $((SECONDS - t_steps)) s"

  "$py" benchmarks/gpu_check_figures.py "$out" "${gpu_name:-none}" "$model" || failed=1
  [ "$selftest" = 0 ] || { failed=1; echo "FAIL: the self-test (exit $selftest): see its lines in $out/gpu.md"; }
  echo "results: $out (figures: $out/gpu.md; setup and steps $((SECONDS - t_setup)) s)"
  exit "$failed"
fi

if [ "$model" = cupy ]; then
  if [ -z "$gpu_name" ]; then
    echo "SKIPPED: no GPU ($gpu_why)"
    [ "$selftest" = 0 ] || exit 1
    exit 0
  fi
  if [ "$nvml" != nvml ] || [ "$cupy" != ok ]; then
    echo "GPU $gpu_name is here, but the GPU path cannot run:" \
         "NVML ${nvml/no-nvml/missing ($gpu_why)}, CuPy ${cupy}." \
         "Install the GPU extra: pip install -e '.[gpu-cuda13]' (CUDA 13; '.[gpu-cuda12]' for CUDA 12)" >&2
    exit 2
  fi
  echo "GPU: $gpu_name"
else
  echo "dry run on the $model model (GPU: ${gpu_name:-none})"
fi

mkdir -p "$out"
cp "$selftest_tsv" "$out/selftest.tsv"
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

echo "results: $out (self-test exit $selftest, soak exit $soak, bench exit $bench)"
[ "$soak" = 0 ] || exit "$soak"
[ "$bench" = 0 ] || exit "$bench"
[ "$selftest" = 0 ] || exit 1
exit 0

#!/usr/bin/env bash
# The kit that checks the GPU path on a machine with no package registry (issue 51, item 5): one
# archive with the rig, the wheels such a machine lacks, a trimmed embedded Triton and the numpy-1
# folder its Python 3.12 backend stub needs.
#
#   benchmarks/gpu_kit.sh OUT_DIR        # writes OUT_DIR/rig-gpu-kit-<short sha>.tar.xz (<= 60 MiB)
#
# Run it here (any Python 3.11+ with pip, on a machine that reaches PyPI); it fails loudly when the
# archive is over the limit. The other side:
#
#   benchmarks/gpu_check.sh --kit OUT_DIR/rig-gpu-kit-<sha>.tar.xz [RESULTS]
#
# under a Python 3.12 that already holds numpy 2, pandas, pyarrow, psutil, rich, scipy, matplotlib
# and nvidia-ml-py (KIT_PROVIDED below): their wheels, and their own dependencies', stay out of
# the kit; every other package the rig needs is in it as a cp312 manylinux x86-64 wheel.
# Parts:
#   rig/                       the working tree's tracked files (`git ls-files`)
#   wheels/                    what the target lacks (Locust, gevent, hdrhistogram, ...), plus
#                              setuptools and wheel to build the rig offline
#   rig-home/                  a RIG_HOME (rig.contract.runtime.cache_dir): runtimes/embedded-0.7.0
#                              with the core, its bundled libraries, the Python backend and the 3.12
#                              stub only; stub-site-py3.12 with numpy<2 (the stubs are built for numpy 1)
#   KIT.txt                    what made it: commit, whether the tree was dirty, date, parts' sizes
# KIT_PART_SIZES=1 also prints each part's packed size; KIT_LIMIT_MIB changes the limit (60).
set -euo pipefail

out_dir="${1:?usage: benchmarks/gpu_kit.sh OUT_DIR}"
limit_mib="${KIT_LIMIT_MIB:-60}"
pytriton="${KIT_PYTRITON:-0.7.0}"
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then
  py="$PYTHON"
elif [ -x .venv/bin/python ]; then
  py=.venv/bin/python
else
  py=python3
fi
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)

sha=$(git rev-parse --short HEAD)
name="rig-gpu-kit-$sha"
stage=$(mktemp -d -t rig-gpu-kit.XXXXXX)
trap 'rm -rf "$stage"' EXIT
kit="$stage/$name"
mkdir -p "$kit/rig" "$kit/wheels" "$kit/rig-home/runtimes"

echo "== the rig (tracked files of $(pwd), commit $sha)"
# Tracked files as they are in the working tree (a clean clone: the commit); a tracked file deleted
# here is left out.
git ls-files -z | "$py" -c '
import os, sys
for p in sys.stdin.buffer.read().split(b"\0"):
    if p and os.path.lexists(p):
        sys.stdout.buffer.write(p + b"\0")' \
  | tar --null --no-recursion -T - -cf - | tar -xf - -C "$kit/rig"
dirty=$(git status --porcelain --untracked-files=no | wc -l)

echo "== wheels for Python 3.12, manylinux x86-64"
"$py" - "$kit" "$pytriton" <<'EOF'
"""Resolve the rig's dependencies and the target's own packages for CPython 3.12 on manylinux
x86-64 (pip's dry run reads only metadata), then download the difference."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

kit = Path(sys.argv[1])
# What the GPU machine has (issue 51); their dependencies are read from the resolution below.
KIT_PROVIDED = ["numpy>=2", "pandas", "pyarrow", "psutil", "rich", "scipy", "matplotlib", "nvidia-ml-py"]
TARGET = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
          *[a for p in ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_24_x86_64",
                        "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64",
                        "manylinux_2_35_x86_64") for a in ("--platform", p)]]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def norm(n: str) -> str:
    return n.lower().replace("_", "-").replace(".", "-")


def resolve(reqs: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run([*PIP, "install", "-q", "--dry-run", "--ignore-installed", "--target", f"{tmp}/t",
                               "--report", str(report), *TARGET, *reqs], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"pip could not resolve {reqs} for cp312: {proc.stderr.strip()[-2000:]}")
        return {norm(i["metadata"]["name"]): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]}


project = tomllib.loads((kit / "rig" / "pyproject.toml").read_text())
deps = project["project"]["dependencies"]
build = project["build-system"]["requires"]
# the rig's numpy pin must be the target's (numpy 2): resolve with it, so every pin agrees with it
needed = resolve([*deps, "numpy>=2"])
provided = resolve(KIT_PROVIDED)
for n in needed.keys() & provided.keys():
    if needed[n] != provided[n]:
        print(f"note: the rig resolves {n} {needed[n]}, the target's set {provided[n]}: the target's is kept")
carry = {n: v for n, v in needed.items() if n not in provided}
carry.update(resolve(build))
wheels = kit / "wheels"
proc = subprocess.run([*PIP, "download", "-q", "--no-deps", "-d", str(wheels), *TARGET,
                       *[f"{n}=={v}" for n, v in sorted(carry.items())]], capture_output=True, text=True)
if proc.returncode != 0:
    sys.exit(f"pip download failed: {proc.stderr.strip()[-2000:]}")
print(f"carried ({len(carry)}): {', '.join(f'{n} {v}' for n, v in sorted(carry.items()))}")
print(f"left to the target ({len(provided)}): {', '.join(sorted(provided))}")

# numpy<2 for the Python 3.12 backend stub, installed (not as a wheel: xz packs it tighter), in
# the folder and with the marker rig.parent.runtime.stub_site looks for.
site = kit / "rig-home" / "stub-site-py3.12"
proc = subprocess.run([*PIP, "install", "-q", "--no-deps", "--target", str(site), *TARGET, "numpy<2"],
                      capture_output=True, text=True)
if proc.returncode != 0:
    sys.exit(f"pip could not install numpy<2 for cp312: {proc.stderr.strip()[-2000:]}")
for tests in sorted(site.rglob("tests"), reverse=True):
    if tests.is_dir():
        shutil.rmtree(tests)
shutil.rmtree(site / "bin", ignore_errors=True)
(site / ".complete").write_text("numpy<2\n")
EOF

echo "== the embedded Triton (nvidia-pytriton $pytriton), trimmed to the core, its libraries, the Python backend and the 3.12 stub"
dest="$kit/rig-home/runtimes/embedded-$pytriton"
"$py" - "$pytriton" "$dest" <<'EOF'
"""The runtime's files, from the rig's cache where `rig runtime install` put them, else from the
wheel (downloaded here into the stage). libpython3.13 serves the wheel's tritonserver binary only
(no NEEDED entry of the core, the backend or a stub names it): it stays out with the binary, the
other stubs and pytriton's own Python package."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

version, dest = sys.argv[1], Path(sys.argv[2])
KEEP = ("nvidia_pytriton.libs/", "pytriton/tritonserver/backends/", "pytriton/tritonserver/caches/",
        "pytriton/tritonserver/python_backend_stubs/3.12/")


def kept(rel: str) -> bool:
    return rel.startswith(KEEP) and not os.path.basename(rel).startswith("libpython3")


home = os.environ.get("RIG_HOME") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "triton-soak-rig")
cached = Path(home) / "runtimes" / f"embedded-{version}"
(dest / "wheel").mkdir(parents=True)
if (cached / "wheel").is_dir() and (cached / "runtime.json").exists():
    print(f"from the rig's cache: {cached}")
    shutil.copy2(cached / "runtime.json", dest)
    for f in sorted((cached / "wheel").rglob("*")):
        rel = f.relative_to(cached / "wheel").as_posix()
        if f.is_file() and kept(rel):
            (dest / "wheel" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / "wheel" / rel)
else:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"downloading nvidia-pytriton=={version} ...")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--disable-pip-version-check", "-d", tmp, f"nvidia-pytriton=={version}"], check=True)
        whl = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(whl) as zf:
            for info in zf.infolist():
                if kept(info.filename) and not info.is_dir():
                    out = zf.extract(info, dest / "wheel")
                    os.chmod(out, ((info.external_attr >> 16) & 0o777) or 0o644)
        # as `rig runtime install` records it (rig.parent.runtime.PYTRITON_CORE: 0.5.13 to 0.7.0 bundle 2.51.0)
        (dest / "runtime.json").write_text(json.dumps({
            "package": "nvidia-pytriton", "package_version": version,
            "triton_version": "2.51.0" if version in ("0.5.13", "0.5.14", "0.6.0", "0.7.0") else "unknown",
            "wheel": whl.name}))
stub = dest / "wheel" / "pytriton" / "tritonserver" / "python_backend_stubs" / "3.12" / "triton_python_backend_stub"
if not stub.exists():
    sys.exit(f"nvidia-pytriton {version} has no Python 3.12 backend stub")
stub.chmod(0o755)
EOF

mib() { du -sk "$1" | awk '{printf "%.1f MiB", $1 / 1024}'; }
{
  echo "rig GPU kit $name"
  echo "commit $(git rev-parse HEAD)$([ "$dirty" = 0 ] || echo " with $dirty tracked file(s) changed in the working tree")"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) by benchmarks/gpu_kit.sh"
  echo "for CPython 3.12 on manylinux x86-64 that holds numpy 2, pandas, pyarrow, psutil, rich, scipy, matplotlib, nvidia-ml-py"
  echo "unpacked sizes:"
  echo "  rig/                                   $(mib "$kit/rig")"
  echo "  wheels/                                $(mib "$kit/wheels") ($(ls "$kit/wheels" | wc -l) wheels)"
  echo "  rig-home/runtimes/embedded-$pytriton     $(mib "$dest")"
  echo "  rig-home/stub-site-py3.12 (numpy<2)    $(mib "$kit/rig-home/stub-site-py3.12")"
  echo "wheels:"
  ls "$kit/wheels" | sed 's/^/  /'
} > "$kit/KIT.txt"

echo "== packing (xz)"
archive="$out_dir/$name.tar.xz"
tar -C "$stage" -cf - "$name" | xz -T0 -6 > "$archive.tmp"
mv "$archive.tmp" "$archive"
size=$(stat -c %s "$archive")
cat "$kit/KIT.txt"
# each part packed alone as well (another xz pass over the same bytes: about a minute more)
[ "${KIT_PART_SIZES:-0}" = 1 ] && for part in rig wheels rig-home/runtimes rig-home/stub-site-py3.12; do
  printf '  packed %-28s %s\n' "$part/" \
    "$(tar -C "$kit" -cf - "$part" | xz -T0 -6 | wc -c | awk '{printf "%.1f MiB", $1 / 1048576}')"
done
echo "archive: $archive ($(awk -v s="$size" 'BEGIN {printf "%.1f MiB", s / 1048576}'), limit $limit_mib MiB)"
if [ "$size" -gt $((limit_mib * 1024 * 1024)) ]; then
  echo "FAIL: the kit is over $limit_mib MiB" >&2
  exit 1
fi

#!/bin/sh
# Prints the CuPy wheel built for this image's CUDA major version (cupy-cuda12x, cupy-cuda13x), as
# the rig's version table says (rig/contract/ngc.py: NGC 25.01-25.07 are CUDA 12, 25.08 on CUDA 13).
# CUPY_PACKAGE, where set, wins. The CUDA version comes from CUDA_VERSION (set in every NGC image),
# else from $CUDA_HOME/version.json (default /usr/local/cuda), else from the table's row of NGC_TAG
# (the image's tag, as the Dockerfile's TRITON_TAG gives it). Needs python3 (stdlib only): the
# table is asked before the rig is installed.
set -eu
if [ -n "${CUPY_PACKAGE:-}" ]; then
  echo "$CUPY_PACKAGE"
  exit 0
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
ngc() { PYTHONPATH="$root" python3 -m rig.contract.ngc "$@"; }
version="${CUDA_VERSION:-}"
manifest="${CUDA_HOME:-/usr/local/cuda}/version.json"
if [ -z "$version" ] && [ -f "$manifest" ]; then
  version=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cuda"]["version"])' "$manifest")
fi
if [ -n "$version" ]; then
  ngc cupy --cuda "$version" || {
    echo "cupy-package.sh: no CuPy wheel known for CUDA $version; pass --build-arg CUPY_PACKAGE=..." >&2
    exit 1; }
elif [ -n "${NGC_TAG:-}" ]; then
  ngc cupy --tag "$NGC_TAG" || {
    echo "cupy-package.sh: NGC tag $NGC_TAG is not in rig/contract/ngc.py; pass --build-arg CUPY_PACKAGE=..." >&2
    exit 1; }
else
  echo "cupy-package.sh: this image names no CUDA version (CUDA_VERSION unset, no $manifest, no NGC_TAG);" \
       "pass --build-arg CUPY_PACKAGE=cupy-cuda12x (or 13x)" >&2
  exit 1
fi

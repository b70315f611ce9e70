#!/bin/sh
# Prints the CuPy wheel built for this image's CUDA major version (cupy-cuda12x, cupy-cuda13x):
# NGC tritonserver 25.01-25.07 are CUDA 12, 25.08 on are CUDA 13 (NVIDIA's release notes).
# CUPY_PACKAGE, where set, wins. The version comes from CUDA_VERSION (set in every NGC image),
# else from $CUDA_HOME/version.json (default /usr/local/cuda).
set -eu
if [ -n "${CUPY_PACKAGE:-}" ]; then
  echo "$CUPY_PACKAGE"
  exit 0
fi
version="${CUDA_VERSION:-}"
manifest="${CUDA_HOME:-/usr/local/cuda}/version.json"
if [ -z "$version" ] && [ -f "$manifest" ]; then
  version=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cuda"]["version"])' "$manifest")
fi
case "$version" in
  11.*|12.*|13.*) echo "cupy-cuda${version%%.*}x" ;;
  "") echo "cupy-package.sh: this image names no CUDA version (CUDA_VERSION unset, no $manifest);" \
           "pass --build-arg CUPY_PACKAGE=cupy-cuda12x (or 13x)" >&2
      exit 1 ;;
  *) echo "cupy-package.sh: no CuPy wheel known for CUDA $version; pass --build-arg CUPY_PACKAGE=..." >&2
     exit 1 ;;
esac

# triton-soak-rig on top of an NGC Triton image (an L4 node: see docs/guide/fleet.md, "Docker").
#   docker build --build-arg TRITON_TAG=26.03 -t triton-soak-rig:26.03 .
#   docker run --gpus all --rm --shm-size=1g -v "$PWD/results:/work/results" triton-soak-rig:26.03   # = the nightly soak
#   docker run --gpus all --rm --shm-size=1g -v "$PWD/results:/work/results" triton-soak-rig:26.03 <subcommand> ...
# TRITON_TAG is a row of the rig's version table (rig/contract/ngc.py: NGC tag, Triton, Python, CUDA,
# CuPy wheel, driver floor; `python3 -m rig.contract.ngc table`); its default is the table's
# DEFAULT_TAG, the nightly's candidate (a test holds them equal). The rig needs Python 3.11 or newer
# in the image (NGC 24.12 on: 3.12): pip refuses to install it under an older one.
ARG TRITON_TAG=26.06
FROM nvcr.io/nvidia/tritonserver:${TRITON_TAG}-py3
# the tag again, inside the build: the CuPy choice falls back on the table's row for it
ARG TRITON_TAG

# bash with pipefail: a failing command on the left of a pipe fails the step.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Recent NGC images are Ubuntu 24.04, whose system Python refuses plain `pip install`
# (PEP 668); this image is single-purpose, so installing into it is what we want.
ENV PIP_BREAK_SYSTEM_PACKAGES=1 \
    RIG_OWNS_ENVIRONMENT=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The in-process API (`import tritonserver`) ships as a wheel in /opt/tritonserver/python
# and is not installed by default; install it unless this release already has it.
RUN python3 -c "import tritonserver" 2>/dev/null || \
    { set -- /opt/tritonserver/python/tritonserver-*.whl; \
      if [ -f "$1" ]; then python3 -m pip install "$1"; \
      else echo "note: no tritonserver wheel in this image; --engine capi still works"; fi; }

# A C compiler for the rig's native load generator (rig/worker/engines/capi/_fastpath.c), if the image lacks one.
RUN command -v cc >/dev/null || { apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*; }

# The rig itself with its GPU extra: nvidia-ml-py for the NVML probes, and the CuPy wheel built
# for this image's CUDA major (deploy/docker/cupy-package.sh asks the version table: cupy-cuda12x
# up to 25.07, cupy-cuda13x from 25.08 on), not the extra's cupy-cuda12x; CUPY_PACKAGE overrides it.
ARG CUPY_PACKAGE=""
WORKDIR /opt/triton-soak-rig
COPY . .
# pyelftools: the official engine checks that the bindings fit the core (a no-op here, where both
# come from the same release). The image's tritonserver wheel may pin numpy<2, which pyarrow 26+
# refuses: `rig doctor` names such a conflict, and the build stops on one.
RUN cupy="$(NGC_TAG="$TRITON_TAG" sh deploy/docker/cupy-package.sh)" \
    && echo "CuPy for this image's CUDA ${CUDA_VERSION:-?}: $cupy" \
    && python3 -m pip install . "$cupy" "nvidia-ml-py>=12" "pyelftools>=0.29" \
    && python3 -c "from rig.worker.engines.capi import lane; print(lane.build())" \
    && rig doctor && ! rig doctor | grep '^conflict'

# Results land in the working directory (the nightly config's `results = "results"`, so
# /work/results): mount a host folder there (-v "$PWD/results:/work/results") to keep them.
# The command is the nightly soak on the CuPy model (README, docs/guide/fleet.md); on a node without
# a GPU, name the numpy model: `docker run ... triton-soak-rig:26.06 soak --config
# /opt/triton-soak-rig/workloads/nightly.toml` (the config's own model).
WORKDIR /work
VOLUME ["/work/results"]
ENTRYPOINT ["rig"]
CMD ["soak", "--config", "/opt/triton-soak-rig/workloads/nightly.toml", "--model", "cupy"]

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
# RIG_HOME: the rig's cache (the native load generator built below, the embedded cores that
# `rig runtime install` adds) in one place that the root build and the rig's own user share.
ENV PIP_BREAK_SYSTEM_PACKAGES=1 \
    RIG_OWNS_ENVIRONMENT=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RIG_HOME=/var/cache/triton-soak-rig

# The image's own entrypoint sets up CUDA forward compatibility (a data-center GPU whose driver is
# older than the image's CUDA); the rig's ENTRYPOINT below runs through it, so it must be there.
RUN test -x /opt/nvidia/nvidia_entrypoint.sh

# The in-process API (`import tritonserver`) ships as a wheel in /opt/tritonserver/python
# and is not installed by default; install it unless this release already has it.
RUN python3 -c "import tritonserver" 2>/dev/null || \
    { set -- /opt/tritonserver/python/tritonserver-*.whl; \
      if [ -f "$1" ]; then python3 -m pip install "$1"; \
      else echo "note: no tritonserver wheel in this image; --engine capi still works"; fi; }

# A C compiler for the rig's native load generator (rig/worker/engines/capi/_fastpath.c), if the image lacks one.
RUN command -v cc >/dev/null || { apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*; }

# The rig with its `ngc` extra (nvidia-ml-py for the NVML probes; pyelftools for the official
# engine's check that the bindings fit the core; numpy<2 and pyarrow<26, the versions that import
# beside this image's bindings), and the CuPy wheel built for this image's CUDA major
# (deploy/docker/cupy-package.sh asks the version table: cupy-cuda12x up to 25.07, cupy-cuda13x from
# 25.08 on; CUPY_PACKAGE overrides it). The image's numpy is held as it is: its tritonserver bindings
# pin numpy<2 (every release), and CuPy 14 would take numpy 2 under them, so pip picks the CuPy that
# fits numpy 1 (13.6.0: docs/guide/runtimes.md, "One install per place", resolved in CI). A CuPy
# wheel of another CUDA major that the image's bindings brought (core r25.08's `gpu` extra names
# cupy-cuda12x on a CUDA 13 image) goes first: two CuPy wheels install one `cupy` module.
ARG CUPY_PACKAGE=""
WORKDIR /opt/triton-soak-rig
COPY . .
RUN cupy="$(NGC_TAG="$TRITON_TAG" sh deploy/docker/cupy-package.sh)" \
    && echo "CuPy for this image's CUDA ${CUDA_VERSION:-?}: $cupy" \
    && { python3 -m pip list --format=freeze | grep -iE '^numpy==' || true; } > /tmp/image-pins.txt \
    && echo "held as the image has it: $(cat /tmp/image-pins.txt)" \
    && for other in $(python3 -m pip list --format=freeze | sed -n 's/^\(cupy-cuda[0-9]*x\)==.*/\1/p'); do \
         [ "$other" = "${cupy%%[<>=!~ ;]*}" ] || python3 -m pip uninstall -y "$other"; done \
    && python3 -m pip install --constraint /tmp/image-pins.txt ".[ngc]" "$cupy" \
    && rm /tmp/image-pins.txt \
    && python3 -c "from rig.worker.engines.capi import lane; print(lane.build())" \
    && rig doctor && ! rig doctor | grep '^conflict'

# The rig runs as uid 1000, not root (a restricted namespace refuses root; the Kubernetes manifests
# ask runAsUser 1000): the NGC images' own triton-server user, made where an image lacks it. It owns
# what the rig writes: its cache (RIG_HOME, built above as root), its home (matplotlib's cache) and
# /work, where results land.
RUN { id 1000 >/dev/null 2>&1 || useradd --no-log-init --uid 1000 --user-group --create-home rig; } \
    && home="$(getent passwd 1000 | cut -d: -f6)" \
    && mkdir -p "$home" "$RIG_HOME" /work/results \
    && chown -R 1000:1000 "$home" "$RIG_HOME" /work

# Results land in the working directory (the nightly config's `results = "results"`, so
# /work/results): mount a host folder there (-v "$PWD/results:/work/results") to keep them.
# The command is the nightly soak on the CuPy model (README, docs/guide/fleet.md); on a node without
# a GPU, name the numpy model: `docker run ... triton-soak-rig:26.06 soak --config
# /opt/triton-soak-rig/workloads/nightly.toml` (the config's own model).
# A host folder mounted there must be writable by uid 1000. The entrypoint is the image's own, then
# the rig (`docker run IMAGE doctor` still runs `rig doctor`).
WORKDIR /work
VOLUME ["/work/results"]
USER 1000:1000
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh", "rig"]
CMD ["soak", "--config", "/opt/triton-soak-rig/workloads/nightly.toml", "--model", "cupy"]

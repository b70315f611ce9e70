# triton-soak-rig on top of an NGC Triton image.
#   docker build --build-arg TRITON_TAG=25.01 -t triton-soak-rig:25.01 .
#   docker run --gpus all --rm --shm-size=1g triton-soak-rig:25.01            # = rig soak
#   docker run --gpus all --rm triton-soak-rig:25.01 <subcommand> ...
ARG TRITON_TAG=25.01
FROM nvcr.io/nvidia/tritonserver:${TRITON_TAG}-py3

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

# A C compiler for the rig's native load generator (rig/_fastpath.c), if the image lacks one.
RUN command -v cc >/dev/null || { apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*; }

# The rig itself, with its GPU extra (CuPy for the cupy model, nvidia-ml-py for NVML probes;
# the images are CUDA 12).
WORKDIR /opt/triton-soak-rig
COPY . .
# pyelftools: the official engine checks that the bindings fit the core (a no-op here, where both
# come from the same release). The image's tritonserver wheel may pin numpy<2, which pyarrow 26+
# refuses: `rig doctor` names such a conflict, and the build stops on one.
RUN python3 -m pip install ".[gpu]" pyelftools \
    && python3 -c "from rig import fastpath; print(fastpath.build())" \
    && rig doctor && ! rig doctor | grep '^conflict'

# Results land in the working directory; mount a volume there to keep them.
WORKDIR /work
ENTRYPOINT ["rig"]
CMD ["soak", "--config", "/opt/triton-soak-rig/workloads/nightly.toml"]

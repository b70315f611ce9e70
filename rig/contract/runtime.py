"""The runtime a cycle spec names: a plain value of its kind's type (``Runtime``: a container's,
an embedded or a built core), written into the spec as a dict and read back by the worker, which
loads its core; and where runtimes live on disk (``cache_dir``).
Finding, installing and building runtimes is the parent's (``rig.parent.runtime``, ``rig.runtimes.from_source``)."""

from __future__ import annotations

import dataclasses
import os
import sys
import typing
from pathlib import Path

from rig.common.gpu import with_pci_order


def cache_dir() -> Path:
    """Where embedded runtimes live: ``$RIG_HOME`` or ``~/.cache/triton-soak-rig``."""
    base = os.environ.get("RIG_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "triton-soak-rig"
    )
    return Path(base) / "runtimes"


def python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclasses.dataclass(frozen=True)
class _Core:
    """What every Triton install the rig can host in-process has: a core, its backends, the
    libraries a worker needs. Each kind is a type of its own (``ContainerRuntime``,
    ``EmbeddedRuntime``, ``BuiltRuntime``: ``Runtime``), told apart in a spec's JSON by ``kind``.

    ``server_dir`` follows perf_analyzer's layout (``lib/libtritonserver.so``, ``backends/``), so
    the same folder serves the rig's engines and perf_analyzer in C API mode.
    """

    name: str  # "embedded-0.7.0", "built-2.67.0" or "container"
    triton_version: str  # e.g. "2.51.0" (the core's own word wins at run time)
    server_dir: str  # has lib/libtritonserver.so and backends/
    core_library: str
    backend_dir: str
    library_path: tuple[str, ...] = ()  # LD_LIBRARY_PATH entries a worker needs

    def worker_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a process that loads this core (LD_LIBRARY_PATH is read at exec)."""
        env = dict(os.environ if base is None else base)
        paths = list(self.library_path)
        if env.get("LD_LIBRARY_PATH"):
            paths.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(paths)
        # The stubs embed the interpreter: they must find numpy where this rig runs.
        bindir = os.path.dirname(sys.executable)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        # CUDA numbers the GPUs fastest first unless told otherwise, NVML by PCI bus id: the
        # probes read CUDA_VISIBLE_DEVICES's indices in NVML's order, so the worker's CUDA (and
        # its stubs') must number them so too; a user's FASTEST_FIRST is kept, and noted
        with_pci_order(env)
        return self._own_env(env)

    def _own_env(self, env: dict[str, str]) -> dict[str, str]:
        return env

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ContainerRuntime(_Core):
    """The core of the NGC ``tritonserver`` image this rig runs in (``/opt/tritonserver``)."""

    kind: typing.Literal["container"] = "container"


@dataclasses.dataclass(frozen=True)
class EmbeddedRuntime(_Core):
    """A core from PyPI (the nvidia-pytriton wheel's), unpacked into the cache."""

    stub_site: str | None = None  # numpy<2 for the backend stubs
    kind: typing.Literal["embedded"] = "embedded"

    def _own_env(self, env: dict[str, str]) -> dict[str, str]:
        if self.stub_site:
            env["RIG_STUB_SITE"] = self.stub_site  # read by stubs only (rig/worker/hook/evidence.py)
        return env


@dataclasses.dataclass(frozen=True)
class BuiltRuntime(_Core):
    """A core, Python backend and stub built from Triton's sources (``rig runtime build``)."""

    stub_site: str | None = None  # numpy<2 for a stub built with pybind11 < 2.12
    bindings: str | None = None  # a folder with this core's own tritonserver bindings
    kind: typing.Literal["built"] = "built"

    def _own_env(self, env: dict[str, str]) -> dict[str, str]:
        if self.stub_site:
            env["RIG_STUB_SITE"] = self.stub_site
        if self.bindings:  # the bindings of the core's own version, ahead of any installed ones
            env["PYTHONPATH"] = self.bindings + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env


Runtime = ContainerRuntime | EmbeddedRuntime | BuiltRuntime  # a spec's runtime: ``kind`` tells them apart


def stub_site_of(runtime: Runtime) -> str | None:
    """The numpy-1 folder a runtime's stubs need (None: their interpreter's own numpy serves)."""
    return None if isinstance(runtime, ContainerRuntime) else runtime.stub_site


def from_dict(d: dict) -> Runtime:
    """A runtime from its dict (``to_dict``; a spec's JSON): the type its ``kind`` names."""
    kinds: dict[str, type[_Core]] = {"container": ContainerRuntime, "embedded": EmbeddedRuntime, "built": BuiltRuntime}
    d = dict(d)
    cls = kinds[d.pop("kind")]
    d["library_path"] = tuple(d.get("library_path", ()))
    return cls(**d)  # type: ignore[return-value]

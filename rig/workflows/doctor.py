"""What ``rig doctor`` reports (``rig.commands.doctor`` prints it): the Python, the run-time
dependencies and their conflicts, the runtimes installed or built here and whether this interpreter
can use them, the engines, the GPU and the driver against the version table, the CPUs' idle
driver, CuPy and Locust's internals the rig relies on. Each probe says why where a thing is unusable,
and none raises: `rig doctor` runs on machines without a GPU, a container or the official bindings."""

from __future__ import annotations

import importlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from rig.common.errors import RigError
from rig.parent import engines, runtime

# Import name → distribution name, for the rig's own run-time dependencies.
DEPENDENCIES = {
    "numpy": "numpy",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "locust": "locust",
    "hdrh": "hdrhistogram",
    "psutil": "psutil",
    "rich": "rich",
    "matplotlib": "matplotlib",
}


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def _pins_on(dist: str) -> list[str]:
    """Installed packages that cap ``dist`` from above, e.g. tritonserver's numpy<2."""
    from importlib.metadata import distributions

    from packaging.requirements import Requirement

    out = []
    for d in distributions():
        for text in d.requires or ():
            req = Requirement(text)
            if req.name.lower() == dist and "<" in str(req.specifier) and not req.marker:
                out.append(f"{d.metadata['Name']} {d.version} needs {dist}{req.specifier}")
    return out


def dependency_problems() -> list[str]:
    """One line per run-time dependency that does not import here, naming the conflict."""
    problems = []
    for module, dist in DEPENDENCIES.items():
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - ImportError, or a library refusing its neighbours
            first = (str(e).strip().splitlines() or [type(e).__name__])[-1]
            line = f"{dist} {_version(dist)} does not import: {first}"
            pins = _pins_on("numpy") if "numpy" in first.lower() else []
            if pins:
                line += f" ({'; '.join(pins)}): pip install -e '.[official]' installs versions that fit"
            problems.append(line)
    return problems


def _idle_line() -> str:
    from rig.common import cpuidle

    method, why = cpuidle.plan("hold")
    held = {
        "pm_qos": "holds the CPUs awake with a PM QoS request of 0 us",
        "poll": f"holds the CPUs awake with {len(os.sched_getaffinity(0))} idle-priority pollers "
        "(no cpuidle driver, or PM QoS closed to this user)",
    }.get(method, f"cannot hold the CPUs awake: {why}")
    return f"driver {cpuidle.idle_driver() or 'unknown'}: rig bench {held}"


def driver_version(gpu, nvml=None) -> str | None:
    """The NVIDIA driver's version as NVML gives it (``580.65.06``), or None where there is no GPU,
    no NVML or it cannot say (never raises: `rig doctor` runs on machines without a GPU)."""
    if not gpu.available:
        return None
    try:
        if nvml is None:
            import pynvml  # initialised by Gpu()

            nvml = pynvml
        value = nvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001 - ImportError, NVMLError_*: no version to judge by
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def version_lines(container_triton: str | None, driver: str | None) -> list[str]:
    """The version table's row (``rig.contract.ngc``) for this container's Triton, else the nightly's
    pair; a warning where NVML's driver is older than the row's floor."""
    from rig.contract import ngc

    if container_triton is not None:
        row = ngc.by_triton(container_triton)
        if row is None:
            return [
                (
                    f"versions    Triton {container_triton} is not in the version table "
                    f"(NGC {ngc.RELEASES[0].ngc_tag} to {ngc.RELEASES[-1].ngc_tag}): no driver floor known"
                )
            ]
        rows, lines = [row], [f"versions    this image: {ngc.describe(row)}"]
    else:
        rows = [ngc.by_tag(ngc.BASELINE_TAG), ngc.by_tag(ngc.CANDIDATE_TAG)]
        lines = [f"versions    the nightly's pair: {ngc.describe(r)}" for r in rows]
    if driver is not None:
        lines.append(f"driver      {driver}")
        for r in rows:
            problem = ngc.driver_problem(r, driver)
            if problem:
                lines.append(f"warning     {problem}")
    return lines


def gpu_lines(gpu) -> list[str]:
    """The GPU NVML sees, and what a soak's GPU figures will lack here and why (a MIG slice, a
    vGPU); where CUDA may number the GPUs otherwise than NVML (a user's FASTEST_FIRST), that too."""
    if not gpu.available:
        return [f"gpu         none: {gpu.why}"]
    return [
        f"gpu         NVML: {gpu.name}",
        *(
            f"gpu         {probe}: {why}" if probe == "order" else f"gpu         {probe}: null ({why})"
            for probe, why in gpu.survey().items()
        ),
    ]


def _container_lines(home: Path | None) -> list[str]:
    if not home:
        return ["runtime     container: none (/opt/tritonserver missing, TRITON_HOME unset)"]
    try:
        rt = runtime.container_runtime()
        return [f"runtime     container: Triton {rt.triton_version} in {home}"]
    except RigError as e:
        return [f"runtime     container: unusable: {e}"]


def _built_lines() -> list[str]:
    from rig.runtimes.from_source.cache import describe

    lines = []
    for b in runtime.list_built():
        ok = runtime.python_tag() in b["pythons"] and b["current"]
        why = (
            ""
            if ok
            else (
                f" (built for Python {', '.join(b['pythons'])}: unusable with this interpreter)"
                if b["current"]
                else " (an older recipe: rig runtime build --force)"
            )
        )
        lines.append(f"runtime     {b['name']}: Triton {b['triton_version']} built from source{why}")
        lines.append(f"runtime       {describe(b)}")
    return lines


def runtime_lines(home: Path | None) -> list[str]:
    """The cores here: the container's, whether the embedded and built cores' stubs find libpython,
    the embedded cores installed and those built from source (and whether this interpreter can use each)."""
    lines = _container_lines(home)
    problem = runtime.libpython_problem()
    lines.append("libpython   " + (problem or "found: the backend stubs of the embedded and built cores can start"))
    installed = runtime.list_embedded()
    for r in installed:
        ok = runtime.python_tag() in r["stubs"]
        why = "" if ok else f" (no stub for Python {runtime.python_tag()}: unusable with this interpreter)"
        lines.append(f"runtime     {r['name']}: Triton {r['triton_version']}{why}")
    lines += _built_lines()
    if not installed:
        lines.append(
            "runtime     embedded: none installed "
            f"(`rig runtime install` adds {runtime.said(runtime.DEFAULT_EMBEDDED)}; "
            "the first cycle installs it too)"
        )
    return lines


def engine_lines() -> list[str]:
    """Whether the official bindings (paired with the runtime a run would resolve) and the C API are usable."""
    ok, why = engines.official_probe()
    if ok:
        try:
            paired = runtime.resolve(None, auto_install=False)
            ok, why = engines.official_probe(paired)
            why = f"over {paired.name}: {why}"
        except RigError as e:
            why += f"; no runtime to pair it with ({e})"
    return [
        f"engine      tritonserver: {'usable' if ok else 'unusable'}: {why}",
        "engine      capi: usable wherever a runtime's core loads (ctypes over tritonserver.h)",
    ]


def _gpu_and_versions(home: Path | None) -> list[str]:
    from rig.common.gpu import with_pci_order
    from rig.common.probes import Gpu

    gpu = Gpu(environ=with_pci_order(dict(os.environ)))  # the GPUs as a worker's CUDA numbers them
    lines = gpu_lines(gpu)
    container_triton = None
    if home:
        try:
            container_triton = runtime.container_runtime().triton_version
        except RigError:
            pass
    return lines + version_lines(container_triton, driver_version(gpu))


def _cupy_line() -> str:
    from rig.parent.preflight import cupy_usable

    ok, why = cupy_usable()
    return f"cupy        {'usable' if ok else 'unusable'}: {why}" + ("" if ok else " (the cupy model is skipped)")


def report() -> str:
    """Everything ``rig doctor`` says, one line each."""
    lines = [f"python      {platform.python_version()} ({sys.executable})"]
    problems = dependency_problems()
    lines += [f"conflict    {p}" for p in problems]
    home = runtime.container_home()
    lines += runtime_lines(home)
    lines += engine_lines()
    lines += _gpu_and_versions(home)
    lines.append(f"cpu idle    {_idle_line()}")
    if not problems:
        lines.append(_cupy_line())
    lines += _locust()
    return "\n".join(lines)


def _locust() -> list[str]:
    """Locust's version and, one line each, the internals the rig relies on that changed
    (rig/worker/load/locust_api.py): asked of a child process, as the worker imports it (importing
    Locust patches the process it runs in)."""
    from rig.common.procs import python_m

    try:
        proc = subprocess.run(
            [*python_m("rig.worker.load.check"), "--locust"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return [f"locust      not checked: {e}"]
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            info = json.loads(line)
            return [f"locust      {info['version']}"] + [f"locust      {p}" for p in info["problems"]]
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return [f"locust      missing: {tail[-1] if tail else f'the check ended with status {proc.returncode}'}"]

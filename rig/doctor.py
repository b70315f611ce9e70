"""``rig doctor``: what is usable here, and why not where not."""

from __future__ import annotations

import platform
import sys

from rig import engines, runtime
from rig.errors import RigError


def report() -> str:
    lines = [f"python      {platform.python_version()} ({sys.executable})"]
    home = runtime.container_home()
    if home:
        try:
            rt = runtime.container_runtime()
            lines.append(f"runtime     container: Triton {rt.triton_version} in {home}")
        except RigError as e:
            lines.append(f"runtime     container: unusable: {e}")
    else:
        lines.append("runtime     container: none (/opt/tritonserver missing, TRITON_HOME unset)")
    installed = runtime.list_embedded()
    for r in installed:
        ok = runtime.python_tag() in r["stubs"]
        why = "" if ok else f" (no stub for Python {runtime.python_tag()}: unusable with this interpreter)"
        lines.append(f"runtime     {r['name']}: Triton {r['triton_version']}{why}")
    if not installed:
        lines.append(f"runtime     embedded: none installed (`rig runtime install` adds {runtime.DEFAULT_EMBEDDED}; "
                     "the first cycle installs it too)")
    ok, why = engines.official_probe()
    lines.append(f"engine      tritonserver: {'usable' if ok else 'unusable'}: {why}")
    lines.append("engine      capi: usable wherever a runtime's core loads (ctypes over tritonserver.h)")
    from rig.probes import Gpu

    gpu = Gpu()
    lines.append(f"gpu         {'NVML: ' + gpu.name if gpu.available else 'none: ' + gpu.why}")
    from rig.orchestrator import cupy_usable

    ok, why = cupy_usable()
    lines.append(f"cupy        {'usable' if ok else 'unusable'}: {why}"
                 + ("" if ok else " (the cupy model is skipped)"))
    try:
        import locust

        lines.append(f"locust      {locust.__version__}")
    except ImportError as e:
        lines.append(f"locust      missing: {e}")
    return "\n".join(lines)

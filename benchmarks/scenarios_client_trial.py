"""The trial of `scenarios_client.py`: the model it writes (markers of initialize and finalize
with the client's clock), the engine and server one trial drives, and the figures' helpers."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODEL = "scen"
LEAK_PREFIX = "scenario-client-leak-"

MODEL_PY = '''
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils


def mark(folder, phase):
    if folder:
        with open(os.path.join(folder, "%d-%s-%d" % (os.getpid(), phase, time.monotonic_ns())), "w") as f:
            f.write(repr(time.monotonic()))


class TritonPythonModel:
    def initialize(self, args):
        p = {k: v["string_value"] for k, v in json.loads(args["model_config"]).get("parameters", {}).items()}
        self.folder = p.get("marker_dir", "")
        mark(self.folder, "init_start")
        self.delay_s = float(p.get("delay_ms", "0")) / 1000
        time.sleep(float(p.get("load_sleep_s", "0")))
        leak = p.get("leak", "none")
        if leak == "shm":  # a per-load leak that outlives the stub
            with open("/dev/shm/%s%d-%d" % (p["leak_prefix"], os.getpid(), time.monotonic_ns()), "wb") as f:
                f.write(os.urandom(1 << 20))
        elif leak == "heap":  # dies with the stub at unload
            self.kept = bytearray(os.urandom(1 << 20))
        mark(self.folder, "init_end")

    def execute(self, requests):
        if self.delay_s:
            time.sleep(self.delay_s)
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", (x * 2).astype(np.float32))]))
        return out

    def finalize(self):
        mark(self.folder, "finalize")
'''


def render(repo: Path, markers: Path, **params) -> None:
    params = {"marker_dir": str(markers), "leak_prefix": LEAK_PREFIX, **{k: str(v) for k, v in params.items()}}
    (repo / MODEL / "1").mkdir(parents=True)
    (repo / MODEL / "1" / "model.py").write_text(MODEL_PY)
    (repo / MODEL / "config.pbtxt").write_text(
        f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'instance_group [ { count: 1 kind: KIND_CPU } ]\nparameters [\n'
        + ",\n".join(f'  {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items()) + "\n]\n")


def markers(folder: Path, phase: str) -> list[float]:
    return sorted(float(p.read_text()) for p in folder.glob(f"*-{phase}-*"))


def slope(xs, ys) -> float | None:
    """Least-squares slope of ys over xs (None with fewer than 3 points)."""
    import numpy as np

    pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if len(pts) < 3:
        return None
    return float(np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)[0])


# ---------------------------------------------------------------- the child: one trial

class Trial:
    def __init__(self, a):
        from rig.parent import runtime
        from rig.worker.engines.base import ServerOptions

        self.a = a
        self.rt = runtime.resolve(a.runtime)
        self.work = Path(tempfile.mkdtemp(prefix="scen-"))
        self.repo, self.marks = self.work / "repo", self.work / "markers"
        self.marks.mkdir()
        self.ServerOptions = ServerOptions
        if a.engine == "capi":
            from rig.worker.engines.capi import CapiEngine

            self.eng = CapiEngine(self.rt.core_library)
        else:
            from rig.worker.engines.official.engine import OfficialEngine

            self.eng = OfficialEngine(self.rt.core_library)

    def start(self, explicit: bool, **params) -> None:
        render(self.repo, self.marks, **params)
        self.eng.start(self.ServerOptions(
            model_repository=str(self.repo), backend_directory=self.rt.backend_dir,
            exit_timeout_s=self.a.exit_timeout, model_control="explicit" if explicit else "none"))
        if explicit:
            return
        while not (self.eng.is_ready() and self.eng.model_ready(MODEL)):
            time.sleep(0.01)

    def raw_stop(self) -> str | None:
        """``Server.stop()`` alone: the official engine's own ``stop()`` also ends its asyncio
        loop, and with it every callback still due; here the loop outlives the stop."""
        if self.a.engine == "capi":
            return self.eng.stop()
        try:
            self.eng._server.stop()
            msg = None
        except Exception as e:  # noqa: BLE001 - "Exit timeout expired. Exiting immediately."
            msg = str(e)
        self.eng._stopped, self.eng._stop_message = True, msg
        return msg

    def x(self):
        import numpy as np

        return {"INPUT": np.ones(4, np.float32)}

    def stubs(self):
        from rig.common import probes

        return probes.stubs_of(os.getpid())

    def regions(self) -> set[str]:
        from rig.common import probes

        return probes.shm_regions_mapped([os.getpid()] + [p.pid for p in self.stubs()])

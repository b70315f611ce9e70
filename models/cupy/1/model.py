"""The rig's CuPy model: OUTPUT = INPUT @ W on the GPU, tensors passed by DLPack, no host copies.

The same parameters as the numpy model (see models/numpy/1/model.py); inputs arrive on the GPU because
the config sets FORCE_CPU_ONLY_INPUT_TENSORS to "no".
"""

import json
import os
import time

import cupy as cp
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        self.size = int(params.get("size", "4"))
        self.delay_s = float(params.get("execute_delay_ms", "0")) / 1000.0
        self.finalize_mode = params.get("finalize", "ok")
        self.finalize_sleep_s = float(params.get("finalize_sleep_s", "3600"))
        self.exit_after = int(params.get("exit_after", "0"))
        self.raise_every = int(params.get("raise_every", "0"))
        self.leak_bytes = int(params.get("leak_bytes", "0"))
        self.leaked = []
        self.executed = 0
        if int(params.get("leak_per_load_bytes", "0")):  # as the numpy model's (models/numpy/1/model.py)
            name = f"rig-leak-{os.getppid()}-{os.getpid()}-{args.get('model_instance_name', 'm')}"
            with open(os.path.join("/dev/shm", "".join(c if c.isalnum() or c in "-_." else "_" for c in name)),
                      "wb") as f:
                f.write(b"\x01" * int(params["leak_per_load_bytes"]))
        if float(params.get("load_sleep_s", "0")):
            time.sleep(float(params["load_sleep_s"]))
        if params.get("fail_load", "0") == "1":
            raise pb_utils.TritonModelException("fault injection: this model fails to load")
        device = int(args.get("model_instance_device_id", "0"))
        self.device = cp.cuda.Device(device)
        with self.device:
            n = self.size
            self.weight = (cp.arange(n * n, dtype=cp.float32).reshape(n, n) / (n * n)).astype(cp.float32)

    def execute(self, requests):
        self.executed += 1
        if self.exit_after and self.executed >= self.exit_after:
            os._exit(17)
        if self.raise_every and self.executed % self.raise_every == 0:
            # fault injection: execute raises (server#7481 class: the model can stay loaded)
            raise ValueError(f"fault injection: execute raises (call {self.executed})")
        if self.delay_s:
            time.sleep(self.delay_s)
        responses = []
        with self.device:
            for request in requests:
                tensor = pb_utils.get_input_tensor_by_name(request, "INPUT")
                x = cp.from_dlpack(tensor.to_dlpack())
                y = cp.matmul(x, self.weight)
                if self.leak_bytes:
                    self.leaked.append(cp.empty(self.leak_bytes, dtype=cp.uint8))
                out = pb_utils.Tensor.from_dlpack("OUTPUT", y.toDlpack())
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses

    def finalize(self):
        if self.finalize_mode == "raise":
            raise RuntimeError("fault injection: finalize raises")
        if self.finalize_mode == "sleep":
            time.sleep(self.finalize_sleep_s)

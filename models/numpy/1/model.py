"""The rig's numpy model: OUTPUT = INPUT @ W, W a fixed size x size matrix, on the CPU.

Parameters (config.pbtxt ``parameters``) set its size and its fault injection knobs, so the
same file serves the healthy model and the positive controls of a soak:
  size, execute_delay_ms, finalize (ok | raise | sleep), finalize_sleep_s,
  exit_after (the stub exits during the N-th execute), raise_every (every N-th execute raises), fail_load (1: initialize raises),
  load_sleep_s (initialize sleeps: a load that hangs, or a slow one),
  leak_bytes (bytes kept per request),
  slowdown_us (each execute sleeps this many microseconds more for every request the model has
  taken so far: a model that gets slower with every request, batched or not),
  decoupled (1: the model is decoupled, and sends each request's one response through its sender with
  the final flag, returning None from execute),
  leak_per_load_bytes (each initialize writes a file of that size to /dev/shm and never removes it:
  a leak that outlives the stub; named rig-leak-<the server's pid>-..., which the rig's worker
  removes when it exits).
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def weights(size):
    """Deterministic, so tests can compute the expected output."""
    return (np.arange(size * size, dtype=np.float32).reshape(size, size) / (size * size)).astype(np.float32)


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
        self.slowdown_s = float(params.get("slowdown_us", "0")) / 1e6
        self.decoupled = params.get("decoupled", "0") == "1"
        self.leaked = []
        self.executed = 0
        self.requests_seen = 0
        if int(params.get("leak_per_load_bytes", "0")):
            name = f"rig-leak-{os.getppid()}-{os.getpid()}-{args.get('model_instance_name', 'm')}"
            with open(os.path.join("/dev/shm", "".join(c if c.isalnum() or c in "-_." else "_" for c in name)),
                      "wb") as f:
                f.write(b"\x01" * int(params["leak_per_load_bytes"]))  # real pages, not a sparse file
        if float(params.get("load_sleep_s", "0")):
            time.sleep(float(params["load_sleep_s"]))  # fault injection: loading never ends
        if params.get("fail_load", "0") == "1":
            raise pb_utils.TritonModelException("fault injection: this model fails to load")
        self.weight = weights(self.size)

    def execute(self, requests):
        self.executed += 1
        self.requests_seen += len(requests)
        if self.exit_after and self.executed >= self.exit_after:
            os._exit(17)  # fault injection: the stub dies in the middle of execute
        if self.raise_every and self.executed % self.raise_every == 0:
            # fault injection: execute raises (server#7481 class: the model can stay loaded)
            raise ValueError(f"fault injection: execute raises (call {self.executed})")
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.slowdown_s:
            time.sleep(self.slowdown_s * self.requests_seen)  # fault injection: slower with every request
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            y = np.matmul(x, self.weight).astype(np.float32)
            if self.leak_bytes:
                self.leaked.append(bytearray(self.leak_bytes))
            response = pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", y)])
            if self.decoupled:
                request.get_response_sender().send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                responses.append(response)
        return None if self.decoupled else responses

    def finalize(self):
        if self.finalize_mode == "raise":
            raise RuntimeError("fault injection: finalize raises")
        if self.finalize_mode == "sleep":
            time.sleep(self.finalize_sleep_s)

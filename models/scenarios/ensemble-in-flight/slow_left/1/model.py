"""Scenario `ensemble-in-flight` (core#466 / core#470): one of the two slow steps that run side by
side after `preprocess`. With `fault` "on" every request takes `delay_ms` (300 ms: a heavy
model), so that the ensemble's requests in flight at stop() pile up in front of it; with "off"
(the negative control) it answers at once. `slow_right` is the same model behind a queue of 2."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        slow = params.get("fault", {}).get("string_value", "off") == "on"
        self.delay_s = float(params.get("delay_ms", {}).get("string_value", "300")) / 1000 if slow else 0.0
        self.name = config.get("name", "slow step")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            time.sleep(self.delay_s)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.tanh(x).astype(np.float32))]))
        return responses

    def finalize(self):
        print(f"{self.name}: finalize")

"""Scenario `ensemble-in-flight` (core#466 / core#470, server#8597): the ensemble's first step.
Every request takes `delay_ms` (20 ms), fault on or off, and doubles its input: the two steps
after it get one request each per 20 ms, so that with fast steps (the control) their queues
never fill, and with slow ones (fault on) they fill."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.delay_s = float(params.get("delay_ms", {}).get("string_value", "20")) / 1000

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            time.sleep(self.delay_s)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x * 2.0).astype(np.float32))]))
        return responses

    def finalize(self):
        print("preprocess: finalize")

"""Scenario `bls-in-flight` (python_backend#325 class): the slow second stage of the pipeline that
`bls_pipeline` calls through BLS. With `fault` "on" (or "background") every request takes
`delay_ms` (1.5 s: a heavy encoder), so that a BLS request is outstanding when the server stops
under load; with `fault` "off" (the negative control) it answers at once."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        slow = params.get("fault", {}).get("string_value", "off") in ("on", "background")
        self.delay_s = float(params.get("delay_ms", {}).get("string_value", "1500")) / 1000 if slow else 0.0

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            time.sleep(self.delay_s)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.tanh(x).astype(np.float32))]))
        return responses

    def finalize(self):
        print("slow_encoder: finalize")

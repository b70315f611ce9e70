"""Scenario `bls-in-flight` (python_backend#325 class: a BLS request outstanding while the server
stops): the front of a two-model pipeline. For every request `execute` calls `slow_encoder` in
the same repository through BLS (`pb_utils.InferenceRequest(...).exec()`), waits for its answer
and post-processes it. The fault switch lives in `slow_encoder` (slow with "on", at once with
"off"), so that a `stop()` under load finds the client's BLS request outstanding.

With `fault` "background" the pipeline also, after answering, refreshes the encoder with the
request's input from a thread of its own (a write-behind cache warm-up): a BLS request that is
outstanding at `stop()` even when every client request has been answered."""

import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.background = params.get("fault", {}).get("string_value", "off") == "background"
        self.encoder = "slow_encoder"

    def encode(self, x):
        bls = pb_utils.InferenceRequest(model_name=self.encoder, requested_output_names=["OUTPUT0"],
                                        inputs=[pb_utils.Tensor("INPUT0", x)])
        return bls.exec()

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            encoded = self.encode(x)
            if encoded.has_error():
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"slow_encoder failed: {encoded.error().message()}")))
                continue
            y = pb_utils.get_output_tensor_by_name(encoded, "OUTPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (y + 1.0).astype(np.float32))]))
            if self.background:
                threading.Thread(target=self.encode, args=(x.copy(),), daemon=True).start()
        return responses

    def finalize(self):
        print("bls_pipeline: finalize")

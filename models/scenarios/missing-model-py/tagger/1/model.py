"""Scenario `missing-model-py` (server#8766: a Python model whose version folder has no model.py
stays LOADING and cannot be unloaded): a plain tagging model (1 where the input is positive).
It loads and serves the cycle's load; then the rig's client unloads it and, with `fault` "on",
takes this file away before it loads the model again (explicit model control, as the report's
`POST /v2/repository/models/tagger/load`), and puts it back once the stop is over. With "off"
(the negative control) the file stays and the same load succeeds."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x > 0).astype(np.float32))]))
        return responses

    def finalize(self):
        print("tagger: finalize")

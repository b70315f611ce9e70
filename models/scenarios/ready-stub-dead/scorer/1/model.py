"""Scenario `ready-stub-dead` (server#8604: /v2/health/ready answers 200 with a dead Python stub;
server#7230): a plain scoring model (a softmax of its input). The fault is not the model's code
but what happens to its process: with `fault` "on" the rig's client kills this stub with SIGKILL
once the load is over (as the kernel's OOM killer would), then asks the server and the model
whether they are ready. With "off" (the negative control) the stub is left alive and asked the same."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            e = np.exp(x - x.max())
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (e / e.sum()).astype(np.float32))]))
        return responses

    def finalize(self):
        print("scorer: finalize")

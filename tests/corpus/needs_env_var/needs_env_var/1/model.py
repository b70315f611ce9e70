import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # the deployment sets it; no default on purpose
        self.threshold = float(os.environ["MODEL_THRESHOLD"])

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x > self.threshold).astype(np.float32))]))
        return out

    def finalize(self):
        print("needs_env_var: finalize")

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.scale = 2.0

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            y = x * scale  # a typo: self.scale was meant
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y.astype(np.float32))]))
        return responses

    def finalize(self):
        print("raises_name_error: finalize")

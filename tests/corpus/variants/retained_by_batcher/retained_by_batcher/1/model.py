# A plain, well-behaved batched embedder: the retention is the client's (class: retained-array,
# run with --retain last-array).
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            img = pb_utils.get_input_tensor_by_name(request, "image").as_numpy().astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("embedding", img.mean(axis=-1) / 255.0)]))
        return responses

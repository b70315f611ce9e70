# Two instances of a tokeniser-ish model; each raises on every 5th call of its own
# (class: execute-raises).
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = 0
        self.name = args["model_instance_name"]

    def execute(self, requests):
        self.seen += 1
        if self.seen % 5 == 0:
            raise RuntimeError(f"{self.name}: vocabulary lookup failed on call {self.seen}")
        responses = []
        for request in requests:
            ids = pb_utils.get_input_tensor_by_name(request, "text_ids").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("logits", np.tanh(ids.astype(np.float32)))]))
        return responses

    def finalize(self):
        pass

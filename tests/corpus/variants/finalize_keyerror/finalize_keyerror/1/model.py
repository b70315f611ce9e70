# Its finalize closes a pool it looks up by a key that was never set (class: finalize-raises).
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.resources = {"cache": {}}

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 3)]) for r in requests]

    def finalize(self):
        self.resources["pool"].close()

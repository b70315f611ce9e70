import numpy as np
import triton_python_backend_utils as pb_utils

# 16,384 float32 features a query: 64 KiB
FEATURES = 16384


class TritonPythonModel:
    """Expands each query into a feature vector and memoizes it "for the next stage" (a re-ranker
    that was never wired up). Nothing ever reads or empties the memo: 64 KiB kept per request."""

    def initialize(self, args):
        self.memo = []

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            features = np.repeat(x.astype(np.float32), FEATURES // x.size)
            self.memo.append(features)
            out = features.reshape(x.size, -1).mean(axis=1).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]))
        return responses

    def finalize(self):
        print(f"memo_leak: finalize ({len(self.memo)} memoized)")

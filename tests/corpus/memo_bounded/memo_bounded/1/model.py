import collections

import numpy as np
import triton_python_backend_utils as pb_utils

# 16,384 float32 features a query: 64 KiB
FEATURES = 16384
MEMO_SIZE = 32


class TritonPythonModel:
    """memo_leak's twin, fixed the way teams fix it: the memo keeps the last MEMO_SIZE feature
    vectors only (2 MiB at most), whatever the load."""

    def initialize(self, args):
        self.memo = collections.deque(maxlen=MEMO_SIZE)

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
        print(f"memo_bounded: finalize ({len(self.memo)} memoized)")

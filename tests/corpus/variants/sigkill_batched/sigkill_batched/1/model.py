# A scorer whose native extension segfaults now and then: the stub is killed by a signal
# mid-execute (class: stub-exits).
import os
import signal

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.batches = 0

    def execute(self, requests):
        self.batches += 1
        if self.batches == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "features").as_numpy()
            out.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("score", x.mean(axis=-1, keepdims=True).astype(np.float32))]))
        return out

"""A model that is not decoupled but answers from a thread of its own (as
models/scenarios/sender-after-return's async_scorer in its supported way, "single"): `execute`
hands each request to a thread and returns None; the thread sends the answer with the final flag.
Nothing in its config says so: the evidence hook sees `execute` return None."""

import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pass

    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().copy()
            threading.Thread(target=self.answer, args=(request.get_response_sender(), x), daemon=True).start()
        return None

    def answer(self, sender, x):
        y = (x * 2.0 + 1.0).astype(np.float32)
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y)]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        pass

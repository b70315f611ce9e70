"""A decoupled model that answers from a thread of its own (as models/scenarios/sender-kept's
chat_stream does, with the final flag and no session kept): `execute` hands each request to a
thread and returns None; the thread sends the answer, then the final flag in a send of its own.
Triton's statistics of a request end when `execute` returns, before the answer may leave."""

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
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x * 2.0 + 1.0).astype(np.float32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        pass

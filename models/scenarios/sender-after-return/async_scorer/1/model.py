"""Scenario `sender-after-return` (python_backend's response_sender QA tests
`test_non_decoupled_zero_response_post_return` and `test_non_decoupled_two_response_post_return`,
both skipped with "Model unload will hang"): a NON-decoupled scoring model that hands each request
to a worker thread and returns None from `execute`; the thread works after `execute` returned and
uses the request's response sender (a python_backend feature of 24.0x for non-decoupled models).

`fault` (config parameter):
- "on": the thread publishes the score elsewhere (here: keeps the last one) and closes the request
  with the final flag alone (TRITONSERVER_RESPONSE_COMPLETE_FINAL, no response), the way a
  decoupled model ends a stream. A non-decoupled model may not do that: the send raises in the
  thread, where the stub never sees it, and the request is never completed (the QA's TODO);
- "two": the thread sends the answer, then the final flag in a send of its own;
- "single": the thread sends the answer with the final flag in one send (the supported way);
- "off" (the negative control): `execute` returns the answers itself."""

import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.mode = params.get("fault", {}).get("string_value", "off")
        self.last_score = None

    def score(self, x):
        return (x * 2.0 + 1.0).astype(np.float32)

    def execute(self, requests):
        if self.mode == "off":
            return [pb_utils.InferenceResponse([pb_utils.Tensor(
                "OUTPUT0", self.score(pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()))])
                for r in requests]
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().copy()
            threading.Thread(target=self.answer, args=(request.get_response_sender(), x), daemon=True).start()
        return None

    def answer(self, sender, x):
        y = self.score(x)
        if self.mode == "on":
            self.last_score = y  # published; nothing to answer
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        response = pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y)])
        if self.mode == "single":
            sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        else:
            sender.send(response)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        print("async_scorer: finalize")

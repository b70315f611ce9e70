"""A token streamer: each request gets `tokens` responses, one every `token_delay_ms` (the first
too: a model "thinks" before its first token), then the final flag on its own. Requests are
served on threads of their own, so one request's stream never waits behind another's."""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.tokens = int(params.get("tokens", {}).get("string_value", "3"))
        self.delay_s = float(params.get("token_delay_ms", {}).get("string_value", "30")) / 1000
        self.lock = threading.Lock()
        self.streaming = 0
        self.idle = threading.Condition(self.lock)

    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().copy()
            sender = request.get_response_sender()
            with self.lock:
                self.streaming += 1
            # paced from the request's arrival: a late thread or wake-up does not push tokens back
            arrived = time.monotonic()
            threading.Thread(target=self.stream, args=(sender, x, arrived), daemon=True).start()
        return None  # decoupled: the threads answer

    def stream(self, sender, x, arrived):
        try:
            for i in range(self.tokens):
                time.sleep(max(0.0, arrived + (i + 1) * self.delay_s - time.monotonic()))
                token = (x + i).astype(np.float32)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", token)]))
            if not self.tokens:  # thought about it, and had nothing to say
                time.sleep(max(0.0, arrived + self.delay_s - time.monotonic()))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.streaming -= 1
                self.idle.notify_all()

    def finalize(self):
        with self.lock:  # the streams under way end before the model goes
            self.idle.wait_for(lambda: self.streaming == 0, timeout=10)
        print("streams_tokens: finalize")

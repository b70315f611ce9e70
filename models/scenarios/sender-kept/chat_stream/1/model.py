"""Scenario `sender-kept` (server#7626; python_backend's response_sender QA tests skipped with
"Model unload will hang"): a decoupled chat model that streams `tokens` responses per request
from a thread of its own and keeps every request's response sender on `self` (a session table,
so that a later request could cancel or extend the stream).

`fault` (config parameter):
- "on": the stream never sends the final flag (TRITONSERVER_RESPONSE_COMPLETE_FINAL): the client
  sees the tokens but its request never completes, and the sender stays on `self`;
- "kept": the last token goes out with the final flag, and the sender still stays on `self`;
- "off" (the negative control): the last token goes out with the final flag, and the session
  ends: its sender leaves the table."""

import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.tokens = int(params.get("tokens", {}).get("string_value", "3"))
        self.mode = params.get("fault", {}).get("string_value", "off")
        self.sessions = {}  # (number, request id) -> its response sender, kept for the session's life
        self.lock = threading.Lock()
        self.next_id = 0

    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().copy()
            sender = request.get_response_sender()
            with self.lock:
                self.next_id += 1
                session = (self.next_id, request.request_id())
                self.sessions[session] = sender
            threading.Thread(target=self.stream, args=(session, sender, x), daemon=True).start()
        return None

    def stream(self, session, sender, x):
        for i in range(self.tokens):
            response = pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x + i).astype(np.float32))])
            last = i == self.tokens - 1
            if last and self.mode != "on":
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                sender.send(response)
        if self.mode == "off":
            with self.lock:
                self.sessions.pop(session)

    def finalize(self):
        print(f"chat_stream: finalize, {len(self.sessions)} sessions")

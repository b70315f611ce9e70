"""Scenario `sequence-at-stop` (server#8449, server#7117 / core#341): a stateful model under the
sequence batcher. Each sequence (its correlation id, the CORRID control input) keeps a running
sum of its inputs from the request flagged START to the one flagged END; each answer is the sum
so far. A sequence the batcher's reaper ends (idle past max_sequence_idle_microseconds), or one
still open when the model is unloaded, is never told to the model: its state stays.

In `finalize` the model writes how many states it still holds to
`$RIG_EVIDENCE_DIR/sequences-PID.count` (the cycle's `sequence_states_left`; not a .json file,
which the rig reads as a finalize marker)."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


def _flag(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return tensor is not None and bool(tensor.as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def initialize(self, args):
        self.states = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            corrid = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0])
            if _flag(request, "START"):
                self.states[corrid] = np.zeros_like(x, dtype=np.float32)
            if corrid not in self.states:
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"sequence {corrid}: no state (its START never came here)")))
                continue
            self.states[corrid] = self.states[corrid] + x.astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", self.states[corrid])]))
            if _flag(request, "END"):
                del self.states[corrid]
        return responses

    def finalize(self):
        print(f"sequence_sum: finalize with {len(self.states)} sequence state(s) left")
        where = os.environ.get("RIG_EVIDENCE_DIR")
        if where:
            with open(os.path.join(where, f"sequences-{os.getpid()}.count"), "w") as f:
                f.write(str(len(self.states)))

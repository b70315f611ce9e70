# A background refresher thread that finalize joins, but nothing ever tells it to stop
# (class: finalize-sleeps).
import threading

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.stop = threading.Event()
        self.refresher = threading.Thread(target=self._refresh, daemon=True)
        self.refresher.start()

    def _refresh(self):
        while True:  # meant to check self.stop, never does
            threading.Event().wait(0.5)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() - 1)]) for r in requests]

    def finalize(self):
        self.refresher.join()

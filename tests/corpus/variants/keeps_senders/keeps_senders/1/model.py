# A streaming model that sends one token per request and means to finish "later", keeping the
# senders in a dict it never drains: no final flag ever goes out (class: sender-kept).
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.open_streams = {}

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            x = pb_utils.get_input_tensor_by_name(request, "prompt").as_numpy()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("token", x * 2)]))
            self.open_streams[request.request_id() or str(len(self.open_streams))] = sender
        return None

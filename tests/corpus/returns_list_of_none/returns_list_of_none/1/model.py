import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = [None] * len(requests)
        for i, request in enumerate(requests):
            pb_utils.get_input_tensor_by_name(request, "INPUT0")
            # the response was meant to be filled in here
        return responses

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("tokenizer vocabulary missing: vocab.txt"))
                for _ in requests]

    def finalize(self):
        print("error_responses: finalize")

import os
import signal


class TritonPythonModel:
    def initialize(self, args):
        print("kills_stub_in_initialize: CUDA context could not be created, giving up", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def execute(self, requests):
        return []

"""checked: an example of a workload written as a locustfile, with tasks of its own.

    rig soak --workload workloads/checked.py --users 2 --workload-seconds 5

Each user sends one request at a time through ``self.infer``, which times and counts it like
every other request, and checks what came back. A failed check (an exception in a task) is an
error of the cycle. Without a ``LoadTestShape`` the run holds ``--users`` users throughout.
"""

import numpy as np
from locust import task

from rig.worker.load import TritonUser


class CheckedUser(TritonUser):
    @task(3)
    def ones(self):
        inputs = self.inputs_for()  # the rig's inputs for this user's model, built from its metadata
        outputs = self.infer(inputs)
        for name, value in outputs.items():
            assert value.size > 0, f"{name} is empty"
            if value.dtype.kind == "f":
                assert np.isfinite(value).all(), f"{name} is not finite"

    @task(1)
    def scaled(self):
        inputs = {k: (v * 2 if v.dtype.kind in "fiu" else v) for k, v in self.inputs_for().items()}
        self.infer(inputs)

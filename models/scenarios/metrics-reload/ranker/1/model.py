"""Scenario `metrics-reload` (server#8663: a segmentation fault on model reload with Python backend
metrics, the Metric shared across processes): a ranking model whose every instance makes the same
`pb_utils.MetricFamily` (a HISTOGRAM of execute times and a COUNTER of requests, one name each)
with the same labels, so the instances share one metric in the core, as server#8892's
`custom_metrics_reload` model does. The rig's client then reloads the model in place (its files
touched, loaded again under explicit model control: the new instances load beside the old ones,
which then unload, releasing their metrics in finalize) and sends requests to the new instances.

With `fault` "off" (the negative control) the model makes no metrics at all."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils

BUCKETS = [0.0001, 0.001, 0.01, 0.1]


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.metrics = params.get("fault", {}).get("string_value", "off") == "on"
        if self.metrics:
            labels = {"model": args["model_name"], "version": args["model_version"]}
            self.seconds_family = pb_utils.MetricFamily(
                name="ranker_reload_execute_seconds", description="Time spent in execute",
                kind=pb_utils.MetricFamily.HISTOGRAM)
            self.requests_family = pb_utils.MetricFamily(
                name="ranker_reload_requests_total", description="Requests ranked",
                kind=pb_utils.MetricFamily.COUNTER)
            self.seconds = self.seconds_family.Metric(labels=labels, buckets=BUCKETS)
            self.requests = self.requests_family.Metric(labels=labels)

    def execute(self, requests):
        start = time.perf_counter()
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.argsort(-x).astype(np.float32))]))
        if self.metrics:
            self.requests.increment(len(requests))
            self.seconds.observe(time.perf_counter() - start)
        return responses

    def finalize(self):
        # Each metric released before its family, in finalize, as python_backend's README asks
        # (and so not in the stub's destructor: server#8662, the `metrics` scenario). The old
        # instances' release is what removes the metric the new instances share.
        if self.metrics:
            del self.seconds, self.requests
            del self.seconds_family, self.requests_family
        print("ranker: finalize")

"""Scenario `metrics` (server#8662: a segfault at shutdown, python_backend#429: `MetricFamily`
destroyed inside the stub's destructor; server#8663: the same on reload): a ranking model that
reports custom metrics the way python_backend's `examples/custom_metrics` does. `initialize`
creates a `pb_utils.MetricFamily` (a COUNTER of requests and one of the time spent, kept on
`self`) and `execute` increments them for every batch.

With `fault` "off" (the negative control) the model makes no metrics at all."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.metrics = params.get("fault", {}).get("string_value", "off") == "on"
        if self.metrics:
            labels = {"model": args["model_name"], "version": args["model_version"]}
            self.requests_family = pb_utils.MetricFamily(
                name="ranker_requests_total", description="Requests ranked", kind=pb_utils.MetricFamily.COUNTER)
            self.latency_family = pb_utils.MetricFamily(
                name="ranker_execute_ns_total", description="Time spent in execute", kind=pb_utils.MetricFamily.COUNTER)
            self.requests_metric = self.requests_family.Metric(labels=labels)
            self.latency_metric = self.latency_family.Metric(labels=labels)

    def execute(self, requests):
        start = time.perf_counter_ns()
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            order = np.argsort(-x).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", order)]))
        if self.metrics:
            self.requests_metric.increment(len(requests))
            self.latency_metric.increment(time.perf_counter_ns() - start)
        return responses

    def finalize(self):
        print("ranker: finalize")

"""The parts of the workload path that run inside one process with Locust (and so gevent's
monkey-patching): run by ``test_workloads.py`` in a process of their own,
``python -m pytest tests/inproc_load.py``, never collected into the main session."""

from __future__ import annotations

import pytest


def test_record_many_matches_hdrh_value_by_value():
    import numpy as np

    from rig.common import hdr
    from rig.worker.load import record_many

    HDR_MAX_US = hdr.HIGHEST_US

    rng = np.random.default_rng(3)
    values = np.concatenate([rng.integers(1, HDR_MAX_US + 1, 5000), rng.integers(1, 3000, 5000),
                             np.array([1, 1023, 1024, 2047, 2048, 2**25 - 1, 2**25, HDR_MAX_US])])
    one, many = hdr.new(), hdr.new()
    for v in values.tolist():
        one.record_value(v)
    record_many(many, values)
    assert list(one.counts) == list(many.counts)
    assert (one.total_count, one.min_value, one.max_value) == (many.total_count, many.min_value, many.max_value)
    assert one.encode() == many.encode()


def test_bulk_locust_stats_equal_locust_own_logging():
    import numpy as np
    from locust.stats import RequestStats

    from rig.worker.load import log_to_locust

    ms = np.concatenate([np.random.default_rng(5).lognormal(1.5, 1.2, 3000), [0.2, 99.5, 150.0, 4321.0, 12345.6]])
    own, bulk = RequestStats(), RequestStats()
    for v in ms.tolist():
        own.log_request("infer", "m", v, 0)
    log_to_locust(bulk, "m", ms)
    for a, b in ((own.total, bulk.total), (own.get("m", "infer"), bulk.get("m", "infer"))):
        assert a.num_requests == b.num_requests == ms.size
        assert dict(a.response_times) == dict(b.response_times)
        assert a.total_response_time == pytest.approx(b.total_response_time)
        assert (a.min_response_time, a.max_response_time) == (b.min_response_time, b.max_response_time)
        assert a.get_response_time_percentile(0.99) == b.get_response_time_percentile(0.99)


def test_hub_monitor_catches_a_block_without_waking():
    import gevent

    from rig.worker.load import HubMonitor
    from rig.worker.unpatched import original

    hub = HubMonitor()
    gevent.sleep(0.01)
    idle = hub.take()  # nothing blocked on purpose
    gevent.spawn(original("time", "sleep"), 0.2).join()  # a real sleep blocks the hub
    blocked = hub.take()
    after = hub.take()
    hub.stop()
    assert blocked >= 0.2, "the block is at least the real sleep"
    assert idle < blocked and after < blocked, "it is the sleep's, and take() starts afresh"


def test_the_pump_wakes_at_most_once_a_second_and_a_boundary_still_drains_everything():
    """Each of the sink's drains is Python work on the worker's main thread, on a core the server
    needs (issue 54: the rig's own tail): the pump drains at most once a second, and a window
    boundary still drains every lane, so no completion is left out of its window."""
    import gevent

    from rig.worker.load.lanes import TaskLane
    from rig.worker.load.sink import Sink
    from rig.worker.load.windows import Window

    class CountedLane(TaskLane):
        """A real task lane that counts its drains."""

        drains = 0

        def drain(self):
            self.drains += 1
            return super().drain()

    lanes = [CountedLane() for _ in range(8)]
    sink = Sink()
    sink.switch(Window(1, 0.0))
    for lane in lanes:
        sink.add(lane, "m")
    sink.start_pump()
    lanes[0].record(150_000)
    gevent.sleep(2.1)
    lanes[1].record(250_000)  # after the pump's last drain: only the boundary's drain sees it
    pumped = [lane.drains for lane in lanes]
    closed = sink.switch(Window(2, 2.1))
    sink.stop_pump()
    assert all(n <= 2 for n in pumped), pumped  # at 5 a second each lane was drained ten times here
    assert closed.requests == 2 and closed.hist.get_max_value() == 250

"""The one ``Lane`` protocol (rig.worker.engines.base): every lane implements all of it, and the
request-timeout scan that the Python-side lanes share. Pure: no core, no Locust."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest

from rig.worker.engines.base import Deadlines, EngineError, Lane, timeout_message
from rig.worker.engines.capi.lane import NativeLane
from rig.worker.engines.official.lane import OfficialLane
from rig.worker.load.lanes import PyLane, TaskLane

LANES = [NativeLane, OfficialLane, PyLane, TaskLane]
METHODS = sorted(n for n, v in vars(Lane).items() if inspect.isfunction(v) and not n.startswith("_"))
ATTRIBUTES = {"kind": str, "in_flight": int, "supports_open_loop": bool, "blocking_stop": bool}


def test_the_protocol_names_what_callers_use():
    assert set(Lane.__annotations__) == set(ATTRIBUTES)
    assert set(METHODS) >= {"set_request_timeout", "set_check", "start_closed", "start_open", "stop", "drain",
                            "stream", "first_error", "error_messages", "counters", "stats", "close"}


@pytest.mark.parametrize("cls", LANES, ids=lambda c: c.__name__)
def test_every_lane_implements_all_of_it(cls):
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    assert not missing, f"{cls.__name__} lacks {missing} of rig.worker.engines.base.Lane"
    for name, kind in ATTRIBUTES.items():
        if name == "in_flight" and name not in vars(cls):
            continue  # set per instance
        assert isinstance(getattr(cls, name, None), kind), f"{cls.__name__}.{name} is not a {kind.__name__}"
    for m in METHODS:  # the same parameters as the protocol's, so a caller can rely on them
        want = list(inspect.signature(getattr(Lane, m)).parameters)
        got = list(inspect.signature(getattr(cls, m)).parameters)
        assert got[:len(want)] == want, f"{cls.__name__}.{m}{tuple(got)}: the protocol says {tuple(want)}"


def test_the_lanes_kinds_differ_and_say_what_they_can():
    assert sorted(c.kind for c in LANES) == ["asyncio", "native", "python", "tasks"]
    assert {c.__name__ for c in LANES if c.supports_open_loop} == {"NativeLane", "OfficialLane"}
    assert {c.__name__ for c in LANES if c.blocking_stop} == {"NativeLane"}


def test_a_task_lane_does_what_it_has_to_and_refuses_an_open_loop():
    lane = TaskLane()
    lane.set_request_timeout(3)
    lane.set_check({"name": "OUTPUT"})
    lane.start_closed()
    lane.record(5)
    lane.fail("boom", 7, timeout=True)
    lat, errors = lane.drain()
    assert lat.tolist() == [5, -7] and errors == 1 and lane.stream() is None
    assert lane.error_messages() == {"boom": 1} and lane.counters() == {"timeouts": 1}
    assert {"submitted": 2, "completed": 1, "errors": 1, "timeouts": 1, "in_flight": 0}.items() <= lane.stats().items()
    with pytest.raises(EngineError) as e:
        lane.start_open(np.zeros(1, dtype=np.int64))
    assert e.value.code == "UNSUPPORTED" and "closed loop only" in str(e.value)
    assert lane.stop() and lane.close()


def test_deadlines_count_each_late_request_once_and_its_end_not_again():
    d = Deadlines()
    now = time.monotonic_ns()
    d.sent.update({1: now - 2_000_000_000, 2: now + 60_000_000_000})
    assert d.expire() == 0, "no timeout set: never"
    d.set_timeout(1.0)
    assert d.expire() == 1 and d.expire() == 0 and d.timeouts == 1 and d.expired == {1}
    assert d.message == timeout_message(1.0) == "no response within 1 s (request timeout)"
    assert d.end(1) is False, "counted as a timeout: its end counts nothing"
    assert d.end(2) is True and not d.sent and not d.expired

"""What a scenario's client does around stop() (rig.worker.clients.clientside) and ``--restart reload``: the
figures each records in the cycle's row, on a real core (slow), and the pure parts (fast)."""

from pathlib import Path

import numpy as np
import pytest
from helpers import cycles, rig

from rig.worker.clients import clientside

MIB = 1 << 20


def test_in_flight_counts_each_request_once_however_it_ended():
    f = clientside.InFlight()
    f.submitted = 5
    f._done(None, None)
    f._done(None, RuntimeError("Server is stopping"))
    f._done(None, None)
    got = f.figures()
    assert (got["in_flight"], got["in_flight_answered"], got["in_flight_failed"], got["in_flight_lost"]) == (5, 2, 1, 2)
    assert "1 request(s) in flight at stop failed: Server is stopping" in got["detail"]


def test_memory_growth_is_read_per_thousand_requests_after_the_warm_up():
    s = clientside.MemorySampler.__new__(clientside.MemorySampler)
    s._run, s._done = False, [1]

    class Tm:  # the allocations the sampler reads: none at all
        @staticmethod
        def get_traced_memory():
            return (0, 0)
    s._tm = Tm
    # 2 KiB of RSS a second over 10 s at 100 requests a second: 20 KiB per 1,000 requests
    s.samples = [(float(t), 1_000_000 + 2048 * t, 0) for t in range(11)]
    s._sample = lambda: None
    got = s.finish(requests=1000, seconds=10.0)
    assert got["rss_per_1k_requests_b"] == pytest.approx(20480, rel=1e-6)
    assert got["traced_per_1k_requests_b"] == pytest.approx(0, abs=1e-6)


def _soak(tmp_path, *args, timeout=600):
    results = tmp_path / "results"
    proc = rig("soak", *args, "--engine", "capi", "--results", str(results), timeout=timeout)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return cycles(results).sort_values("cycle")


def _per_cycle(c, column):
    """The median growth from one cycle to the next: /dev/shm is the host's, and a test running
    beside this one may add or remove a file of its own once."""
    return float(np.median(np.diff(c[column].astype(float))))


@pytest.mark.slow
def test_reload_keeps_one_server_and_a_leak_per_load_shows_as_a_slope_of_its_size(tmp_path):
    leak = _soak(tmp_path / "leak", "--restart", "reload", "--fault", "leaks-per-load", "--cycles", "6",
                 "--requests", "20", "--exit-timeout", "5")
    assert set(leak.restart) == {"reload"} and set(leak.outcome) == {"clean"}
    assert leak.worker_pid.nunique() == 1  # one worker, one server, six loads
    assert _per_cycle(leak, "shm_bytes") == MIB
    plain = _soak(tmp_path / "plain", "--restart", "reload", "--cycles", "6", "--requests", "20",
                  "--exit-timeout", "5")
    assert set(plain.outcome) == {"clean"} and _per_cycle(plain, "shm_bytes") == 0
    pid = int(leak.worker_pid.iloc[0])
    assert not list(Path("/dev/shm").glob(f"rig-leak-{pid}-*"))  # the worker removed its model's leak


@pytest.mark.slow
def test_stop_in_flight_answers_every_request_and_stop_while_loading_waits_out_the_exit_timeout(tmp_path):
    flight = _soak(tmp_path / "flight", "--scenario", "stop-in-flight", "--cycles", "1", "--exit-timeout", "10")
    row = flight.iloc[0]
    assert (row.outcome, row.in_flight, row.in_flight_answered, row.in_flight_lost) == ("clean", 8, 8, 0)
    loading = _soak(tmp_path / "loading", "--scenario", "stop-while-loading", "--cycles", "1", "--exit-timeout", "3")
    row = loading.iloc[0]
    assert (row.outcome, row.loading_at_stop) == ("exit_timeout", 1) and row.stop_latency_s >= 3
    control = _soak(tmp_path / "control", "--scenario", "stop-while-loading", "--control", "--cycles", "1",
                    "--exit-timeout", "3")
    assert list(control.outcome) == ["clean"]


@pytest.mark.slow
def test_refused_requests_are_counted_apart_from_the_load(tmp_path):
    c = _soak(tmp_path, "--scenario", "refused-request", "--cycles", "1", "--exit-timeout", "5")
    row = c.iloc[0]
    assert (row.outcome, row.load_outcome, row.refused, row.errors) == ("clean", "ok", 100, 0)
    assert "RIG_NO_SUCH_INPUT" in row.detail


def test_the_cycle_line_says_what_the_client_saw():
    from helpers import cycle_row

    from rig.workflows.soak import cycle_line

    line = cycle_line(cycle_row(1, outcome="requests_lost", in_flight=8, in_flight_answered=6, in_flight_failed=1,
                                in_flight_lost=1, refused=100, loading_at_stop=1, stub_crashes=2))
    assert "in flight at stop 8: 6 answered, 1 failed, 1 lost" in line
    assert "100 refused at submission" in line and "1 loading at stop" in line and "stub crashes 2" in line

"""Workloads as locustfiles: a user's own file, with tasks that send requests and check outputs."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers import ROOT, cycles, rig

pytestmark = pytest.mark.slow

FAILING_CHECK = '''
from locust import task
from rig.worker.load import TritonUser


class Strict(TritonUser):
    @task
    def check(self):
        out = self.infer()
        assert out["OUTPUT"].sum() < 0, "OUTPUT should be negative"
'''

TWO_USERS_AND_A_SHAPE = '''
from locust import LoadTestShape, task
from rig.worker.load import TritonUser


class Lanes(TritonUser):  # no tasks of its own: the engine's fast lane
    weight = 1


class Tasks(TritonUser):
    weight = 1

    @task
    def one(self):
        self.infer({"INPUT": self.inputs_for()["INPUT"] * 3})


class TwoThenFour(LoadTestShape):
    def tick(self):
        t = self.get_run_time()
        return None if t > 4 else ((2 if t < 2 else 4), 100)
'''


def test_example_locustfile_runs_clean_and_fills_windows(tmp_path, runtime):
    res = tmp_path / "r"
    p = rig("soak", "--workload", str(ROOT / "workloads" / "checked.py"), "--users", "2", "--cycles", "1",
            "--workload-seconds", "3", "--window-seconds", "1", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    c = cycles(res)
    assert list(c.outcome) == ["clean"] and c.errors.iloc[0] == 0
    w = pd.read_parquet(res / "windows")
    assert len(w) == 3 and (w.requests > 0).all() and (w.errors == 0).all()
    assert (w.concurrency == 2).all()  # two task users, one request each


def test_a_failed_check_in_a_task_fails_the_cycle(tmp_path, runtime):
    """Positive control: the model answers, the task's check rejects every answer."""
    f = tmp_path / "strict.py"
    f.write_text(FAILING_CHECK)
    res = tmp_path / "r"
    p = rig("soak", "--workload", str(f), "--users", "1", "--cycles", "1", "--workload-seconds", "2",
            "--window-seconds", "1", "--results", str(res))
    assert p.returncode == 1, p.stdout + p.stderr
    c = cycles(res)
    assert c.load_outcome.iloc[0] == "errors"
    assert "AssertionError: OUTPUT should be negative" in c.detail.iloc[0]
    assert c.errors.iloc[0] > 0
    w = pd.read_parquet(res / "windows")
    assert w.errors.sum() > 0


def test_lane_users_task_users_and_a_shape_together(tmp_path, runtime):
    f = tmp_path / "mixed.py"
    f.write_text(TWO_USERS_AND_A_SHAPE)
    res = tmp_path / "r"
    p = rig("soak", "--workload", str(f), "--users", "9", "--cycles", "1", "--workload-seconds", "4",
            "--window-seconds", "1", "--results", str(res))
    assert p.returncode == 0, p.stdout + p.stderr
    w = pd.read_parquet(res / "windows").sort_values("window")
    assert (w.requests > 0).all()
    assert w.concurrency.iloc[0] == 2 and w.concurrency.iloc[-1] == 4  # the file's shape, not --users


@pytest.mark.parametrize("text, says", [
    ("def broken(:\n", "SyntaxError"),
    ("import no_such_module_here\n", "ModuleNotFoundError: No module named 'no_such_module_here'"),
    ("from locust import HttpUser, task\nclass U(HttpUser):\n    @task\n    def t(self): pass\n",
     "must subclass rig.worker.load.TritonUser"),
])
def test_a_bad_locustfile_is_one_line(tmp_path, text, says):
    f = tmp_path / "bad.py"
    f.write_text(text)
    p = rig("soak", "--workload", str(f), "--cycles", "1", "--results", str(tmp_path / "r"))
    assert p.returncode == 2
    assert says in p.stderr and "Traceback" not in p.stderr + p.stdout
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_missing_locustfile_and_rate_with_a_locustfile_are_refused(tmp_path):
    p = rig("soak", "--workload", str(tmp_path / "nope.py"), "--results", str(tmp_path / "r"))
    assert p.returncode == 2 and "does not exist" in p.stderr
    p = rig("soak", "--workload", str(ROOT / "workloads" / "checked.py"), "--rate", "100",
            "--results", str(tmp_path / "r"))
    assert p.returncode == 2 and "closed loop" in p.stderr


def test_locusts_spawn_rate_warning_stays_out_of_the_workers_log():
    """The rig starts its users at once (spawn rate users x 100); Locust's warning about rates
    above 100 is dropped, so that a crashed worker's log tail (its cycle's detail) opens with
    the reason, not with that warning. Other warnings of Locust's runners still pass. In a
    process of its own: importing Locust monkey-patches the process for gevent (this one's
    threads, the S3 tests' server among them, would become greenlets)."""
    import subprocess
    import sys

    code = """
import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(name)s: %(message)s")
from locust import User, constant, task
from locust.env import Environment
import rig.worker.load.runner  # installs the filter

class Idle(User):
    wait_time = constant(1)

    @task
    def nothing(self):
        pass

runner = Environment(user_classes=[Idle]).create_local_runner()
runner.start(2, spawn_rate=200)
runner.quit()
logging.getLogger("locust.runners").warning("another warning of the runner's")
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "spawn rate is very high" not in p.stdout + p.stderr
    assert "another warning of the runner's" in p.stdout

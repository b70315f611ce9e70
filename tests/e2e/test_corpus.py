"""Models written the way real teams write them (``tests/corpus/``), each soaked in its own
repository through both engines, as a user would run it:

    rig soak --model-repository R --cycles 1 --workload steady --users 2 --workload-seconds 2

Two verdicts per cycle: the lifecycle's (``outcome``) and the load's (``load_outcome``). A model
that fails its requests must never hide what the stop did, nor lose the cycle (no ``hung`` for a
model that only fails to answer), and every failure's words are the model's own. The capi engine
runs here; the official engine's runs are marked ``official`` (CI runs them in the sandbox).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers import ROOT, cycles, rig
from rig.worker.engines.official import loader

CORPUS = ROOT / "tests" / "corpus"
SOAK = ("--cycles", "1", "--workload", "steady", "--users", "2", "--workload-seconds", "2",
        "--exit-timeout", "5", "--request-timeout", "3")

_OFFICIAL = loader.bindings_library() is not None
ENGINES = [pytest.param("capi", marks=pytest.mark.slow),
           pytest.param("tritonserver", marks=[pytest.mark.slow, pytest.mark.official, pytest.mark.skipif(
               not _OFFICIAL, reason="the tritonserver bindings are not installed here; run these tests in "
                                     "the sandbox: bash tests/sandbox/official.sh")])]


def soak(tmp_path, engine: str, model: str, *extra: str, env: dict | None = None,
         results: str = "results") -> tuple[pd.Series, pd.DataFrame]:
    res = tmp_path / results
    p = rig("soak", "--model-repository", str(CORPUS / model), "--engine", engine, *SOAK, *extra,
            "--results", str(res), env=env, timeout=400)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    c = cycles(res)
    assert len(c) == 1, p.stdout
    w = pd.read_parquet(res / "windows") if (res / "windows").exists() else pd.DataFrame()
    row = c.iloc[0]
    print(p.stdout.splitlines()[-12:])
    return row, w


def messages(row) -> dict:
    return json.loads(row.error_messages) if isinstance(row.error_messages, str) else {}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model, words", [
    ("raises_name_error", "NameError: name 'scale' is not defined"),
    ("raises_value_error_some", "ValueError: batch"),
])
def test_a_model_that_raises_in_execute_shows_both_verdicts(tmp_path, engine, model, words):
    """Under two users the Python backend keeps a model whose execute raised loaded (server#7481
    class): the stop waits out exit_timeout and finalize never runs. The requests' errors are the
    load's verdict and never hide that."""
    row, w = soak(tmp_path, engine, model)
    assert row.outcome == "exit_timeout", row.detail
    assert row.load_outcome == "errors"
    assert row.stop_latency_s >= 5.0
    assert row.finalize_before_stop == 0
    assert any(words in m for m in messages(row)), messages(row)
    assert "server#7481" in row.detail
    assert int(w.errors.sum()) >= 1


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", ["returns_none", "returns_list_of_none"])
def test_a_model_that_never_answers_loses_no_cycle_and_its_requests_are_counted(tmp_path, engine, model):
    row, w = soak(tmp_path, engine, model)
    assert row.outcome != "hung", row.detail
    assert row.outcome in ("clean", "exit_timeout"), row.detail  # the stop measured either way
    assert row.stop_latency_s is not None and row.stop_latency_s > 0
    assert row.load_outcome == "timeouts"
    assert row.timeouts >= 1 and row.errors >= row.timeouts
    assert any("within 3 s" in m or "within 3.0 s" in m for m in messages(row)), messages(row)
    # every unanswered request of the workload is in a window (the reference request precedes them)
    assert int(w.timeouts.sum()) >= row.timeouts - 1
    assert row.workload_s < 3 * (2 + 3), "the workload ends on time: its length plus the request timeout"


@pytest.mark.parametrize("engine", ENGINES)
def test_error_responses_are_the_loads_verdict_and_the_stop_is_clean(tmp_path, engine):
    row, w = soak(tmp_path, engine, "error_responses")
    assert (row.outcome, row.load_outcome) == ("clean", "errors")
    assert row.finalize_before_stop == 1
    assert any("tokenizer vocabulary missing: vocab.txt" in m for m in messages(row)), messages(row)
    assert int(w.errors.sum()) == row.errors - 1  # all but the reference request, in windows


@pytest.mark.parametrize("engine", ENGINES)
def test_a_queue_policy_that_rejects_is_counted_as_errors(tmp_path, engine):
    row, _ = soak(tmp_path, engine, "queue_timeout_rejects")
    assert row.outcome == "clean", row.detail
    assert row.load_outcome == "errors"
    assert any("Request timeout expired" in m for m in messages(row)), messages(row)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_stub_that_kills_itself_in_initialize_is_load_failed_in_its_own_words(tmp_path, engine):
    row, _ = soak(tmp_path, engine, "kills_stub_in_initialize")
    assert (row.outcome, row.load_outcome) == ("load_failed", "not_measured")
    assert "CUDA context could not be created" in row.detail


@pytest.mark.parametrize("engine", ENGINES)
def test_a_model_that_needs_the_users_environment(tmp_path, engine):
    import os

    assert "MODEL_THRESHOLD" not in os.environ
    row, _ = soak(tmp_path, engine, "needs_env_var")
    assert row.outcome == "load_failed" and "KeyError: 'MODEL_THRESHOLD'" in row.detail
    row, _ = soak(tmp_path, engine, "needs_env_var", env={"MODEL_THRESHOLD": "0.5"}, results="with-env")
    assert (row.outcome, row.load_outcome) == ("clean", "ok"), row.detail


@pytest.mark.parametrize("engine", ENGINES)
def test_the_positive_control_of_a_raising_execute(tmp_path, engine):
    """``--fault execute-raises``: the template model raises in every third execute."""
    res = tmp_path / "r"
    p = rig("soak", "--fault", "execute-raises", "--engine", engine, *SOAK, "--results", str(res), timeout=400)
    assert p.returncode == 1, p.stdout + p.stderr
    row = cycles(res).iloc[0]
    assert (row.outcome, row.load_outcome) == ("exit_timeout", "errors"), row.detail
    assert "FAIL: outcomes not allowed: exit_timeout=1" in p.stdout
    assert "FAIL: load outcomes not allowed: errors=1" in p.stdout
    # allowed, each verdict by its own name
    p = rig("soak", "--fault", "execute-raises", "--engine", engine, *SOAK, "--results", str(res),
            "--allow-outcomes", "exit_timeout,errors", "--allow-leaks", timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr

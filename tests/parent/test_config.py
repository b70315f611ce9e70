"""Config: defaults < TOML < options; bad files are one clear error before anything starts."""

from __future__ import annotations

import pytest

from rig.parent.config import RunConfig, from_toml_text, load
from rig.common.errors import RigError


def test_file_then_overrides(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('cycles = 20\nretain = "last-response"\n[thresholds]\nmax_stop_latency_s = 5\n'
                 '[workload]\nname = "steady"\nusers = 2\n')
    cfg = load(str(f), {"cycles": 3, "workload.users": None, "thresholds.allow_leaks": True})
    assert cfg.cycles == 3 and cfg.retain == "last-response"
    assert cfg.thresholds.max_stop_latency_s == 5.0 and cfg.thresholds.allow_leaks
    assert cfg.workload.name == "steady" and cfg.workload.users == 2


def test_round_trip_through_stored_text():
    cfg = RunConfig(cycles=7, retain="last-array", model_repository="/m")
    again = from_toml_text(cfg.to_toml())
    assert again == cfg


@pytest.mark.parametrize("text, words", [
    ("cycles = ", "not valid TOML"),
    ("cycle = 3", "unknown key 'cycle'"),
    ("cycles = 'many'", "must be int"),
    ('retain = "everything"', "retain must be one of"),
    ("[thresholds]\nmin_finalize_success = 2", "fraction"),
    ("[workload]\nspeed = 1", "unknown key 'speed'"),
])
def test_bad_files(tmp_path, text, words):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(RigError) as e:
        load(str(f))
    assert words in str(e.value)


def test_bench_windows_default_to_perf_analyzers_interval_unless_told(tmp_path):
    """bench's windows: --window-seconds, else the config file's, else 5 s (not the soak's 1 s)."""
    from rig.workflows.bench import BENCH_WINDOW_S, window_length
    from rig.parent.config import file_sets

    sets, dashed, other = tmp_path / "a.toml", tmp_path / "b.toml", tmp_path / "c.toml"
    sets.write_text("[workload]\nwindow_seconds = 0.5\n")
    dashed.write_text("[workload]\nwindow-seconds = 2\n")
    other.write_text("cycles = 3\n[workload]\nusers = 2\n")
    assert BENCH_WINDOW_S == 5.0
    assert file_sets(str(sets), "workload", "window_seconds") and file_sets(str(dashed), "workload", "window_seconds")
    assert not file_sets(str(other), "workload", "window_seconds") and not file_sets(None, "workload", "window_seconds")
    assert window_length(None, None, 1.0) == 5.0
    assert window_length(None, str(other), load(str(other)).workload.window_seconds) == 5.0
    assert window_length(None, str(sets), load(str(sets)).workload.window_seconds) == 0.5
    assert window_length(2.5, str(sets), 2.5) == 2.5 and window_length(0.25, None, 0.25) == 0.25


@pytest.mark.parametrize("overrides, words", [
    ({"engine": "tensorrt"}, "engine must be one of"),
    ({"stop_strategy": "kill"}, "stop_strategy must be one of"),
    ({"restart": "never"}, "restart must be one of"),
    ({"workload.name": "burst"}, "workload.name must be one of"),
    ({"workload.arrivals": "uniform"}, "arrivals must be one of poisson, constant"),
    ({"workload.seconds": 0}, "must be > 0"),
    ({"workload.window_seconds": -1.0}, "must be > 0"),
    ({"workload.users": 0}, "users and in_flight >= 1"),
    ({"workload.in_flight": 0}, "users and in_flight >= 1"),
    ({"workload.rate": 0.0}, "must be > 0"),
    ({"cycles": 0}, "cycles must be >= 1"),
    ({"requests": -1}, "requests >= 0"),
    ({"exit_timeout": -5}, "exit_timeout >= 0"),
    ({"model": "tensorflow"}, "model must be one of"),
    ({"thresholds.min_finalize_success": -0.1}, "fraction"),
    ({"cycles": True}, "cycles must be int"),
    ({"cycles": 2.5}, "cycles must be int"),
    ({"retain": 1}, "retain must be one of none, last-response, last-array"),
    ({"thresholds.allow_leaks": "yes"}, "allow_leaks must be bool"),
    ({"thresholds": 3}, "thresholds must be a table"),
    ({"workload.nope": 1}, "unknown key 'nope'"),
])
def test_bad_options_are_one_rig_error(overrides, words):
    with pytest.raises(RigError) as e:
        load(None, overrides)
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_options_coerce_and_skip_none():
    cfg = load(None, {"exit-timeout": 5, "request_timeout": 2, "workload.rate": 10, "cycles": None,
                      "model": "tensorflow", "model_repository": "/models"})
    assert cfg.exit_timeout == 5 and cfg.cycles == 1
    assert cfg.request_timeout == 2.0 and isinstance(cfg.request_timeout, float)
    assert cfg.workload.rate == 10.0 and isinstance(cfg.workload.rate, float)
    assert cfg.model == "tensorflow", "any model name goes with a repository of one's own"


def test_to_toml_escapes_and_omits_none():
    cfg = RunConfig(model_repository='C:\\models "x"', results="r")
    text = cfg.to_toml()
    keys = [line.split(" = ")[0] for line in text.splitlines() if " = " in line]
    assert "runtime" not in keys and "rate" not in keys and "max_stop_latency_s" not in keys  # None: left out
    assert "dynamic_batching = false" in text and "[workload]" in text and "[thresholds]" in text
    again = from_toml_text(text)
    assert again == cfg and again.model_repository == 'C:\\models "x"'


def test_stored_config_is_validated_too():
    with pytest.raises(RigError, match="retain must be one of"):
        from_toml_text('retain = "forever"\n')
    with pytest.raises(RigError, match="stored config: unknown key"):
        from_toml_text("speed = 1\n")


def test_outcomes_and_option_values_are_literals_the_config_enforces():
    import typing

    from rig.parent import config as config_mod
    from rig.contract.verdicts import OUTCOMES, Outcome

    assert tuple(OUTCOMES) == typing.get_args(Outcome)
    assert config_mod.RETAIN == ("none", "last-response", "last-array")
    with pytest.raises(RigError, match="retain must be one of none, last-response, last-array"):
        config_mod.load(None, {"retain": "everything"})
    with pytest.raises(RigError, match="arrivals must be one of poisson, constant"):
        config_mod.load(None, {"workload.arrivals": "bursty"})

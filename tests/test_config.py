"""Config: defaults < TOML < options; bad files are one clear error before anything starts."""

from __future__ import annotations

import pytest

from rig.config import RunConfig, from_toml_text, load
from rig.errors import RigError


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
    from rig.bench import BENCH_WINDOW_S, window_length
    from rig.config import file_sets

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

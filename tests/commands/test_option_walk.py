"""Every option of every subcommand, walked: each is put where it cannot apply and must be
refused in one line, or, where no such case exists, must reach the run's configuration.

A new option without an entry here fails ``test_every_option_is_walked``: the contract is
checked for all of them, not only the ones known to have been ignored once."""

from __future__ import annotations

import argparse
import re
import signal

import pytest

from helpers import ROOT
from rig import cli

from rig.parent import options
from rig.common.errors import Exit

REPO = "--model-repository"
WL = ("--workload", "steady")

# option -> the arguments (beside the option itself and its value) of a case where it cannot
# apply, and a piece of the one-line refusal
REFUSED = {
    "--model": ((REPO, "REPO"), "--model-repository runs your own"),
    "--model-size": ((REPO, "REPO"), "--model-repository runs your own"),
    "--instances": ((REPO, "REPO"), "--model-repository runs your own"),
    "--max-batch-size": ((REPO, "REPO"), "--model-repository runs your own"),
    "--dynamic-batching": ((), "--max-batch-size"),
    "--queue-delay-us": (("--max-batch-size", "4"), "--dynamic-batching"),
    "--fault": ((REPO, "REPO"), "--model-repository runs your own"),
    "--execute-delay-ms": ((REPO, "REPO"), "--model-repository runs your own"),
    "--requests": (WL, "a workload runs for"),
    "--requests-in-flight": (WL, "a workload keeps"),
    "--restart": ((), "this run has one cycle"),
    "--workload-seconds": ((), "add --workload steady"),
    "--users": (("--rate", "5"), "--rate runs one open-loop lane"),
    "--in-flight": (("--rate", "5"), "--rate runs one open-loop lane"),
    "--locust-web-port": (("--rate", "5"), "--rate runs one open-loop lane"),
    "--arrivals": (WL, "not to Locust users"),
    "--seed": (WL, "not to Locust users"),
    "--window-seconds": ((), "add --workload steady"),
    "--locust-master": (("--users", "3"), "come(s) from the `rig fleet` master"),
    "--server-stats": ((), "add --workload steady"),
}

VALUES = {  # a valid value for each option that takes one
    "--config": None, "--runtime": "0.7.0", "--engine": "capi", "--model": "numpy", REPO: "REPO",
    "--model-size": "8", "--instances": "2", "--max-batch-size": "4", "--fault": "finalize-raises",
    "--execute-delay-ms": "3", "--cycles": "3", "--requests": "7", "--requests-in-flight": "4", "--retain": "last-response",
    "--stop-strategy": "unload-then-stop", "--restart": "same-process", "--exit-timeout": "9",
    "--startup-timeout": "11", "--request-timeout": "13", "--results": "RESULTS", "--workload": "spike",
    "--workload-seconds": "6", "--users": "5", "--in-flight": "2", "--rate": "40", "--arrivals": "constant",
    "--window-seconds": "0.5", "--seed": "17", "--locust-web-port": "8123", "--max-stop-latency": "3.5",
    "--max-memory-growth": "65536", "--max-slowdown": "25", "--memory-samples": "off", "--server-stats": "off",
    "--min-finalize-success": "0.75", "--allow-outcomes": "clean,exit_timeout", "--resume": None,
    "--skip-ok": None, "--allow-leaks": None, "--dynamic-batching": None, "--queue-delay-us": "200",
    "--locust-master": "127.0.0.1:5557", "--node": "n1", "--input-data": "zero", "--input-memory": "cpu", "--shape": "X:2,3",
    "--scenario": "stub-exits", "--control": None, "--model-shape": "decoupled,instances-2",
}

# option -> (extra arguments, where the value lands in the effective config)
APPLIES = {
    "--runtime": ((), lambda c: c.runtime == "0.7.0"),
    "--engine": ((), lambda c: c.engine == "capi"),
    "--model": ((), lambda c: c.model == "numpy"),
    REPO: ((), lambda c: c.model_repository.endswith("REPO")),
    "--model-size": ((), lambda c: c.model_size == 8),
    "--instances": ((), lambda c: c.instances == 2),
    "--max-batch-size": ((), lambda c: c.max_batch_size == 4),
    "--dynamic-batching": (("--max-batch-size", "4"), lambda c: c.dynamic_batching is True),
    "--queue-delay-us": (("--max-batch-size", "4", "--dynamic-batching"), lambda c: c.queue_delay_us == 200),
    "--fault": ((), lambda c: c.fault == "finalize-raises"),
    "--execute-delay-ms": ((), lambda c: c.execute_delay_ms == 3),
    "--cycles": ((), lambda c: c.cycles == 3),
    "--requests": ((), lambda c: c.requests == 7),
    "--requests-in-flight": ((), lambda c: c.requests_in_flight == 4),
    "--retain": ((), lambda c: c.retain == "last-response"),
    "--scenario": ((), lambda c: c.scenario == "stub-exits" and c.fault == "stub-exits"),
    "--control": (("--scenario", "stub-exits"), lambda c: c.control is True and c.fault == "none"),
    "--model-shape": ((), lambda c: c.model_shape == "decoupled,instances-2" and c.instances == 2 and c.decoupled),
    "--stop-strategy": ((), lambda c: c.stop_strategy == "unload-then-stop"),
    "--restart": (("--cycles", "2"), lambda c: c.restart == "same-process"),
    "--exit-timeout": ((), lambda c: c.exit_timeout == 9),
    "--startup-timeout": ((), lambda c: c.startup_timeout == 11),
    "--request-timeout": ((), lambda c: c.request_timeout == 13),
    "--results": ((), lambda c: str(c.results).endswith("RESULTS")),
    "--workload": ((), lambda c: c.workload.name == "spike"),
    "--workload-seconds": (WL, lambda c: c.workload.seconds == 6),
    "--users": (WL, lambda c: c.workload.users == 5),
    "--in-flight": (WL, lambda c: c.workload.in_flight == 2),
    "--rate": ((), lambda c: c.workload.rate == 40 and c.workload.name == "steady"),
    "--arrivals": (("--rate", "5"), lambda c: c.workload.arrivals == "constant"),
    "--window-seconds": (WL, lambda c: c.workload.window_seconds == 0.5),
    "--seed": (("--rate", "5"), lambda c: c.workload.seed == 17),
    "--locust-web-port": (WL, lambda c: c.workload.web_port == 8123),
    "--max-stop-latency": ((), lambda c: c.thresholds.max_stop_latency_s == 3.5),
    "--min-finalize-success": ((), lambda c: c.thresholds.min_finalize_success == 0.75),
    "--allow-leaks": ((), lambda c: c.thresholds.allow_leaks is True),
    "--max-memory-growth": ((), lambda c: c.thresholds.max_memory_growth == 65536.0),
    "--max-slowdown": ((), lambda c: c.thresholds.max_slowdown == 25.0),
    "--memory-samples": ((), lambda c: c.memory_samples is False),
    "--server-stats": (WL, lambda c: c.server_stats is False),
    "--allow-outcomes": ((), lambda c: c.thresholds.allow_outcomes == "clean,exit_timeout"),
    "--locust-master": ((), lambda c: c.workload.master == "127.0.0.1:5557" and c.workload.name == "steady"),
    "--node": ((), lambda c: c.node == "n1"),
    "--input-data": ((), lambda c: c.input_data == "zero"),
    "--input-memory": ((), lambda c: c.input_memory == "cpu"),
    "--shape": ((), lambda c: c.shapes == "X:2,3"),
}

# Options whose contract another test holds (named here, so the walk still covers them)
ELSEWHERE = {
    "--config": "test_cli.py::test_allow_outcomes_is_a_key_of_the_config_file_too (a TOML file's keys)",
    "--resume": "test_cli.py::test_a_resumed_run_refuses_options_it_would_ignore; test_soak (resume runs)",
    "--skip-ok": "test_skip_ok_turns_a_skip_into_success below",
    "--cpus": "test_capacity.py::test_a_share_larger_than_the_machine_is_refused_before_anything_runs, "
              "::test_a_held_process_and_what_it_starts_keep_the_share, "
              "::test_a_bench_held_to_one_cpu_records_its_share_and_its_stubs_keep_it (slow)",
    "--cpu-idle": "e2e/test_fleet.py::test_two_nodes_one_killed_mid_run (a node held: runs.cpu_idle, its log "
                  "line; slow), test_capacity.py (a held fleet labelled)",
    "--junit": "test_junit.py (a bad path refused in one line before the run; a real soak's file validated)",
    "--summary-json": "test_summary_json.py (a bad path refused in one line before the run; a real soak's file "
                      "held to its stored cycles, slow)",
}


def _options(command: str) -> dict[str, argparse.Action]:
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {s: a for a in sub.choices[command]._actions for s in a.option_strings
            if s.startswith("--") and s != "--help" and a.help != argparse.SUPPRESS}


def _argv(option: str, tmp_path) -> list[str]:
    value = VALUES[option]
    return [option] if value is None else [option, str(tmp_path / value) if value in ("REPO", "RESULTS")
                                           else value]


def _fill(extra, tmp_path) -> list[str]:
    return [str(tmp_path / x) if x in ("REPO", "RESULTS") else x for x in extra]


@pytest.fixture(autouse=True)
def _keep_sigterm():
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


@pytest.mark.parametrize("command", ["cycle", "soak"])
def test_every_option_is_walked(command):
    missing = set(_options(command)) - set(REFUSED) - set(APPLIES) - set(ELSEWHERE)
    assert not missing, f"options of `rig {command}` with no contract in this walk: {sorted(missing)}"


def _cases(kind):
    table = REFUSED if kind == "refused" else APPLIES
    return [(c, o) for c in ("cycle", "soak") for o in table if o in _options(c)]


@pytest.mark.parametrize("command, option", _cases("refused"))
def test_an_option_where_it_cannot_apply_is_refused_in_one_line(command, option, tmp_path, capsys):
    extra, says = REFUSED[option]
    (tmp_path / "REPO").mkdir()
    code = cli.main([command, *_argv(option, tmp_path), *_fill(extra, tmp_path),
                     "--results", str(tmp_path / "RESULTS")])
    err = capsys.readouterr().err.strip()
    assert code == 2, f"`rig {command} {option}` where it cannot apply was not refused: {err}"
    assert len(err.splitlines()) == 1 and option in err and says in err, err
    assert not (tmp_path / "RESULTS").exists(), "a refused run wrote results"


@pytest.mark.parametrize("command, option", _cases("applies"))
def test_an_option_that_applies_reaches_the_run(command, option, tmp_path):
    extra, landed = APPLIES[option]
    argv = [command, *_argv(option, tmp_path), *_fill(extra, tmp_path)]
    if "--cycles" not in argv:
        argv += ["--cycles", "2"]
    cfg = options.run_config(cli.build_parser().parse_args(argv))
    assert cfg is not None and landed(cfg), f"`rig {' '.join(argv[:3])}` did not reach the config"


def test_skip_ok_turns_a_skip_into_success(capsys):
    from rig.parent.preflight import cupy_usable

    if cupy_usable()[0]:
        pytest.skip("this machine has CuPy and a GPU: the cupy model runs, nothing is skipped")
    assert cli.main(["soak", "--model", "cupy"]) == Exit.SKIPPED
    assert cli.main(["soak", "--model", "cupy", "--skip-ok"]) == 0
    assert "skipped" in capsys.readouterr().out


def test_bench_reads_every_option_it_offers():
    """bench's own options (points, windows, comparison) are read by rig/commands/bench.py; the ones it
    shares with soak go through the same config as above."""
    source = (ROOT / "rig" / "commands" / "bench.py").read_text()
    shared = set(REFUSED) | set(APPLIES) | set(ELSEWHERE)
    for option, action in _options("bench").items():
        if option in shared:
            continue
        assert re.search(rf"args\.{action.dest}\b", source), f"`rig bench {option}` is read nowhere"


@pytest.mark.parametrize("command", ["report", "gate", "capacity", "compact", "check", "runtime"])
def test_the_commands_over_stored_results_read_every_option_they_offer(command):
    """Their refusals of bad values are tested with each command (tests/analysis/test_report.py,
    test_gate.py, test_capacity.py, test_store_scale.py); here: none is offered and left unread."""
    module = ROOT / "rig" / "commands" / f"{command}.py"
    source = _with_its_library(module)
    for option, action in _options(command).items():
        assert re.search(rf"args\.{action.dest}\b|\"{action.dest}\"", source), \
            f"`rig {command} {option}` is read nowhere in {module.name} or the library it calls"


def _with_its_library(module, depth: int = 2) -> str:
    """A thin command's source and that of the rig modules it imports (its library reads the args it
    is handed), ``depth`` imports deep."""
    seen, todo, texts = set(), [module], []
    for _ in range(depth + 1):
        nxt = []
        for path in todo:
            if path in seen or not path.exists():
                continue
            seen.add(path)
            text = path.read_text()
            texts.append(text)
            for m in re.finditer(r"^\s*from (rig(?:\.\w+)+) import ([\w, ]+)", text, re.M):
                base = ROOT.joinpath(*m.group(1).split("."))
                nxt.append(base.with_suffix(".py"))
                nxt += [base / f"{name.strip()}.py" for name in m.group(2).split(",")]
        todo = nxt
    return "\n".join(texts)


@pytest.mark.parametrize("option", [o for o in REFUSED if o in _options("bench")
                                    and (REFUSED[o][0] == (REPO, "REPO") or o == "--dynamic-batching")])
def test_bench_refuses_the_shared_options_where_they_cannot_apply(option, tmp_path, capsys):
    extra, says = REFUSED[option]
    (tmp_path / "REPO").mkdir()
    code = cli.main(["bench", *_argv(option, tmp_path), *_fill(extra, tmp_path),
                     "--results", str(tmp_path / "RESULTS")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and option in err and says in err, err
    assert not (tmp_path / "RESULTS").exists()

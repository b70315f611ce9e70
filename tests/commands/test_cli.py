"""The command line as a contract: an option either takes effect or is refused in one line."""

from __future__ import annotations

import pytest

from rig import cli

from rig.parent import options


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("option", [["--users", "3"], ["--in-flight", "2"], ["--workload-seconds", "5"],
                                    ["--window-seconds", "2"], ["--arrivals", "constant"], ["--seed", "4"],
                                    ["--locust-web-port", "8089"]])
def test_a_workload_option_without_a_workload_is_refused(capsys, tmp_path, option):
    code, out, err = run(capsys, "soak", *option, "--results", str(tmp_path))
    assert code == 2 and option[0] in err and "add --workload steady" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_rate_alone_means_an_open_loop():
    from rig.parent import config

    args = cli.build_parser().parse_args(["cycle", "--rate", "50"])
    cfg = options.run_config(args)
    assert cfg.workload.name == "steady" and cfg.workload.rate == 50.0
    assert isinstance(cfg, config.RunConfig)


@pytest.mark.parametrize("option", [["--retain", "last-response"], ["--exit-timeout", "5"],
                                    ["--workload", "steady"], ["--rate", "10"], ["--max-stop-latency", "3"]])
def test_a_resumed_run_refuses_options_it_would_ignore(capsys, tmp_path, option):
    code, out, err = run(capsys, "soak", "--resume", "20260101T000000-abcdef", *option, "--results", str(tmp_path))
    assert code == 2 and option[0] in err and "keeps the options it was started with" in err


def test_bench_refuses_what_it_does_not_use(capsys):
    for option in (["--cycles", "3"], ["--retain", "last-array"], ["--max-stop-latency", "1"], ["--restart", "same-process"]):
        code, out, err = run(capsys, "bench", *option)
        assert code == 2 and "unrecognized arguments" in err


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["soak", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--engine {auto,capi,tritonserver} (default auto)", "(default fresh-process)",
                  "(default stop)", "--users USERS (default 1)", "--seed SEED (default 0)"):
        assert words in text, words


def test_allow_outcomes_is_a_key_of_the_config_file_too(tmp_path, capsys):
    from rig.parent import config
    from rig.workflows import soak

    f = tmp_path / "n.toml"
    f.write_text('[thresholds]\nallow_outcomes = "clean,exit_timeout"\n')
    cfg = config.load(str(f))
    assert soak.allowed_outcomes(cfg, ("clean",)) == ("clean", "exit_timeout")
    f.write_text('[thresholds]\nallow_outcomes = "clean,sometimes"\n')
    code, out, err = run(capsys, "soak", "--config", str(f), "--results", str(tmp_path / "r"))
    assert code == 2 and "unknown outcome(s) sometimes" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "runs").exists()


@pytest.mark.parametrize("argv, says", [
    (["cycle", "--model-repository", "/nonexistent", "--fault", "finalize-raises"], "--fault shape(s) the rig's template"),
    (["soak", "--model-repository", "/x", "--instances", "2", "--model", "numpy"], "--model, --instances shape(s)"),
    (["soak", "--workload", "steady", "--requests", "50"], "--requests counts the requests of a cycle without"),
    (["soak", "--rate", "100", "--users", "4"], "--users apply to Locust users"),
    (["soak", "--workload", "steady", "--rate", "100", "--locust-web-port", "8089"], "--locust-web-port apply"),
    (["cycle", "--workload", "steady", "--arrivals", "constant"], "--arrivals apply to an open loop"),
    (["cycle", "--workload", "ramp", "--seed", "3"], "--seed apply to an open loop"),
    (["bench", "--rates", "100,200", "--in-flight", "2"], "--in-flight apply to closed-loop points"),
    (["bench", "--rates", "100", "--compare", "perf-analyzer"], "use --concurrency"),
    (["bench", "--concurrency", "1,2", "--seed", "3"], "--seed apply to open-loop points"),
    (["bench", "--concurrency", "1,3", "--in-flight", "2"], "does not divide the point(s) 1, 3"),
    (["cycle", "--dynamic-batching"], "--dynamic-batching batches requests up to --max-batch-size"),
])
def test_an_option_that_cannot_apply_is_refused_in_one_line(capsys, tmp_path, argv, says):
    code, out, err = run(capsys, *argv, "--results", str(tmp_path / "r"))
    assert code == 2 and says in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r" / "runs").exists()


def test_the_exit_codes_the_readme_and_help_give_are_the_codes():
    """One table of exit statuses (rig.common.errors.Exit): the README's and `rig --help`'s say the same."""
    import re

    from helpers import ROOT
    from rig.common.errors import Exit

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert [int(c) for c in re.findall(r"^\| (\d+) \|", section, re.M)] == [int(e) for e in Exit]
    epilog = " ".join(cli.build_parser().epilog.split())
    assert [int(c) for c in re.findall(r"(?:^exit status:|;) (\d+) ", epilog)] == [int(e) for e in Exit]


def test_no_command_is_usage_and_bad_input_one_line(capsys):
    assert run(capsys, )[0] == 2
    code, out, err = run(capsys, "soak", "--engine", "tensorrt")
    assert code == 2 and err.startswith("rig: error: argument --engine: invalid choice: 'tensorrt'")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow  # a process of its own: the end-to-end tier
def test_doctor_says_what_is_usable_here_and_why_not():
    """Each line of `rig doctor`, against what this machine has (asked here, in the same ways)."""
    import platform
    import sys
    from importlib.metadata import version

    from helpers import rig
    from rig.parent import runtime
    from rig.common import cpuidle
    from rig.parent import engines
    from rig.common import probes
    from rig.parent.preflight import cupy_usable

    p = rig("doctor", timeout=120)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    lines = p.stdout.splitlines()
    assert [ln[:12].strip() for ln in lines if not ln.startswith("runtime")] == \
        ["python", "libpython", "engine", "engine", "gpu", "versions", "versions", "cpu idle", "cupy", "locust"], \
        "every check, in order, no conflict"
    assert lines[0] == f"python      {platform.python_version()} ({sys.executable})"
    assert "libpython   " + (runtime.libpython_problem() or "found: the backend stubs of the embedded and built cores "
                              "can start") in lines
    said = set(lines)
    if runtime.container_home() is None:
        assert "runtime     container: none (/opt/tritonserver missing, TRITON_HOME unset)" in said
    installed = runtime.list_embedded()
    for r in installed:
        ok = runtime.python_tag() in r["stubs"]
        line = f"runtime     {r['name']}: Triton {r['triton_version']}"
        assert (line in said) if ok else any(ln.startswith(line + " (no stub for Python") for ln in lines), line
    if not installed:
        assert any(ln.startswith("runtime     embedded: none installed (`rig runtime install` adds") for ln in lines)
    ok, why = engines.official_probe()
    official = next(ln for ln in lines if ln.startswith("engine      tritonserver: "))
    if ok:
        assert official.startswith("engine      tritonserver: usable: over ") or "no runtime to pair it with" in official
    else:
        assert official == f"engine      tritonserver: unusable: {why}" and why
    assert "engine      capi: usable wherever a runtime's core loads (ctypes over tritonserver.h)" in said
    gpu = probes.Gpu()
    assert (f"gpu         NVML: {gpu.name}" if gpu.available else f"gpu         none: {gpu.why}") in said
    assert gpu.available or gpu.why, "no GPU here: the line says why"
    assert any(ln.startswith(f"cpu idle    driver {cpuidle.idle_driver() or 'unknown'}: rig bench ") for ln in lines)
    ok, why = cupy_usable()
    assert (f"cupy        usable: {why}" if ok else f"cupy        unusable: {why} (the cupy model is skipped)") in said
    assert lines[-1] == f"locust      {version('locust')}"


def test_one_registry_names_every_command_in_the_help_order():
    """rig.cli.registry is the one list of commands: the parser has exactly its commands, lists the
    shown ones in its order, and hides the processes the rig starts (worker, cell)."""
    from rig.cli import build_parser, registry

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = [name for name, _, _ in registry()]
    assert list(sub.choices) == names
    shown = [name for name, _, listed in registry() if listed]
    assert [a.dest for a in sub._choices_actions] == shown and sub.metavar == "{" + ",".join(shown) + "}"
    assert {"worker", "cell"} == set(names) - set(shown)
    import rig.commands

    assert not hasattr(rig.commands, "NAMES") and not hasattr(rig.commands, "add_parsers")

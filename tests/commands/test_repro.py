"""`rig repro`: the scenarios it covers and those it refuses (one line naming what to run instead), bad
input in one line, the folder it writes (models with their own finalize evidence, a script joined from
its parts that imports no rig, run.sh and a README free of this machine's paths), the script's pure
parts; and, slow, a reproducer made on the embedded default core that reproduces exit_timeout by
itself, copied elsewhere with nothing of the rig on the path."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from rig import cli
from rig.commands import repro, repro_models, repro_readme, repro_script
from rig.commands import repro_evidence as repro_evidence
from rig.commands import repro_main as repro_main
from rig.contract.runtime import BuiltRuntime, EmbeddedRuntime

NO_RIG_IMPORT = re.compile(r"^\s*(import\s+rig\b|from\s+rig\b)", re.M)


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_what_it_covers_and_what_it_refuses():
    names = repro.covered_names()
    for name in ("retained-response", "retained-array", "finalize-raises", "stub-exits", "execute-raises", "baseline",
                 "sender-kept", "bls-in-flight", "metrics", "missing-model-py",
                 "ready-stub-dead", "stop-in-flight", "stop-while-loading", "refused-request", "ensemble-in-flight",
                 "sequence-at-stop"):
        assert name in names
    for name in ("reload", "worker-killed", "memory", "leaks-memory", "slows-down", "metrics-reload",
                 "shm-after-forced-stop", "sender-after-return"):
        assert name not in names


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--scenario", "leaks-memory"], "rig repro does not cover leaks-memory: its verdict is a growth measure"),
        (["--scenario", "reload"], "it needs a restart mode (reload"),
        (["--scenario", "worker-killed"], "kills the server's process"),
        (["--scenario", "no-such"], "unknown scenario 'no-such'"),
        (["--scenario", "finalize-raises", "--shape", "batched"], "--shape batched: scenario finalize-raises runs in"),
        (["--scenario", "template", "--control"], "has no negative control"),
    ],
)
def test_bad_input_is_one_line(capsys, tmp_path, argv, words):
    code, out, err = run(capsys, "repro", *argv, "--runtime", "0.7.0", "--out", str(tmp_path / "r"))
    assert code == 2 and words in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
    if "does not cover" in err:
        assert "run it with rig soak --scenario" in err


def test_a_folder_in_use_or_a_runtime_not_installed_is_refused(capsys, tmp_path, monkeypatch):
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("")
    code, _, err = run(capsys, "repro", "--scenario", "retained-response", "--runtime", "0.7.0", "--out", str(used))
    assert code == 2 and "is not an empty folder" in err
    monkeypatch.setenv("RIG_HOME", str(tmp_path / "home"))  # no runtime installed there
    code, _, err = run(capsys, "repro", "--scenario", "retained-response", "--runtime", "0.5.10", "--out",
                       str(tmp_path / "new"))
    assert code == 2 and "not installed" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "new").exists()


def _cfg(scenario="retained-response", shape=None, control=False):
    return repro.cell_config(repro.scenario_of(scenario), control, shape, 5, "0.7.0")


def _embedded(stub_site="/site/numpy1") -> EmbeddedRuntime:
    return EmbeddedRuntime(name="embedded-0.7.0", triton_version="2.51.0", server_dir="/rt/py3.11",
                           core_library="/rt/py3.11/lib/libtritonserver.so", backend_dir="/rt/py3.11/backends",
                           library_path=("/py/lib", "/rt/wheel/libs", "/rt/py3.11/lib"), stub_site=stub_site)


def test_the_models_are_the_rigs_with_their_own_evidence(tmp_path):
    from rig.parent.repository import templates_dir

    cfg = _cfg(shape="batched")
    assert (cfg.retain, cfg.max_batch_size, cfg.dynamic_batching, cfg.requests_in_flight) == ("last-response", 8, True, 4)
    assert repro_models.write_models(repro.scenario_of("retained-response"), cfg, False, tmp_path / "models") == ["numpy"]
    config = (tmp_path / "models" / "numpy" / "config.pbtxt").read_text()
    assert "max_batch_size: 8" in config and "dynamic_batching" in config
    model = (tmp_path / "models" / "numpy" / "1" / "model.py").read_text()
    template = (templates_dir() / "numpy" / "1" / "model.py").read_text()
    assert model.startswith(template.rstrip("\n")) and model.endswith(repro_models.EVIDENCE_BLOCK)
    ast.parse(model)


def test_the_evidence_block_records_initialize_and_finalize(tmp_path, monkeypatch):
    """The template's model.py with the block, run outside Triton (a stand-in pb_utils): one JSON line
    per initialize and finalize, the error finalize raised on its end line."""
    cfg = _cfg(scenario="finalize-raises")
    repro_models.write_models(repro.scenario_of("finalize-raises"), cfg, False, tmp_path / "models")
    fake = types.ModuleType("triton_python_backend_utils")
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake)
    evidence = tmp_path / "evidence.jsonl"
    monkeypatch.setenv("REPRO_EVIDENCE", str(evidence))
    ns: dict = {"__name__": "model"}
    exec(compile((tmp_path / "models" / "numpy" / "1" / "model.py").read_text(), "model.py", "exec"), ns)
    model = ns["TritonPythonModel"]()
    config = (tmp_path / "models" / "numpy" / "config.pbtxt").read_text()
    params = dict(re.findall(r'key: "(\w+)" value: \{ string_value: "([^"]*)" \}', config))
    model.initialize({"model_config": json.dumps({"parameters": {k: {"string_value": v} for k, v in params.items()}}),
                      "model_instance_name": "numpy_0_0"})
    with pytest.raises(RuntimeError):
        model.finalize()
    marks = repro_evidence.read_evidence(evidence)
    assert [m["phase"] for m in marks] == ["init", "finalize_start", "finalize_end"]
    assert {m["instance"] for m in marks} == {"numpy_0_0"} and "finalize raises" in marks[-1]["error"]
    assert repro_evidence.finalize_summary(marks, marks[-1]["t_mono"] + 1)["errors"] == 1


def test_the_script_holds_the_cell_and_imports_no_rig():
    s = repro.scenario_of("retained-array")
    cfg = _cfg("retained-array", shape="decoupled")
    cell = repro.cell_of(s, cfg, _embedded(), False, ["numpy"])
    assert cell["retain"] == "last-array" and cell["shape"] == "decoupled" and cell["upstream"] == ["server#8755"]
    assert cell["expected"]["lifecycle"] and cell["meanings"]["exit_timeout"]
    text = repro.script_text(cell)
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "rig" not in imported and not NO_RIG_IMPORT.search(text)
    assert imported <= set(sys.stdlib_module_names) | {"numpy", "__future__"}
    ns: dict = {"__name__": "repro"}
    exec(compile(text, "repro.py", "exec"), ns)
    assert ns["CELL"] == cell


def test_run_sh_takes_the_install_from_the_environment(tmp_path, monkeypatch):
    """run.sh names no path of this machine but as a default of a variable ($HOME's written as $HOME);
    repro.py finds the loader's folders itself."""
    monkeypatch.setenv("HOME", "/home/maker")
    rt = _embedded(stub_site="/home/maker/.cache/site")
    text = repro_readme.run_sh(rt, "/venv/bin/python3")
    assert ': "${TRITON_HOME:=/rt/py3.11}"' in text and ': "${REPRO_STUB_SITE=$HOME/.cache/site}"' in text
    assert 'PYTHON="/venv/bin/python3"' in text and "LD_LIBRARY_PATH" not in text.split("set -e")[1]
    assert text.rstrip().endswith('exec "$PYTHON" "$here/repro.py" "$@"')
    built = BuiltRuntime(name="built-2.67.0", triton_version="2.67.0", server_dir="/b/py3.11",
                         core_library="/b/py3.11/lib/libtritonserver.so", backend_dir="/b/py3.11/backends",
                         library_path=("/py/lib", "/b/lib"))
    assert "unset REPRO_STUB_SITE" in repro_readme.run_sh(built, "/venv/bin/python3")
    sh = tmp_path / "run.sh"
    sh.write_text(text)
    assert subprocess.run(["sh", "-n", str(sh)], check=False).returncode == 0
    # run.sh's defaults give way to the variables: a fake python prints what it was given
    fake = tmp_path / "py"
    fake.write_text('#!/bin/sh\necho "$TRITON_HOME|$REPRO_STUB_SITE|$@"\n')
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/other", "PYTHON": str(fake), "TRITON_HOME": "/opt/tritonserver"}
    said = subprocess.run(["sh", str(sh), "--x"], env=env, capture_output=True, text=True, check=True).stdout
    assert said.strip() == f"/opt/tritonserver|/home/other/.cache/site|{tmp_path}/repro.py --x"


def test_the_observed_output_is_written_without_this_machines_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/maker")
    rt = _embedded(stub_site="/home/maker/site")
    out = tmp_path / "r"
    text = (f"Triton install: /rt/py3.11 (core /rt/wheel/libs/libtritonserver-1.so)\npython: /venv/bin/python3 3.11\n"
            f"numpy /home/maker/site\nwork folder: /tmp/w1\nmodel {out}/models/numpy/1/model.py /rt/py3.11x")
    said = repro_readme.portable(text, rt, "/venv/bin/python3", out, "/tmp/w1")
    assert said.splitlines() == ["Triton install: $TRITON_HOME (core $TRITON_HOME/../wheel/libs/libtritonserver-1.so)",
                                 "python: $PYTHON 3.11", "numpy $REPRO_STUB_SITE", "work folder: $WORK",
                                 "model ./models/numpy/1/model.py $TRITON_HOME/../py3.11x"]


def test_finalize_before_after_never_and_the_verdicts():
    marks = [
        {"phase": "init", "pid": 1, "instance": "a", "t_mono": 0.0},
        {"phase": "init", "pid": 2, "instance": "b", "t_mono": 0.0},
        {"phase": "init", "pid": 3, "instance": "c", "t_mono": 0.0},
        {"phase": "finalize_start", "pid": 1, "instance": "a", "t_mono": 9.0},
        {"phase": "finalize_end", "pid": 1, "instance": "a", "t_mono": 9.5},
        {"phase": "finalize_start", "pid": 2, "instance": "b", "t_mono": 11.0},
        {"phase": "finalize_end", "pid": 2, "instance": "b", "t_mono": 11.5},
        {"phase": "finalize_end", "pid": 9, "instance": "x", "t_mono": 1.0},  # no init: not this run's
    ]
    s = repro_evidence.finalize_summary(marks, 10.0)
    assert (s["expected"], s["before"], s["after"], s["never"]) == (3, 1, 1, 1)
    assert [i["when"] for i in s["instances"]] == ["before", "after", "never"]
    assert not s["instances"][2]["called"]
    assert repro_evidence.lifecycle_verdict(False, "Exit timeout expired. Exiting immediately.", s) == "exit_timeout"
    assert repro_evidence.lifecycle_verdict(False, "something else", s) == "stop_error"
    assert repro_evidence.lifecycle_verdict(False, None, s) == "finalize_missing"
    assert repro_evidence.lifecycle_verdict(True, None, s) == "load_failed"
    clean = repro_evidence.finalize_summary(marks[:1] + marks[3:5], 10.0)
    assert repro_evidence.lifecycle_verdict(False, None, clean) == "clean"
    assert repro_evidence.admits("exit_timeout|clean", "clean") and not repro_evidence.admits("clean", "exit_timeout")


def test_the_log_lines_that_matter():
    log = "\n".join([
        'E1206 12:57:22.611844 32438 server.cc:241] "CudaDriverHelper has not been initialized."',
        'I1206 12:57:22.612668 32438 model_lifecycle.cc:472] "loading: numpy:1"',
        "| Model | Version | Status |",
        'I1206 12:57:22.735766 32438 tritonserver.cc:2598] ',
        'I1206 12:57:22.832209 32438 server.cc:345] "Timeout 5: Found 1 live models and 0 in-flight non-inference '
        'requests"',
        'W1206 12:57:22.9 32438 other.cc:1] "nothing to see"',
        'I1206 12:57:23.832393 32438 server.cc:345] "Timeout 4: Found 1 live models and 0 in-flight non-inference '
        'requests"',
        *[f'E1206 12:57:24.{k} 32438 pb_stub.cc:714] "Failed to process the request(s) for model \'numpy_0_0\', '
          f'message: ValueError: fault injection: execute raises (call {3 * k})\\n\\nAt:\\n  model.py(77)"'
          for k in (1, 2, 3)],
    ])
    lines = repro_evidence.log_lines(log)
    assert lines == ['I 12:57:22.612668 model_lifecycle.cc:472] "loading: numpy:1"',
                     'I 12:57:22.832209 server.cc:345] "Timeout 5: Found 1 live models and 0 in-flight '
                     'non-inference requests"',
                     'I 12:57:23.832393 server.cc:345] "Timeout 4: Found 1 live models and 0 in-flight '
                     'non-inference requests"',
                     "E 12:57:24.1 pb_stub.cc:714] \"Failed to process the request(s) for model 'numpy_0_0', "
                     "message: ValueError: fault injection: execute raises (call 3) (and 2 more like it)"]


def test_the_template_script_refuses_to_run_without_a_cell(capsys):
    assert repro_main.main([]) == 2 and "no cell" in capsys.readouterr().err


@pytest.mark.slow
def test_a_repro_on_the_embedded_default_reproduces_by_itself(capsys, tmp_path):
    """`rig repro` for retained-response on the embedded default; then its folder, copied elsewhere, run
    with PATH and HOME alone: exit_timeout, the finalize after the stop, exit 0, no rig imported."""
    from rig.parent import runtime

    runtime.resolve(runtime.DEFAULT_EMBEDDED, log=print)  # installed on first use, as the rig does
    out = tmp_path / "repro"
    code, text, err = run(capsys, "repro", "--scenario", "retained-response", "--runtime", runtime.DEFAULT_EMBEDDED,
                          "--out", str(out), "--exit-timeout", "3")
    assert code == 0, text + err
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "crash.c", "models", "repro.py", "run.sh"]
    assert not NO_RIG_IMPORT.search((out / "repro.py").read_text())
    assert not list(out.rglob("__pycache__"))
    readme = (out / "README.md").read_text()
    assert "server#8755" in readme and "## Observed" in readme and "verdict: exit_timeout" in readme
    fresh = tmp_path / "fresh"
    shutil.copytree(out, fresh, symlinks=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    proc = subprocess.run(["./run.sh", "--work", str(tmp_path / "work")], cwd=fresh, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "verdict: exit_timeout" in said and "REPRODUCED" in said
    assert re.search(r"finalize: 1 instance\(s\): 0 before stop\(\) returned, (1 after, 0|0 after, 1) never", said)
    result = json.loads((tmp_path / "work" / "result.json").read_text())
    assert result["lifecycle"] == "exit_timeout" and result["stop_seconds"] >= 2.9 and result["exit_timeout"] == 3
    assert Path(tmp_path / "work" / "evidence.jsonl").exists()


def test_the_parts_join_into_one_script_each_name_once():
    """Every part imports the standard library, numpy and the parts before it alone; joined, no name is defined twice."""
    text = repro_script.template()
    assert text.count("CELL: dict[str, Any] = {}") == 1 and not NO_RIG_IMPORT.search(text)
    for part in repro_script.PARTS:
        tree = ast.parse(repro_script.path_of(part).read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        rig = {m for m in mods if m.split(".")[0] == "rig"}
        assert rig <= set(repro_script.PARTS[: repro_script.PARTS.index(part)]), part
        assert {m.split(".")[0] for m in mods - rig} <= set(sys.stdlib_module_names) | {"numpy", "__future__"}, part


def test_the_script_holds_the_rigs_binding_as_it_is():
    """One binding: every module of rig/capi/ is a part of the script, and the script holds each file as it is, from
    its first statement after the imports to its end; the worker's engine runs the same package, and no part of
    the script's own repeats the binding's lines."""
    from rig import capi

    folder = Path(capi.__file__).parent
    modules = {f"rig.capi.{p.stem}" for p in folder.glob("*.py") if p.name != "__init__.py"}
    assert modules == {"rig.capi.core", "rig.capi.server"} and modules <= set(repro_script.PARTS)
    text = repro_script.template()
    for module in sorted(modules):
        path = repro_script.path_of(module)
        assert path.parent == folder
        source = path.read_text()
        tree = ast.parse(source)
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert all(n.end_lineno is not None and n.end_lineno < m.lineno for n in imports
                   for m in tree.body if not isinstance(m, (ast.Import, ast.ImportFrom, ast.Expr)))
        body = "".join(source.splitlines(keepends=True)[max(n.end_lineno or 0 for n in imports) :]).lstrip("\n")
        assert len(body) > 2000 and body in text, module  # everything after the imports, comments and all
    from rig.worker.engines.capi import engine, response

    assert engine.Server.__module__ == "rig.capi.server" and issubclass(engine.CapiEngine, engine.Server)
    assert response.as_array.__module__ == "rig.capi.server"
    binding = {line.strip() for m in modules for line in repro_script.path_of(m).read_text().splitlines()}
    for part in (p for p in repro_script.PARTS if p not in modules):
        own = [line.strip() for line in repro_script.path_of(part).read_text().splitlines()]
        runs = [k for k in range(len(own) - 5) if all(x in binding and len(x) > 3 for x in own[k : k + 6])]
        assert not runs, f"{part} repeats six lines of the binding from line {runs[0] + 1}"


def test_a_stub_that_dies_at_exit_and_requests_lost():
    marks = [{"phase": "init", "pid": 7, "instance": "r_0", "t_mono": 0.0},
             {"phase": "finalize_start", "pid": 7, "instance": "r_0", "t_mono": 1.0},
             {"phase": "finalize_end", "pid": 7, "instance": "r_0", "t_mono": 1.5}]
    s = repro_evidence.finalize_summary(marks, 2.0)
    at_exit = [{"pid": 7, "phase": "crash", "signal": 11, "t_mono": 2.5}]
    under_load = [{"pid": 7, "phase": "crash", "signal": 11, "t_mono": 0.5}]
    assert repro_evidence.exit_aborts(at_exit, marks) == 1 and repro_evidence.exit_aborts(under_load, marks) == 0
    assert repro_evidence.lifecycle_verdict(False, None, s, crashes=1, aborts_at_exit=1) == "aborted_at_exit"
    assert repro_evidence.lifecycle_verdict(False, None, s, crashes=1, aborts_at_exit=0) == "stub_crashed"
    assert repro_evidence.lifecycle_verdict(False, None, s, lost=2) == "requests_lost"


def test_the_sequences_are_the_rigs_clients():
    """The sequences the script opens are those of the rig's sequence-at-stop client (which the commands cannot import)."""
    from rig.scenarios.client import sequences

    assert repro.SEQUENCES == {"n": sequences.SEQUENCES, "first": sequences.FIRST_SEQUENCE,
                               "idle_s": sequences.IDLE_WAIT_S}
    cell = repro.cell_of(repro.scenario_of("sequence-at-stop"), _cfg("sequence-at-stop"), _embedded(), False,
                         ["sequence_sum"])
    assert cell["client"] == "sequence-at-stop" and cell["sequences"] == repro.SEQUENCES
    control = _cfg("ensemble-in-flight", control=True)
    assert control.client == "none"  # its client is its fault
    cell = repro.cell_of(repro.scenario_of("ensemble-in-flight"), control, _embedded(), True, ["ensemble_pipeline"])
    assert cell["sequences"] is None and "no client around stop()" in cell["what"]


@pytest.mark.slow
@pytest.mark.parametrize("scenario, verdict, words", [
    ("ready-stub-dead", "finalize_missing", ""),
    ("metrics", "aborted_at_exit", ""),
    ("ensemble-in-flight", "requests_lost", "8 request(s) submitted at once (to ensemble_pipeline in turn)"),
    ("sequence-at-stop", "clean", "the stateful model's finalize still held 4 sequence state(s)"),
])
def test_a_scenario_with_models_of_its_own_reproduces_elsewhere(capsys, tmp_path, scenario, verdict, words):
    """A scenario of its own models and client on the embedded default: its known verdict, by itself, from a
    copy run with PATH and HOME alone; run.sh and README.md name no path of the rig's checkout."""
    from rig.parent import runtime

    runtime.resolve(runtime.DEFAULT_EMBEDDED, log=print)
    out = tmp_path / "repro"
    code, text, err = run(capsys, "repro", "--scenario", scenario, "--runtime", "2.51.0", "--out", str(out))
    assert code == 0, text + err
    fresh = tmp_path / "fresh"
    shutil.copytree(out, fresh, symlinks=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    proc = subprocess.run(["./run.sh", "--work", str(tmp_path / "work")], cwd=fresh, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0 and f"verdict: {verdict}" in proc.stdout, proc.stdout + proc.stderr
    assert words in proc.stdout
    readme = (out / "README.md").read_text()
    assert str(out) not in readme and str(tmp_path) not in readme and "## What to set" in readme
    assert str(Path(runtime.resolve(runtime.DEFAULT_EMBEDDED).server_dir)) not in (out / "run.sh").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["ensemble-in-flight", "sequence-at-stop"])
def test_the_controls_of_an_ensemble_and_of_sequences_are_clean(capsys, tmp_path, scenario):
    """Their controls on the embedded default (the steps fast, no request in flight; every sequence ended):
    clean, in the run `rig repro` makes itself (exit 0: the script reproduced it)."""
    from rig.parent import runtime

    runtime.resolve(runtime.DEFAULT_EMBEDDED, log=print)
    out = tmp_path / "repro"
    code, text, err = run(capsys, "repro", "--scenario", scenario, "--control", "--runtime", "2.51.0", "--out", str(out))
    assert code == 0 and "observed clean (expected clean)" in text, text + err
    readme = (out / "README.md").read_text()
    assert "verdict: clean" in readme and "REPRODUCED" in readme
    if scenario == "sequence-at-stop":
        assert "4 sequence(s) opened and each ended (END) at once" in readme
        assert "finalize still held 0 sequence state(s)" in readme

"""A matrix cell (`rig cell`, rig.commands.cell): its typed spec (rig.contract.cell.CellSpec), the
typed record it hands back over its pipe (``CellDone``, or ``Fatal``), and the matrix's side of
the pipe (rig.workflows.matrix_run): fast, no Triton (a cell whose config is refused, the library
replaced where a run would start one)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rig.commands import cell
from rig.workflows import matrix_run
from rig.common.errors import RigError
from rig.contract.cell import BenchSettings, CellSpec
from rig.contract.messages import CellDone, Fatal, decode
from rig.parent.config import RunConfig


def _spec(**kw) -> CellSpec:
    values = {"command": "soak", "config": RunConfig(cycles=2).to_toml(), "run_id": "20260101T000000-abcdef",
              "label": "runtime 0.7.0, engine capi", "allowed": ("clean", "ok")}
    return CellSpec(**{**values, **kw})


def test_a_spec_survives_its_file():
    spec = _spec(bench=BenchSettings(concurrency="1,4", windows=3, window_seconds=1.0, repeats=1),
                 results="s3://u:pw@minio:9000/b", cpus="0")
    assert CellSpec.from_json(spec.to_json()) == spec
    assert CellSpec.from_json('{"command": "bench", "config": "", "run_id": "r"}') == \
        CellSpec("bench", "", "r", "", (), None, None, None)


@pytest.mark.parametrize("text, says", [
    ("not json", "not JSON"),
    ("[1]", "$: expected an object (CellSpec), got list"),
    ('{"command": "soak", "config": ""}', "$: CellSpec needs run_id"),
    ('{"command": "cycle", "config": "", "run_id": "r"}', "$.command: 'cycle' is not one of 'soak', 'bench'"),
    ('{"command": "soak", "config": 1, "run_id": "r"}', "$.config: expected a string, got int 1"),
    ('{"command": "soak", "config": "", "run_id": "r", "allowed": "clean"}', "$.allowed: expected a list, got str"),
    ('{"command": "bench", "config": "", "run_id": "r", "bench": {"users": 2}}', "$.bench: BenchSettings has no field users"),
    ('{"command": "bench", "config": "", "run_id": "r", "bench": {"windows": "3"}}', "$.bench.windows: expected an integer"),
    ('{"command": "soak", "config": "", "run_id": "r", "argv": []}', "$: CellSpec has no field argv"),
])
def test_a_spec_that_is_not_a_cells_is_one_line(text, says):
    with pytest.raises(ValueError) as e:
        CellSpec.from_json(text)
    assert says in str(e.value)


def _main(tmp_path, spec, monkeypatch=None) -> tuple[int, list]:
    """``rig cell`` in this process, its pipe read back."""
    path = tmp_path / "cell.json"
    path.write_text(spec.to_json() if isinstance(spec, CellSpec) else spec)
    r, w = os.pipe()
    try:
        code = cell.main(str(path), w, log=lambda m: None)
    finally:
        os.close(w)
    with os.fdopen(r, "rb") as f:
        msgs = [decode(line) for line in f.read().splitlines()]
    return code, msgs


def test_a_soak_cell_calls_the_library_and_hands_back_its_record(tmp_path, monkeypatch, capsys):
    from rig.workflows import soak
    from rig.workflows.tally import Tally

    seen = {}

    def execute(cfg, command, **kw):
        seen.update(cfg=cfg, command=command, **kw)
        return 1, Tally([]), kw["run_id"], ["outcomes not allowed: hung=1", "leaks: 1 stub(s)"]

    monkeypatch.setattr(soak, "execute", execute)
    code, msgs = _main(tmp_path, _spec(results="s3://u:pw@minio:9000/b"))
    assert code == 1
    assert msgs == [CellDone(1, "20260101T000000-abcdef", ("outcomes not allowed: hung=1", "leaks: 1 stub(s)"))]
    assert seen["command"] == "soak" and seen["run_id"] == "20260101T000000-abcdef"
    assert seen["allowed"] == ("clean", "ok") and seen["cfg"].cycles == 2
    assert seen["cfg"].results == "s3://u:pw@minio:9000/b", "the results as given, not as the TOML text redacts them"
    assert "FAIL: leaks: 1 stub(s)" in capsys.readouterr().out  # for people: never read back


def test_a_bench_cell_gets_benchs_options_with_its_settings(tmp_path, monkeypatch):
    from rig.workflows import bench

    seen = {}

    def run(cfg, args, log=print, run_id=None):
        seen.update(args=args, run_id=run_id)
        return 0

    monkeypatch.setattr(bench, "run", run)
    settings = BenchSettings(concurrency="2", windows=3, window_seconds=1.0, repeats=1)
    code, msgs = _main(tmp_path, _spec(command="bench", allowed=(), bench=settings))
    assert (code, msgs) == (0, [CellDone(0, "20260101T000000-abcdef")])
    args = seen["args"]
    assert (args.concurrency, args.windows, args.window_seconds, args.repeats) == ("2", 3, 1.0, 1)
    assert (args.compare, args.rates, args.cpu_idle) == (None, None, "hold")  # bench's defaults
    assert args == settings  # the typed settings themselves, no parser in between
    assert seen["run_id"] == "20260101T000000-abcdef"


def test_errors_are_records_and_a_bug_is_fatal(tmp_path, monkeypatch, capsys):
    from rig.workflows import soak

    code, msgs = _main(tmp_path, _spec(config="bogus = 1\n"))
    assert code == 2 and len(msgs) == 1 and msgs[0].exit == 2 and msgs[0].run_id is None
    assert msgs[0].error.startswith("stored config: unknown key 'bogus'")
    code, msgs = _main(tmp_path, '{"command": "soak"}')
    assert code == 2 and msgs[0].error.startswith("cell spec ") and "CellSpec needs" in msgs[0].error

    def full(cfg, command, **kw):
        raise OSError(28, "No space left on device", "/r/cycles")

    monkeypatch.setattr(soak, "execute", full)
    code, msgs = _main(tmp_path, _spec())
    assert (code, msgs) == (4, [CellDone(4, "20260101T000000-abcdef", (), "No space left on device (/r/cycles)")])

    def bug(cfg, command, **kw):
        raise KeyError("tool")

    monkeypatch.setattr(soak, "execute", bug)
    code, msgs = _main(tmp_path, _spec())
    assert code == 3 and len(msgs) == 1 and isinstance(msgs[0], Fatal)
    assert msgs[0].error == "KeyError: 'tool'" and "Traceback" in msgs[0].traceback


def test_the_cell_command_is_listed_nowhere():
    import argparse

    from rig.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"cell", "worker"} <= set(sub.choices)  # internal: they run, and no help lists them
    assert not {"cell", "worker"} & {a.dest for a in sub._choices_actions}
    assert "cell" not in parser.format_help()


def test_a_cell_process_answers_over_its_pipe(tmp_path):
    """The real `python -m rig cell`, started as the matrix starts it: a config it refuses is an
    error row with the refusal's line (read from the record, not from what it printed)."""
    row = matrix_run._run_cell(_spec(config="cycles = 0\n", run_id=""), 60, spec_path=tmp_path / "cell.json",
                               log=tmp_path / "cell.log")
    assert row["status"] == "error" and row["exit"] == 2 and row["run_id"] is None, row
    assert row["reason"] == "cycles must be >= 1, requests >= 0, requests_in_flight >= 1 and exit_timeout >= 0"
    assert "rig: error: cycles must be >= 1" in (tmp_path / "cell.log").read_text()  # for people
    written = CellSpec.from_json((tmp_path / "cell.json").read_text())
    assert written.config == "cycles = 0\n" and written.run_id  # its run named as it started


def _child(code: str, fd: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, str(fd)], pass_fds=(fd,), start_new_session=True)


def test_the_pipe_is_read_to_its_end_and_a_hang_is_a_timeout():
    r, w = os.pipe()
    done = CellDone(0, "r1").encode()
    proc = _child("import os, sys; fd = int(sys.argv[1]); os.write(fd, b'not a message\\n'); "
                  f"os.write(fd, {done.encode()!r})", w)  # its last line without a newline
    os.close(w)
    try:
        msgs, timed_out = matrix_run._collect(proc, r, 30)
    finally:
        os.close(r)
    assert (msgs, timed_out, proc.returncode) == ([CellDone(0, "r1")], False, 0)
    r, w = os.pipe()
    proc = _child("import time; time.sleep(60)", w)
    os.close(w)
    try:
        msgs, timed_out = matrix_run._collect(proc, r, 0.5)
    finally:
        proc.kill()
        proc.wait()
        os.close(r)
    assert (msgs, timed_out) == ([], True)


def test_the_bench_settings_defaults_are_the_command_lines():
    """One home for a sweep's settings: `rig bench` with no options gives BenchSettings' defaults."""
    from rig.cli import build_parser

    args = build_parser().parse_args(["bench"])
    d = BenchSettings()
    for field in ("concurrency", "rates", "windows", "window_seconds", "repeats", "p99_bound_ms", "compare", "cpu_idle",
                  "target_model", "all_models"):
        assert getattr(args, field) == getattr(d, field), field

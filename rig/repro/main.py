"""The run: the arguments, the setup (the loader's folders, the stubs' numpy, the crash
recorder), the server's start, the cell's requests, the scene before ``stop()``, the stop, what
the models and stubs left, the verdict, and the teardown."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from rig.capi.core import CoreError, CoreLibrary
from rig.repro.env import crash_recorder, ensure_environment, stub_environment, stubs, stubs_alive
from rig.repro.evidence import (
    admits,
    exit_aborts,
    finalize_summary,
    lifecycle_verdict,
    log_lines,
    read_crashes,
    read_evidence,
)
from rig.repro.head import CELL, GRACE_AFTER_STOP_S, STARTUP_TIMEOUT_S
from rig.repro.load import (
    Check,
    Kept,
    Load,
    Targets,
    closed_loop,
    fixed_count,
    make_inputs,
    template_check,
)
from rig.repro.scenes import scene_of
from rig.repro.server import ReproServer


class Report:
    """The report's lines, each printed as it comes (a crash shows how far the run got)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def append(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)


class Run:
    """One run of the cell: where its files go, the server, and what it saw."""

    def __init__(self, args: argparse.Namespace, triton: Path, work: Path) -> None:
        self.cell = CELL
        self.triton = triton
        self.work = work
        self.evidence = work / "evidence.jsonl"
        self.log_file = work / "triton.log"
        self.exit_timeout = int(args.exit_timeout)
        self.report = Report()
        self.scene = scene_of(CELL)
        self.models_dir = Path(args.models).resolve()
        self.server = ReproServer(CoreLibrary(str(triton / "lib" / "libtritonserver.so")))
        self.kept = Kept()
        self.load: Load | None = None
        self.version = "unknown"
        self.load_failed: str | None = None
        self.t_stop: float | None = None
        self.t_ret: float | None = None
        self.stop_error: str | None = None
        self.scene_said: dict[str, Any] = {}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="repro.py",
        description=f"Reproduce {CELL.get('title', 'a triton-soak-rig cell')} with Triton's C API alone.",
    )
    p.add_argument(
        "--triton",
        default=os.environ.get("TRITON_HOME"),
        help="the Triton install: lib/libtritonserver.so and backends/ (default $TRITON_HOME)",
    )
    p.add_argument(
        "--exit-timeout",
        type=int,
        default=CELL.get("exit_timeout", 5),
        help=f"the server's exit timeout, seconds (default {CELL.get('exit_timeout', 5)})",
    )
    p.add_argument(
        "--stub-site",
        default=os.environ.get("REPRO_STUB_SITE") or None,
        help="a folder with numpy<2 for backend stubs built against numpy 1 (default $REPRO_STUB_SITE; "
        "none: this interpreter's numpy)",
    )
    p.add_argument(
        "--lib-path",
        default=os.environ.get("REPRO_LIB_PATH", ""),
        help="more library folders the core needs, ':'-separated (default $REPRO_LIB_PATH)",
    )
    p.add_argument("--models", default=str(Path(__file__).resolve().parent / "models"), help="the model repository")
    p.add_argument("--work", help="where the log, the evidence and the stubs' venv go (default a new temporary folder)")
    return p.parse_args(argv)


def _prepare(args: argparse.Namespace) -> Run | int:
    """The run's setup: the install checked, the loader's folders (a re-execution where they are
    missing), the work folder, the stubs' numpy and crash recorder; 2 on bad input."""
    triton = Path(args.triton).resolve()
    if not (triton / "lib" / "libtritonserver.so").exists() or not (triton / "backends" / "python").is_dir():
        print(f"repro.py: {triton} has no lib/libtritonserver.so and backends/python/", file=sys.stderr)
        return 2
    ensure_environment(triton, [d for d in args.lib_path.split(os.pathsep) if d])
    work = Path(args.work or tempfile.mkdtemp(prefix="triton-repro-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for stale in [work / "evidence.jsonl", work / "triton.log", *work.glob("*-crash-*.json")]:
        stale.unlink(missing_ok=True)
    run = Run(args, triton, work)
    stub_numpy = stub_environment(work, args.stub_site)
    crash_lib, crash_words = crash_recorder(Path(__file__).resolve().parent / "crash.c", work)
    os.environ["REPRO_EVIDENCE"] = str(run.evidence)  # the models' finalize evidence (their model.py's last lines)
    os.environ.pop("REPRO_CRASH_LIB", None)
    if crash_lib:
        os.environ["REPRO_CRASH_LIB"] = crash_lib  # armed by the same lines in each stub
    os.environ.update(run.scene.environment(work))  # what the scene's models read, before their stubs start
    if run.scene.copies:  # the client changes the models' files: it acts on a copy
        shutil.copytree(run.models_dir, work / "models", dirs_exist_ok=True)
        run.models_dir = work / "models"
    core = triton / "lib" / "libtritonserver.so"
    run.report.append(f"reproducing: {run.cell['title']}")
    run.report.append(f"Triton install: {triton} (core {os.path.realpath(core)})")
    run.report.append(
        f"python: {sys.executable} {platform.python_version()}, numpy {np.__version__}; the stubs' numpy: "
        + (f"{stub_numpy} (REPRO_STUB_SITE)" if args.stub_site else f"this one's, linked alone in {stub_numpy}")
    )
    run.report.append(f"the stubs' crash recorder (crash.c): {crash_words}")
    return run


def _start(run: Run) -> None:
    """The server started over the models, every model ready (``load_failed`` says why not)."""
    models: list[str] = run.cell["models"]
    explicit = run.scene.explicit
    try:
        run.server.start(
            str(run.models_dir),
            str(run.triton / "backends"),
            run.exit_timeout,
            str(run.log_file),
            f"repro{os.getpid()}_",
            explicit=explicit,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not run.server.ready(models):
            if time.monotonic() > deadline:
                raise CoreError(f"not ready after {STARTUP_TIMEOUT_S:g} s", "UNAVAILABLE")
            time.sleep(0.005)
    except CoreError as e:
        run.load_failed = str(e)
        return
    run.version = run.server.server_version()
    run.report.append(f"Triton version (server metadata): {run.version}")
    run.report.append(
        f"server: model control {'EXPLICIT (every model loaded at start)' if explicit else 'NONE'}, strict model "
        f"config and readiness, exit_timeout {run.exit_timeout} s, backends {run.triton / 'backends'}"
    )


def _requests(run: Run) -> Targets:
    """The cell's requests (its fixed count, or its closed loop), the last response kept or deleted."""
    cell, server = run.cell, run.server
    targets: Targets = [(m, make_inputs(server.inputs_of(m))) for m in cell["models"]]
    checks: dict[str, Check] = {}
    if cell.get("template"):
        checks[targets[0][0]] = template_check(int(cell["size"]), targets[0][1])
    timeout_s = float(cell.get("request_timeout", 5.0))
    workload = cell.get("workload")
    last = 0
    if workload:
        load = closed_loop(server, targets, int(workload["users"]), float(workload["seconds"]), timeout_s, checks)
        said = f"{workload['users']} clients in a closed loop for {workload['seconds']:g} s"
        if cell["retain"] != "none":  # one more request, kept
            extra, last = fixed_count(server, targets[:1], 1, 1, timeout_s, checks)
            load.merge(extra)
    else:
        group = int(cell.get("in_flight", 1))
        load, last = fixed_count(server, targets, int(cell["requests"]), group, timeout_s, checks)
        said = f"{cell['requests']} requests, {group} at a time" if group > 1 else f"{cell['requests']} requests"
    run.load = load
    if last:
        run.kept.keep(server, last, cell["retain"])
    names = ", ".join(m for m, _ in targets)
    run.report.append(
        f"load: {said} to {names}: {load.sent} sent, {load.errors} failed ({load.timeouts} unanswered), "
        f"{load.bad_outputs} wrong outputs"
    )
    for message, count in sorted(load.messages.items(), key=lambda kv: -kv[1])[:3]:
        run.report.append(f"  {count} x {_short(message)}")
    run.report.append(f"kept across stop(): {run.kept.what}")
    return targets


def _short(message: str, limit: int = 200) -> str:
    """A message cut to about ``limit`` characters at a space, never inside a word or a path (a path
    cut in two would escape the report's rewriting of this machine's paths)."""
    if len(message) <= limit:
        return message
    return message[:limit].rsplit(" ", 1)[0] + " ..."


def _stop(run: Run, targets: Targets) -> None:
    """The scene the client sets, ``TRITONSERVER_ServerStop`` timed, then what a careful client
    does next: let go of what it kept, let the models unload (deleting the server while a model
    still unloads has aborted core 2.51)."""
    for note in run.scene.before_stop(run.server, run.models_dir, targets, STARTUP_TIMEOUT_S):
        run.report.append(f"before stop(): {note}")
    run.t_stop = time.monotonic()
    err = run.server.stop_server()
    run.t_ret = time.monotonic()
    run.stop_error = None if err is None else str(err)
    before = finalize_summary(read_evidence(run.evidence), run.t_ret)
    run.report.append(
        f"stop: TRITONSERVER_ServerStop returned after {run.t_ret - run.t_stop:.2f} s ({stubs_alive()} stub(s) "
        f"alive then, {before['before']} of {before['expected']} finalize(s) done), "
        + (f"error: {run.stop_error}" if run.stop_error else "no error")
    )
    run.kept.release(run.server)
    grace = time.monotonic() + max(GRACE_AFTER_STOP_S, run.exit_timeout)
    while time.monotonic() < grace:
        s = finalize_summary(read_evidence(run.evidence), run.t_ret)
        settled = s["before"] + s["after"] >= s["expected"] and run.scene.settled()
        if settled and not stubs_alive() and not run.server.models_loaded():
            break
        time.sleep(0.02)
    run.scene_said = run.scene.after(run.server)
    for note in run.scene_said.get("notes", []):
        run.report.append(f"after stop(): {note}")


def _findings(run: Run) -> dict[str, Any]:
    """The finalizes, the stubs' crashes and the server log's lines, reported; the verdict's figures."""
    marks = read_evidence(run.evidence)
    finalize = finalize_summary(marks, run.t_ret)
    crashes = read_crashes(run.work)
    aborts = exit_aborts(crashes, marks)
    if run.load_failed is not None:
        run.report.append(f"start: the server or a model did not become ready: {run.load_failed}")
    else:
        run.report.append(
            f"finalize: {finalize['expected']} instance(s): {finalize['before']} before stop() returned, "
            f"{finalize['after']} after, {finalize['never']} never"
        )
        for i in finalize["instances"]:
            if i["when"] == "before":
                when = f"finalize ended {-i['seconds']:.2f} s before stop() returned"
            elif i["when"] == "after":
                when = f"finalize ended {i['seconds']:.2f} s after stop() returned"
            else:
                when = "finalize never ended" + ("" if i["called"] else " (never called)")
            error = f": {i['error']}" if i["error"] else ""
            run.report.append(f"  {i['instance']} (stub pid {i['pid']}): {when}{error}")
    for c in crashes:
        after = "after its finalize (at exit)" if aborts else "before its finalize ended"
        run.report.append(f"stub pid {c.get('pid')} died of signal {c.get('signal')} {after}")
    lines = log_lines(run.log_file.read_text(errors="replace") if run.log_file.exists() else "")
    if lines:
        run.report.append("server log (the lines that matter):")
        for line in lines:
            run.report.append(f"  {line}")
    return {"finalize": finalize, "crashes": len(crashes), "aborts": aborts}


def _verdict(run: Run, found: dict[str, Any]) -> bool:
    """The verdicts, against the cell's expected ones; ``result.json`` in the work folder."""
    finalize = found["finalize"]
    lost = int(run.scene_said.get("lost") or 0)
    lifecycle = lifecycle_verdict(
        run.load_failed is not None, run.stop_error, finalize, lost, found["crashes"], found["aborts"]
    )
    load_verdict = "not_measured" if run.load is None else run.load.verdict()
    want = run.cell["expected"]
    meaning = run.cell.get("meanings", {}).get(lifecycle, "")
    run.report.append(f"verdict: {lifecycle}" + (f" ({meaning})" if meaning else "") + f"; load: {load_verdict}")
    ok = admits(want["lifecycle"], lifecycle) and admits(want["load"], load_verdict)
    run.report.append(
        f"expected: {want['lifecycle']}, load {want['load']} ({want['source']}): "
        + ("REPRODUCED" if ok else "NOT reproduced")
    )
    result = {
        "triton_version": run.version,
        "exit_timeout": run.exit_timeout,
        "load_failed": run.load_failed,
        "stop_seconds": None if run.t_ret is None or run.t_stop is None else run.t_ret - run.t_stop,
        "stop_error": run.stop_error,
        "lifecycle": lifecycle,
        "load": load_verdict,
        "finalize": {k: v for k, v in finalize.items() if k != "instances"},
        "lost": lost,
        "stub_crashes": found["crashes"],
        "stub_exit_aborts": found["aborts"],
        "reproduced": ok,
    }
    (run.work / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return ok


def _delete(run: Run) -> None:
    """``TRITONSERVER_ServerDelete`` in a thread: the verdict is out, a crash or a hang in the
    teardown (core 2.51 has aborted there) cannot take it away."""
    wait = time.monotonic() + run.exit_timeout + 15
    while run.scene.busy() and time.monotonic() < wait:
        time.sleep(0.05)
    if run.scene.busy():  # deleting the server under a load still running has aborted core 2.51 (a double free)
        run.report.append("TRITONSERVER_ServerDelete not called: the load started before the stop still runs")
        return
    t_delete = time.monotonic()
    deleted = threading.Thread(target=run.server.delete, daemon=True)
    deleted.start()
    deleted.join(run.exit_timeout + 30)
    if deleted.is_alive():
        run.report.append(f"TRITONSERVER_ServerDelete still blocked after {run.exit_timeout + 30} s")
    elif run.load_failed is None:
        run.report.append(f"TRITONSERVER_ServerDelete returned after {time.monotonic() - t_delete:.2f} s")


def reproduce(args: argparse.Namespace) -> int:
    run = _prepare(args)
    if isinstance(run, int):
        return run
    _start(run)
    if run.load_failed is None:
        targets = _requests(run)
        _stop(run, targets)
    ok = _verdict(run, _findings(run))
    _delete(run)
    left = stubs()
    for pid in left:  # a stub the stop left behind outlives this process (and holds its output) otherwise
        os.kill(pid, signal.SIGKILL)
    if left:
        run.report.append(f"{len(left)} stub(s) still running at the end, killed (SIGKILL): {sorted(left)}")
    run.report.append(f"work folder: {run.work} (triton.log, evidence.jsonl, result.json)")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    if not CELL:
        print("repro.py: no cell: this is the template `rig repro` copies; run the repro.py it writes", file=sys.stderr)
        return 2
    args = _parse(argv)
    if not args.triton:
        print("repro.py: give the Triton install: --triton DIR or TRITON_HOME=DIR", file=sys.stderr)
        return 2
    return reproduce(args)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the core's threads must not hold the exit

"""Fake workers for the parent's tests (test_watchdog.py, test_worker_reports.py).

Each fake worker is a small Python file run in place of ``python -m rig worker`` (through
``Prepared.worker_argv``), with the same arguments (``--spec FILE --result-fd N``) and the same
protocol: ``rig.contract.rows``'s messages, one JSON line each on the result pipe. No Triton core is
started: what is tested is what the parent makes of a worker that reports, hangs, dies or talks
nonsense, and that the run goes on. Deadlines are announced by the fakes (a ``Phase`` message)
or set by the config, and kept short.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
import types

import psutil

from rig.parent import orchestrator
from rig.parent.config import RunConfig
from rig.contract.runtime import EmbeddedRuntime
from rig.store import Store

REPORT_DEADLINE_S = 30  # the deadline of each phase a reporting fake worker announces

# What every fake worker starts with: its arguments, its spec, the result pipe, and a way to
# leave a process the probes take for a backend stub (argv[0] is the stub's name) in its group.
PREAMBLE = f'''
import json, os, signal, subprocess, sys, time
from rig.contract.messages import CycleDone, CycleStart, Fatal, Partial, Phase, Window
_args = sys.argv[1:]
SPEC_PATH = _args[_args.index("--spec") + 1]
SPEC = json.load(open(SPEC_PATH))
CYCLES = SPEC["cycles"]
WORK = os.path.dirname(SPEC_PATH)
_out = os.fdopen(int(_args[_args.index("--result-fd") + 1]), "w", buffering=1)


def send(msg):
    _out.write(msg.encode() + "\\n")
    _out.flush()


def raw(text):
    _out.write(text)
    _out.flush()


def row(cycle, **kw):
    r = {{"cycle": cycle, "outcome": "clean", "worker_pid": os.getpid(), "start_latency_s": 0.25,
          "stop_latency_s": 0.5, "workload_s": 0.125, "finalize_expected": 1,
          "finalize_before_stop": 1, "finalize_after_stop": 0, "stubs_alive_after_stop": 0,
          "stubs_killed": 0, "shm_regions_leaked": 0, "cleanup": "ok"}}
    r.update(kw)
    return r


def start(cycle):
    send(CycleStart(cycle, time.monotonic()))


def phase(name, timeout_s):
    send(Phase(name, timeout_s, time.monotonic()))


def report(cycle, triton_version=None, **kw):
    start(cycle)
    phase("start", {REPORT_DEADLINE_S})
    phase("stop", {REPORT_DEADLINE_S})
    send(CycleDone(row(cycle, **kw), triton_version))


def fake_stub():
    p = subprocess.Popen(["triton_python_backend_stub", "300"], executable={shutil.which("sleep")!r})
    with open(os.path.join(WORK, f"stub-{{CYCLES[0]}}.pid"), "w") as f:
        f.write(str(p.pid))
    return p
'''


def prepared(tmp_path, body: str, **cfg) -> orchestrator.Prepared:
    """A run whose workers are ``body`` (after PREAMBLE); nothing resolved, nothing installed."""
    script = tmp_path / "fake_worker.py"
    script.write_text(PREAMBLE + textwrap.dedent(body))
    cfg.setdefault("startup_timeout", 5.0)
    config = RunConfig(exit_timeout=1, results=str(tmp_path / "results"), **cfg)
    rt = EmbeddedRuntime(name="embedded-test", triton_version="2.51.0", server_dir=str(tmp_path),
                 core_library=str(tmp_path / "libtritonserver.so"), backend_dir=str(tmp_path / "backends"))
    work = tmp_path / "results" / "_work" / "run1"
    work.mkdir(parents=True)
    return orchestrator.Prepared(run_id="run1", config=config, runtime=rt, engine="capi", engine_reason="test",
                                 repository=tmp_path / "repo", models=["m"], model_label="m", work_dir=work,
                                 store=Store(tmp_path / "results"), worker_argv=[sys.executable, str(script)])


def run(p: orchestrator.Prepared, cycles: list[int], **kw) -> types.SimpleNamespace:
    """Run ``cycles`` on ``p``'s fake workers: the rows, windows and phases the parent passed on,
    when it passed each phase on (``phase_at[(cycle, phase)]``) and each cycle's result
    (``ended_at[cycle]``), and the whole run's ``seconds``."""
    rows, windows, phases, results = [], [], [], []
    phase_at: dict[tuple[int, str], float] = {}
    ended_at: dict[int, float] = {}

    def keep(result):
        ended_at[result.row.cycle] = time.monotonic()
        results.append(result)
        rows.append(result.row)

    def seen(cycle, phase):
        phase_at[(cycle, phase)] = time.monotonic()
        phases.append((cycle, phase))

    t0 = time.monotonic()
    orchestrator.run_cycles(p, cycles, kw.pop("on_cycle", keep),
                            on_window=windows.append, on_phase=kw.pop("on_phase", seen))
    return types.SimpleNamespace(rows=rows, windows=windows, phases=phases, results=results,
                                 phase_at=phase_at, ended_at=ended_at, seconds=time.monotonic() - t0,
                                 by_cycle={r.cycle: r for r in rows})


def gone(pid: int, within: float = 3.0) -> bool:
    """The process is dead (a zombie counts: nothing runs), waiting a little for the kill to land."""
    deadline = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def stub_pid(p: orchestrator.Prepared, cycle: int) -> int:
    return int((p.work_dir / f"stub-{cycle}.pid").read_text())

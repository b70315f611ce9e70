"""The parent of a run: never hosts Triton; starts workers, watches them, stores every cycle.

A watchdog bounds every phase a worker announces; a worker past its deadline is killed with its
whole process group (stubs included) and the cycle is stored as ``hung``; one that dies is
stored as ``crashed`` with its signal. Each cycle's row is written as soon as it is known, so a
SIGKILL of this process loses at most the cycle in flight, and ``--resume`` finishes the run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import select
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable

from rig import engines, probes, procs, repository, storefs
from rig import runtime as runtime_mod
from rig.procs import python_m
from rig.version import __version__ as rig_version
from rig.config import RunConfig
from rig.cycle import CycleSpec
from rig.errors import RigError
from rig.preflight import (check_inputs, check_workload, cupy_usable, ensure_evidence_hook, host_facts,
                           lock_run, without_spaces)
from rig.fleet import check_master, node_name
from rig.store import Store
from rig.protocol import CycleResult, CycleRow, RunRow, WindowRow, now_iso, window_row

CYCLE_FIELDS = [f.name for f in dataclasses.fields(CycleRow)]


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


@dataclasses.dataclass
class Prepared:
    run_id: str
    config: RunConfig
    runtime: runtime_mod.Runtime
    engine: str
    engine_reason: str
    repository: Path
    models: list[str]
    model_label: str
    work_dir: Path
    store: Store
    # The command that runs a worker, before ``--spec FILE --result-fd N`` (None: this
    # interpreter's ``-m rig worker``). Tests put a fake worker here to exercise the watchdog.
    worker_argv: list[str] | None = None
    lock: object = None  # the open file whose flock says this process runs the run
    hook: str | None = None  # the evidence hook the stubs run (None: it could not be installed)
    inputs: dict | None = None  # preflight.check_inputs of the models loaded (None: not checked yet)
    made: Path | None = None    # the outermost folder this process made for the work folder (a new run)


def prepare(cfg: RunConfig, command: str, run_id: str | None = None,
            log: Callable[[str], None] = print) -> Prepared:
    """Everything checked before anything starts: runtime, engine, model repository."""
    rt = runtime_mod.resolve(cfg.runtime, log=log)
    hook = ensure_evidence_hook(log)
    engine, reason = engines.select(cfg.engine, rt)
    if cfg.workload.name.endswith(".py"):
        check_workload(cfg.workload.name)
    if cfg.workload.master:
        check_master(cfg.workload.master)
    run_id = run_id or new_run_id()
    store = Store(cfg.results)
    storefs.check_writable(store)
    work = store.work_dir(run_id)  # local even where the results are remote (storefs.work_root)
    made = next((d for d in [work, *work.parents] if d.parent.exists()), None) if not work.exists() else None
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if store.local:
            raise RigError(f"cannot write results to {cfg.results} ({e.strerror}): choose another --results") from None
        raise RigError(f"cannot write the run's work folder {work} ({e.strerror}): set RIG_WORK_DIR to a "
                       "writable folder") from None
    lock = lock_run(work, run_id)
    if cfg.model_repository:
        repo = Path(cfg.model_repository).resolve()
        names = repository.repository_models(repo)
        label = ",".join(names) if len(names) <= 3 else f"{repo.name}({len(names)} models)"
    else:
        if cfg.model == "cupy":
            ok, why = cupy_usable()
            if not ok:
                raise RigError(f"the cupy model needs a CUDA device and CuPy here: {why}; use --model numpy")
        repo = work / "models"
        spec = repository.ModelSpec(kind=cfg.model, size=cfg.model_size, instances=cfg.instances,
                                max_batch_size=cfg.max_batch_size, dynamic_batching=cfg.dynamic_batching,
                                fault=cfg.fault, execute_delay_ms=cfg.execute_delay_ms)
        repository.render(spec, repo)
        names = [spec.model_name]
        label = cfg.model if cfg.fault == "none" else f"{cfg.model}:{cfg.fault}"
    repo = without_spaces(repo, run_id, log)
    p = Prepared(run_id, cfg, rt, engine, reason, repo, names, label, work, store, lock=lock, hook=hook,
                 made=made)
    if command != "bench":  # bench checks them once it knows the model it loads (bench._target)
        check_run_inputs(p)
    return p


def check_run_inputs(p: Prepared) -> None:
    """The run's inputs checked against its models before any cycle (``preflight.check_inputs``).
    A refusal leaves nothing behind: the folders this run made (its work folder, with its
    rendered model and its lock, up to the results folder where that is new) go, so that a
    refused run is no run at all."""
    try:
        p.inputs = check_inputs(p.repository, p.models, p.config.input_data, p.config.shapes)
    except RigError:
        if p.made is not None:
            import shutil

            if p.lock is not None:
                p.lock.close()
            shutil.rmtree(p.work_dir, ignore_errors=True)
            for d in p.work_dir.parents:  # empty folders made for this run alone, up to the first
                if not d.is_relative_to(p.made) or any(d.iterdir()):
                    break
                d.rmdir()
        raise


def write_run_row(p: Prepared, command: str, cpu_idle: str | None = None) -> None:
    facts = host_facts()
    row = RunRow(run_id=p.run_id, started_at=now_iso(), command=command, host=p.config.node or facts["host"],
                 cpu=facts["cpu"], gpu=facts["gpu"], engine=p.engine, runtime=p.runtime.name,
                 model=p.model_label, config=p.config.to_toml(), rig_version=rig_version,
                 python_version=platform.python_version(), cpu_idle=cpu_idle)
    p.store.write("runs", [row], p.runtime.triton_version, "run")


class WorkerHandle:
    """One worker process in its own process group, and the pipe it reports on."""

    def __init__(self, p: Prepared, cycles: list[int], index: int):
        # The worker (and the stubs it starts) run in the run's work folder, never in the user's:
        # a file there named like a module (numpy.py) would shadow it in a stub. Paths absolute.
        work = p.work_dir.resolve()
        if p.inputs is None:
            check_run_inputs(p)
        inputs = p.inputs
        spec = CycleSpec(
            run_id=p.run_id, engine=p.engine, runtime=p.runtime.to_dict(),
            model_repository=os.path.abspath(p.repository), models=p.models, model_label=p.model_label,
            requests=p.config.requests, retain=p.config.retain, exit_timeout=p.config.exit_timeout,
            stop_strategy=p.config.stop_strategy, restart=p.config.restart,
            startup_timeout=p.config.startup_timeout, request_timeout=p.config.request_timeout,
            evidence_dir=str(work / "evidence"),
            log_dir=str(work / "logs"), cycles=cycles,
            workload={**dataclasses.asdict(p.config.workload), "node": p.config.node}
            if p.config.workload.name != "none" else None,
            hook=os.path.abspath(p.hook) if p.hook else p.hook,
            check=p.config.model_size if not p.config.model_repository else 0, cwd=os.getcwd(),
            input_data=p.config.input_data, shapes=inputs["shapes"], optional_inputs=inputs["optional"])
        (p.work_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.spec_path = work / f"spec-{index:04d}.json"
        self.spec_path.write_text(json.dumps(dataclasses.asdict(spec), indent=1))
        self.log_path = p.work_dir / "logs" / f"worker-{index:04d}.log"
        env = p.runtime.worker_env()
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        r, w = os.pipe()
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(
                [*(p.worker_argv or [*python_m("rig"), "worker"]),
                 "--spec", str(self.spec_path), "--result-fd", str(w)],
                pass_fds=(w,), start_new_session=True, env=env, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=work)
        os.close(w)
        self.pgid = self.proc.pid
        self._r = r
        self._buf = b""
        self.eof = False

    def read(self, timeout: float) -> list[dict]:
        """Messages that arrived within ``timeout`` seconds (possibly none)."""
        if self.eof:
            time.sleep(min(timeout, 0.05))
            return []
        ready, _, _ = select.select([self._r], [], [], max(0.0, timeout))
        if not ready:
            return []
        chunk = os.read(self._r, 1 << 16)
        if not chunk:
            self.eof = True
            return []
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        out = []
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):  # anything else is not a message of the worker's
                out.append(msg)
        return out

    def kill(self) -> tuple[int, int]:
        """SIGKILL the whole group; returns (stubs killed, shared-memory regions leaked)."""
        stubs = len(probes.stubs_in_group(self.pgid))
        return stubs, len(procs.kill_group(self.pgid, self.proc))

    def reap_leftovers(self) -> int:
        """After the worker exited: kill what it left in its group (stubs it never reaped)."""
        left = probes.stubs_in_group(self.pgid)
        return probes.kill_processes(left)

    def log_tail(self, n: int = 600) -> str:
        try:
            data = self.log_path.read_bytes()[-n:]
            return data.decode(errors="replace").strip().replace("\n", " | ")
        except OSError:
            return ""

    def close(self):
        try:
            os.close(self._r)
        except OSError:
            pass


def _blank_row(p: Prepared, cycle: int) -> dict:
    row = {k: None for k in CYCLE_FIELDS}
    row.update(run_id=p.run_id, cycle=cycle, engine=p.engine, model=p.model_label, retain=p.config.retain,
               restart=p.config.restart, stop_strategy=p.config.stop_strategy, started_at=now_iso(),
               host=node_name(p.config.node))
    return row


def _finish_row(p: Prepared, row: dict, wall: float | None) -> CycleRow:
    reported = row.get("triton_version")  # the core's own word, from the worker
    if reported and reported != p.runtime.triton_version:
        note = f"the core reports Triton {reported}; results are filed under {p.runtime.triton_version}"
        row["detail"] = f"{row['detail']}; {note}" if row.get("detail") else note
    row = {k: row.get(k) for k in CYCLE_FIELDS if k != "schema_version"}
    row["cycle_wall_s"], row["host"] = wall, node_name(p.config.node)
    if wall is not None:
        row["overhead_s"] = (wall - (row.get("start_latency_s") or 0) - (row.get("stop_latency_s") or 0)
                             - (row.get("workload_s") or 0))
    for k in ("stop_error", "detail"):
        if row.get(k) is not None:
            row[k] = str(row[k])[:2000]
    for f in dataclasses.fields(CycleRow):
        if f.name in row and row[f.name] is not None and f.type in ("int | None", "int"):
            row[f.name] = int(row[f.name])
    return CycleRow(**row)


def _lost_cycle(p: Prepared, cycle: int, partial: dict | None, outcome: str, cleanup: str,
                what: str, stubs: int, leaked: int, pid: int) -> dict:
    """The row of a cycle whose worker hung or died. If stop had already been measured (the
    worker sent a partial row), the stop's outcome stands and the failure goes to ``cleanup``."""
    row = _blank_row(p, cycle)
    if partial:
        row.update({k: v for k, v in partial.items() if k in row})
        row.update(cleanup=cleanup, detail=what)
    else:
        row.update(outcome=outcome, load_outcome="not_measured", detail=what)
    if partial:
        # Its shared-memory regions, which the parent no longer sees mapped by a live process
        left = probes.shm_regions_present(set(partial.get("shm_regions") or ()))
        probes.remove_shm_regions(left)
        leaked += len(left)
        # The worker died before its teardown: the stubs alive after stop were never released
        # by it. Some exit on their own once their parent is gone, before the parent can kill
        # them; a leak that a crash hides is still a leak, so count them either way.
        stubs = max(stubs, int(partial.get("stubs_alive_after_stop") or 0))
    row.update(stubs_killed=(row.get("stubs_killed") or 0) + stubs,
               shm_regions_leaked=(row.get("shm_regions_leaked") or 0) + leaked, worker_pid=pid)
    return row


def record(p: Prepared, result: CycleResult) -> None:
    """Store one cycle, for soak, cycle and bench alike: its windows first, then its row, so a
    row in ``cycles`` means its windows are stored."""
    row = result.row
    if result.windows:
        p.store.write("windows", list(result.windows), p.runtime.triton_version, f"c{row.cycle:06d}")
    p.store.write("cycles", [row], p.runtime.triton_version, f"c{row.cycle:06d}")


def run_cycles(p: Prepared, cycles: list[int], on_cycle: Callable[[CycleResult], None],
               on_window: Callable[[dict], None] | None = None,
               on_phase: Callable[[int, str], None] | None = None) -> None:
    """Run the given cycle numbers in workers. Each cycle's ``CycleResult`` (its row and its
    windows) goes to ``on_cycle`` as soon as it is known; ``on_window`` sees each window's
    message as it arrives (progress), ``on_phase`` each phase."""
    pending = list(cycles)
    windows: dict[int, list[WindowRow]] = {}

    def finish(row: dict, wall: float | None) -> None:
        done = _finish_row(p, row, wall)
        on_cycle(CycleResult(done, tuple(windows.pop(done.cycle, ()))))
    index = 0
    while pending:
        index += 1
        batch = pending[:1] if p.config.restart == "fresh-process" else list(pending)
        w = WorkerHandle(p, batch, index)
        current: int | None = None
        t_cycle = time.monotonic()
        deadline = time.monotonic() + p.config.startup_timeout + 60
        phase = "spawn"
        partial: dict = {}
        try:
            while True:
                for msg in w.read(min(0.5, max(0.0, deadline - time.monotonic()))):
                    kind = msg.get("type")
                    if kind == "cycle_start":
                        current, t_cycle = msg["cycle"], time.monotonic()
                        partial = {}
                    elif kind == "phase":
                        phase = msg["phase"]
                        deadline = time.monotonic() + float(msg["timeout_s"])
                        if on_phase and current is not None:
                            on_phase(current, phase)
                    elif kind == "window":
                        windows.setdefault(int(msg.get("cycle") or 0), []).append(
                            window_row(p.run_id, p.engine, p.model_label, {**msg, "host": node_name(p.config.node)}))
                        if on_window:
                            on_window(msg)
                    elif kind == "cycle":
                        row = _blank_row(p, msg["row"]["cycle"])
                        row.update({k: v for k, v in msg["row"].items() if k in row})
                        row["triton_version"] = msg["row"].get("triton_version")  # the core's word
                        if row.get("outcome") == "load_failed" and "stub" in str(row.get("detail")).lower():
                            # a stub that died while loading: its last words are in the worker's log
                            tail = w.log_tail(400)
                            if tail:
                                row["detail"] = f"{row['detail']}; the stub's last output: {tail}"
                        if p.config.restart == "fresh-process":
                            try:
                                w.proc.wait(30)
                            except subprocess.TimeoutExpired:
                                pass
                            extra = w.reap_leftovers()
                            row["stubs_killed"] = (row.get("stubs_killed") or 0) + extra
                        finish(row, time.monotonic() - t_cycle)
                        pending.remove(row["cycle"])
                        current = None
                        deadline = time.monotonic() + p.config.startup_timeout + 60
                    elif kind == "partial":
                        partial["row"] = msg["row"]
                    elif kind == "fatal":
                        partial["detail"] = msg.get("error")
                    elif kind == "refused":  # the inputs do not fit a model: bad input, no cycle stored
                        raise RigError(str(msg.get("error")))
                if w.proc.poll() is not None and w.eof:
                    break
                if w.proc.poll() is not None:
                    # Drain what is left in the pipe, then decide.
                    continue
                if time.monotonic() > deadline:
                    stubs, leaked = w.kill()
                    cyc = current if current is not None else (pending[0] if pending else None)
                    if cyc is not None:
                        row = _lost_cycle(p, cyc, partial.get("row"), "hung", "hung",
                                          f"phase {phase} ran past its deadline; worker group killed",
                                          stubs, leaked, w.proc.pid)
                        finish(row, time.monotonic() - t_cycle)
                        pending.remove(cyc)
                    break
            rc = w.proc.wait()
            # A worker that ends (even with status 0) before reporting a cycle of its batch has
            # lost that cycle: record it, never spawn another worker for it.
            if pending and pending[0] in batch:
                cyc = current if current is not None else pending[0]
                stubs, leaked = w.kill()
                how = (f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}")
                row = _lost_cycle(p, cyc, partial.get("row"), "crashed", f"crashed: {how}",
                                  f"worker {how} in phase {phase}: {partial.get('detail') or w.log_tail()}",
                                  stubs, leaked, w.proc.pid)
                finish(row, time.monotonic() - t_cycle)
                pending.remove(cyc)
        except BaseException:
            w.kill()
            raise
        finally:
            w.close()

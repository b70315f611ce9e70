"""What is checked before anything starts (runtime, engine, model repository, inputs), the
``Prepared`` run, and its ``runs`` row."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import platform
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rig.common import cpushare
from rig.common.errors import RigError
from rig.common.version import __version__ as rig_version
from rig.contract.fleet import check_master
from rig.contract.rows import RunRow, now_iso
from rig.contract.runtime import BuiltRuntime, EmbeddedRuntime, stub_site_of
from rig.parent import engines, repository
from rig.parent import runtime as runtime_mod
from rig.parent.config import RunConfig
from rig.parent.options import gpu_of
from rig.parent.preflight import (
    check_inputs,
    check_workload,
    cupy_usable,
    ensure_evidence_hook,
    host_facts,
    lock_run,
    without_spaces,
)
from rig.scenarios import catalog as scenarios
from rig.scenarios import core_features
from rig.scenarios import setup as scenario_setup


class Recorder(Protocol):
    """Where a run's rows go, and its local work folder: what the orchestrator needs of the store
    (``rig.store.Store`` is one; the orchestrator sits below it and never imports it)."""

    local: bool  # the results are a local folder (else object storage)

    def work_dir(self, run_id: str) -> Path: ...

    def write(self, table: str, rows: list, triton_version: str, unit: str): ...


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
    store: Recorder
    # The command that runs a worker, before ``--spec FILE --result-fd N`` (None: this
    # interpreter's ``-m rig worker``). Tests put a fake worker here to exercise the watchdog.
    worker_argv: list[str] | None = None
    lock: object = None  # the open file whose flock says this process runs the run
    hook: str | None = None  # the evidence hook the stubs run (None: it could not be installed)
    inputs: dict | None = None  # preflight.check_inputs of the models loaded (None: not checked yet)
    made: Path | None = None  # the outermost folder this process made for the work folder (a new run)
    # What is fixed for the run, worked out once (not copied by dataclasses.replace: a bench point
    # with another config works them out again): the workers' spec and the rows' run-wide values.
    spec: object = dataclasses.field(default=None, init=False, repr=False)  # orchestrator.spec.run_spec
    tags: dict | None = dataclasses.field(default=None, init=False, repr=False)  # orchestrator.rows.run_tags


def template_spec(cfg: RunConfig) -> repository.ModelSpec:
    """The rig's template model as a run of ``cfg`` serves it (``rig repro`` writes the same)."""
    return repository.ModelSpec(
        kind=cfg.model,
        size=cfg.model_size,
        instances=cfg.instances,
        max_batch_size=cfg.max_batch_size,
        dynamic_batching=cfg.dynamic_batching,
        queue_delay_us=cfg.queue_delay_us,
        decoupled=cfg.decoupled,
        fault=cfg.fault,
        execute_delay_ms=cfg.execute_delay_ms,
        load_sleep_s=repository.load_slow_s(cfg.exit_timeout) if cfg.fault == "load-slow" else None,
        gpu=gpu_of(cfg),
    )


def _scenario_models(cfg: RunConfig) -> bool:
    """Whether the run's scenario serves models of its own (not the template)."""
    return bool(cfg.scenario and scenarios.get(cfg.scenario).repository)


def prepare(
    cfg: RunConfig, command: str, store: Recorder, run_id: str | None = None, log: Callable[[str], None] = print
) -> Prepared:
    """Everything checked before anything starts: runtime, engine, model repository. ``store``
    (opened and checked by the command) takes the run's rows."""
    rt = runtime_mod.resolve(cfg.runtime, log=log)
    if rt.kind in ("embedded", "built"):  # their stubs are this interpreter's version, linked to its libpython
        problem = runtime_mod.libpython_problem()
        if problem:
            raise RigError(problem)
    if (
        isinstance(rt, (EmbeddedRuntime, BuiltRuntime))
        and rt.stub_site
        and cfg.model == "cupy"
        and not cfg.model_repository
        and not _scenario_models(cfg)
    ):
        # CuPy 14 imports only over numpy 2, so the numpy-1 folder of an embedded core's stubs would
        # fail the model's import; the CuPy model never hands the stub a numpy array (its tensors
        # come and go by DLPack: models/cupy/1/model.py), the path numpy 2 breaks in those stubs.
        rt = dataclasses.replace(rt, stub_site=None)
    if cfg.scenario:  # a scenario whose models need what this core was built without: one line
        core_features.check(scenarios.get(cfg.scenario), rt)
    hook = ensure_evidence_hook(log)
    engine, reason = engines.select(cfg.engine, rt)
    if cfg.workload.name.endswith(".py"):
        check_workload(cfg.workload.name)
    if cfg.workload.master:
        check_master(cfg.workload.master)
    run_id = run_id or new_run_id()
    work = store.work_dir(run_id)  # local even where the results are remote (storefs.work_root)
    made = next((d for d in [work, *work.parents] if d.parent.exists()), None) if not work.exists() else None
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if store.local:
            raise RigError(f"cannot write results to {cfg.results} ({e.strerror}): choose another --results") from None
        raise RigError(
            f"cannot write the run's work folder {work} ({e.strerror}): set RIG_WORK_DIR to a writable folder"
        ) from None
    lock = lock_run(work, run_id)
    if cfg.scenario and scenarios.get(cfg.scenario).repository:  # its own models, the fault on or off
        repo = scenario_setup.materialize(Path(cfg.model_repository), work / "models", cfg.control, cfg.model_shape)
        names = repository.repository_models(repo)
        label = ",".join(names)
    elif cfg.model_repository:
        repo = Path(cfg.model_repository).resolve()
        names = repository.repository_models(repo)
        label = ",".join(names) if len(names) <= 3 else f"{repo.name}({len(names)} models)"
    else:
        if cfg.model == "cupy":
            ok, why = cupy_usable()
            if not ok:
                raise RigError(f"the cupy model needs a CUDA device and CuPy here: {why}; use --model numpy")
        repo = work / "models"
        spec = template_spec(cfg)
        repository.render(spec, repo)
        names = [spec.model_name]
        label = cfg.model if cfg.fault == "none" else f"{cfg.model}:{cfg.fault}"
    repo = without_spaces(repo, run_id, log)
    p = Prepared(run_id, cfg, rt, engine, reason, repo, names, label, work, store, lock=lock, hook=hook, made=made)
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


def _version(name: str, path: list[str] | None = None) -> str | None:
    """The installed version of ``name`` found first on ``path`` (default ``sys.path``, as an
    import would find it); None where it is not installed."""
    found = next(iter(importlib.metadata.distributions(name=name, path=path or sys.path)), None)
    return found.version if found is not None else None


def package_versions(
    engine: str, locust: bool, stub_site: str | None, bindings: str | None = None
) -> dict[str, str | None]:
    """The versions of the packages that shape a run's figures (``RunRow``'s ``*_version``).

    The worker is this interpreter in this environment (``python -P -m rig worker``; its
    ``PYTHONPATH`` gains only the rig's own folder), so what this process finds is what the
    worker imports. The backend stubs put the runtime's numpy-1 folder (``EmbeddedRuntime.stub_site``)
    first on their path where there is one (``rig/worker/hook/evidence.py``'s ``.pth`` line), else
    import the worker's numpy. ``locust``: whether the run sends Locust load; the
    ``tritonserver`` bindings count with that engine only, found first in ``bindings`` (a built
    runtime's own folder, first on the worker's path: ``rig.parent.runtime.official_bindings``)."""
    return {
        "locust_version": _version("locust") if locust else None,
        "numpy_version": _version("numpy"),
        "stub_numpy_version": _version("numpy", [stub_site, *sys.path] if stub_site else None),
        "pyarrow_version": _version("pyarrow"),
        "tritonserver_version": (
            _version("tritonserver", [bindings, *sys.path] if bindings else None) if engine == "tritonserver" else None
        ),
    }


def write_run_row(p: Prepared, command: str, cpu_idle: str | None = None, neighbour: str | None = None) -> None:
    facts = host_facts()
    locust = command == "bench" or p.config.workload.name != "none"  # bench always sends a workload
    row = RunRow(
        run_id=p.run_id,
        started_at=now_iso(),
        command=command,
        host=p.config.node or facts["host"],
        cpu=facts["cpu"],
        gpu=facts["gpu"],
        gpu_notes=facts["gpu_notes"],
        engine=p.engine,
        runtime=p.runtime.name,
        model=p.model_label,
        config=p.config.to_toml(),
        rig_version=rig_version,
        python_version=platform.python_version(),
        cpu_idle=cpu_idle,
        **package_versions(p.engine, locust, stub_site_of(p.runtime), getattr(p.runtime, "bindings", None)),
        **cpushare.current(),
        neighbour=neighbour,
    )
    p.store.write("runs", [row], p.runtime.triton_version, "run")

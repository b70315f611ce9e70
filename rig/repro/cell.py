"""The cell a ``rig repro`` folder reproduces: the scenarios it covers (``refusal`` says why another
is not covered, and what to run instead), the scenario and runtime named, the run config the rig
gives the cell, the verdicts it is held to, and what the script needs to know of it (``cell_of``:
``CELL``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rig.common.errors import RigError

ALIASES = {"baseline": "template"}  # the plain template, as `name_of` files a cycle with no scenario
ENGINE = "capi"  # the verdicts a repro is held to: the rig's C API engine's, which the script follows
LOAD_USERS = 2  # a workload scenario's load (rig matrix's SCENARIO_LOAD_KEYS): 2 users for 2 s
LOAD_SECONDS = 2.0
REQUEST_TIMEOUT_S = 5.0  # rig matrix's SCENARIO_REQUEST_TIMEOUT
# The clients around stop() the script does as the rig's do (rig.worker.clients, rig.worker.observers).
CLIENTS = (
    "none",
    "stop-in-flight",
    "refused-request",
    "stop-while-loading",
    "load-missing",
    "stub-killed",
    "sequence-at-stop",
)
# sequence-at-stop's client: rig.worker.clients.sequences' SEQUENCES, FIRST_SEQUENCE and IDLE_WAIT_S (a
# module of the worker's side, which rig.repro does not import; a test holds the two the same).
SEQUENCES = {"n": 4, "first": 1001, "idle_s": 1.5}
NEEDS = ("ensemble", "sequence_batching")  # the core features (Scenario.needs) whose models the script serves
# Scenarios the script runs but whose known verdict its run did not give (checked on 2.51.0).
NOT_REPRODUCED = {
    "sender-after-return": (
        "the script's run of it stops clean on 2.51.0 (its 2 requests never answered, the model unloaded in 1.2 s) "
        "where the rig's gives exit_timeout: not yet reproduced without the rig"
    ),
}


# ---------------------------------------------------------------- what it covers


def refusal(s) -> str | None:
    """Why ``rig repro`` does not cover scenario ``s`` (what one run of the C API cannot show, or
    what the script does not do), with what to run instead; None where it covers it."""
    run = f"run it with rig soak --scenario {s.name}"
    if s.growth != "ok" or s.client == "memory":
        return f"its verdict is a growth measure (memory or speed over many requests), which a repro cannot take: {run}"
    if s.restart:
        return f"it needs a restart mode ({s.restart}: one server over many cycles): {run} --cycles 5"
    if s.kills_worker:
        return f"the rig kills the server's process (the worker) and counts what it left: {run}"
    if s.client == "exit-after-stop":
        return f"the process exits right after stop() and the rig counts the /dev/shm regions it left: {run}"
    if s.client == "reload-in-place":
        return f"its verdict is the server's process crashing after a reload in place (an intermittent race): {run}"
    if set(s.needs) - set(NEEDS):
        return f"its models need the core's {', '.join(s.needs)}, which the script does not serve: {run}"
    if s.name in NOT_REPRODUCED:
        return f"{NOT_REPRODUCED[s.name]}: {run}"
    if s.client not in CLIENTS:
        return f"its client ({s.client}) is the rig's alone: {run}"
    return None


def covers(s) -> bool:
    """Whether ``rig repro`` covers scenario ``s`` (``refusal`` says why not)."""
    return refusal(s) is None


def covered_names() -> list[str]:
    from rig.scenarios.catalog import SCENARIOS

    return [name for name, s in SCENARIOS.items() if covers(s)] + list(ALIASES)


def scenario_of(name: str):
    """The scenario ``name`` names (``baseline``: the plain template), or one line: unknown, or not covered."""
    from rig.scenarios import catalog

    s = catalog.get(ALIASES.get(name, name))
    why = refusal(s)
    if why:
        raise RigError(f"rig repro does not cover {name}: {why}")
    return s


# ---------------------------------------------------------------- the runtime


def runtime_of(spec: str, log=print):
    """The runtime ``spec`` names (``rig.parent.runtime.resolve``, installing nothing). A Triton version
    that no source build here has, but an installed wheel bundles (2.51.0: nvidia-pytriton 0.7.0),
    names that wheel's core."""
    from rig.parent import runtime

    try:
        rt = runtime.resolve(spec, auto_install=False, log=log)
    except RigError:
        wheels = [r for r in runtime.list_embedded() if r["triton_version"] == spec]
        if not wheels:
            raise
        wheels.sort(key=lambda r: (r["package_version"] != runtime.DEFAULT_EMBEDDED, r["package_version"]))
        chosen = wheels[0]["package_version"]
        log(f"Triton {spec}: no source build of it here; the core of nvidia-pytriton {chosen} (embedded-{chosen})")
        rt = runtime.resolve(chosen, auto_install=False, log=log)
    if rt.kind in ("embedded", "built"):
        problem = runtime.libpython_problem()
        if problem:
            raise RigError(problem)
    return rt


def manifest_of(rt) -> dict:
    path = Path(rt.server_dir).parent / "runtime.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def cell_config(s, control: bool, shape: str | None, exit_timeout: int, runtime: str):
    """The run config the rig gives this cell (``rig.scenarios.catalog.apply`` through ``validate``)."""
    from rig.parent import config

    try:
        return config.load(
            None,
            {
                "scenario": s.name,
                "control": control or None,
                "model_shape": shape,
                "exit_timeout": exit_timeout,
                "request_timeout": REQUEST_TIMEOUT_S,
                "runtime": runtime,
            },
        )
    except RigError as e:  # the config's words for the options, this command's for its own
        raise RigError(str(e).replace("--model-shape", "--shape")) from None


def expected_of(s, control: bool, shape: str, version: str) -> dict:
    """The verdicts the cell is held to: the rig's known ones for the C API on this core, else the
    control's contract, else the scenario's own."""
    from rig.scenarios import known

    k = known.expected(s, control, shape, ENGINE, version)
    if k is not None and k.run_id != "contract":
        return {
            "lifecycle": k.lifecycle,
            "load": k.load,
            "source": f"the rig's known verdicts for the C API on Triton {version}, {shape} (run {k.run_id})",
        }
    if k is not None:
        return {"lifecycle": k.lifecycle, "load": k.load, "source": "a negative control's contract"}
    lifecycle, load = s.expected
    return {
        "lifecycle": lifecycle,
        "load": load,
        "source": f"the scenario's expected verdicts (none known yet for Triton {version})",
    }


def cell_of(s, cfg, rt, control: bool, models: list[str]) -> dict[str, Any]:
    """What ``repro.py`` needs to know of the cell (``CELL``): plain values only."""
    from rig.contract.spec import REFUSED
    from rig.contract.verdicts import LOAD_OUTCOMES, OUTCOMES

    shape = str(cfg.model_shape)
    title = f"{s.name}{' (negative control)' if control else ''}, {shape}, Triton {rt.triton_version}"
    workload = None
    if s.workload:
        workload = {"users": s.users or LOAD_USERS, "seconds": LOAD_SECONDS}
    what = s.what
    if control:
        what = (
            "the template model with no fault, nothing kept across stop()"
            if s.template and cfg.client == "none"
            else f"{s.name}'s models with the fault switched off, no client around stop()"
            if cfg.client == "none"
            else f"{s.name}'s models and client with the fault switched off"
        )
    return {
        "title": title,
        "scenario": s.name,
        "control": control,
        "shape": shape,
        "what": what,
        "upstream": list(s.upstream),
        "runtime": rt.name,
        "triton_version": rt.triton_version,
        "models": models,
        "template": s.template,
        "size": cfg.model_size,
        "fault": cfg.fault,
        "retain": cfg.retain,
        "client": cfg.client,
        "in_flight_at_stop": s.in_flight,
        "refused": REFUSED,
        "requests": cfg.requests,
        "in_flight": cfg.requests_in_flight,
        "workload": workload,
        "sequences": sequences_of(cfg.client),
        "request_timeout": cfg.request_timeout,
        "exit_timeout": cfg.exit_timeout,
        "expected": expected_of(s, control, shape, rt.triton_version),
        "meanings": {**OUTCOMES, **{k: v for k, v in LOAD_OUTCOMES.items() if k not in OUTCOMES}},
    }


def sequences_of(client: str) -> dict[str, Any] | None:
    """The sequences the ``sequence-at-stop`` client opens (``SEQUENCES``); None for another client."""
    return dict(SEQUENCES) if client == "sequence-at-stop" else None

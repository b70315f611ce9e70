"""A scenario put to work: a run's config made to run it (``apply``: its fault, retention, client
and model shape, or its control) and its own model repository copied for a cycle
(``materialize``), the scenarios themselves being ``rig.scenarios.catalog``'s."""

from __future__ import annotations

import dataclasses
import re
import shutil
import typing
from pathlib import Path

from rig.common.errors import RigError
from rig.contract.option_table import RunOptions
from rig.scenarios.catalog import Scenario, get
from rig.scenarios.models_dir import templates_dir

# A run's options: the parent's RunConfig, which calls ``apply`` from its checks. Typed by the option
# table's fields it is made of (rig.contract), not by the parent's config, which would import back.
Config = typing.TypeVar("Config", bound=RunOptions)


def apply(cfg: Config) -> Config:
    """``cfg`` made to run its scenario: the fault and retention it is built from, none of them
    for its control. A fault, retention or model repository of the user's own cannot
    combine with a scenario (its own would be lost): refused in one line."""
    if cfg.scenario is None:
        return cfg
    s = get(cfg.scenario)
    if cfg.control and not s.has_control:
        raise RigError(
            f"--scenario {s.name} has no negative control (it measures; it injects no fault): drop --control"
        )
    # A scenario made by its client (or restart mode) also runs over the user's own models
    users_models = bool(
        cfg.model_repository
        and (s.client != "none" or s.restart or s.kills_worker)
        and (s.repository is None or Path(cfg.model_repository).resolve() != repository_of(s).resolve())
    )
    if users_models and cfg.control and s.repository is not None and not s.client_is_fault:
        raise RigError(
            f"--control with --scenario {s.name} needs its own models (their fault switched off); over your "
            f"models run the control without --scenario: drop --control or --model-repository"
        )
    want_fault = "none" if cfg.control or users_models else s.fault
    want_retain = "none" if cfg.control else s.retain
    clashes = [
        f"--{k.replace('_', '-')} {v}"
        for k, v, mine in (("fault", cfg.fault, want_fault), ("retain", cfg.retain, want_retain))
        if v not in ("none", mine)
    ]
    if (
        cfg.model_repository
        and not users_models
        and (s.repository is None or Path(cfg.model_repository) != repository_of(s))
    ):
        clashes.append("--model-repository")
    if s.restart and cfg.restart not in ("fresh-process", s.restart):
        clashes.append(f"--restart {cfg.restart}")
    if s.client == "stop-while-loading" and cfg.stop_strategy != "stop":
        clashes.append(f"--stop-strategy {cfg.stop_strategy}")
    shape = _shape_of(cfg, s, users_models, clashes)
    if clashes:
        sets = (
            "its own models"
            if s.repository
            else "its client and restart mode"
            if users_models
            else "the fault, retention and model shape"
        )
        raise RigError(f"{', '.join(clashes)} cannot combine with --scenario {s.name}, which sets {sets}: drop them")
    changes: dict = dict(
        fault=want_fault,
        retain=want_retain,
        client="none" if cfg.control and s.client_is_fault else s.client,
        model_shape=shape,
    )
    if s.restart:
        changes["restart"] = s.restart
    if s.requests and cfg.requests == type(cfg).requests:  # the default: a count of the user's stands
        changes["requests"] = s.requests
    if s.execute_delay_ms is not None and cfg.execute_delay_ms == type(cfg).execute_delay_ms:
        changes["execute_delay_ms"] = s.execute_delay_ms
    if s.users is not None and cfg.workload.users == type(cfg.workload).users:  # a count of the user's stands
        changes["workload"] = dataclasses.replace(cfg.workload, users=s.users)
    if s.repository is not None and not users_models:
        changes["model_repository"] = str(repository_of(s))
    if s.template and not users_models:
        from rig.scenarios import shapes

        sh = shapes.parse(str(shape))
        changes.update(sh.settings())
        if cfg.workload.name == "none" and cfg.requests_in_flight == 1:  # the default: one at a time
            changes["requests_in_flight"] = sh.in_flight  # so that batches form and every instance runs
    return dataclasses.replace(cfg, **changes)


def _shape_of(cfg, s: Scenario, users_models: bool, clashes: list[str]) -> str | None:
    """The model shape ``cfg`` runs scenario ``s`` in: the one asked for (``--model-shape``), one
    of those it runs in, or its first; None over a user's own models (their config says)."""
    if users_models:
        if cfg.model_shape:
            clashes.append(f"--model-shape {cfg.model_shape}")
        return None
    if cfg.model_shape is None:
        return s.shapes[0]
    from rig.scenarios import shapes

    name = shapes.parse(cfg.model_shape).name
    if name not in s.shapes:
        raise RigError(
            f"--model-shape {cfg.model_shape}: scenario {s.name} runs in {', '.join(s.shapes)} "
            "(the shapes that can move its verdict)"
        )
    sh = shapes.parse(name)
    # the template's defaults, or the shape's own (a stored config read back: --resume, a matrix cell)
    if s.template and shapes.settings_of(cfg) not in (shapes.DEFAULTS, shapes.settings_of(sh)):
        clashes.append("--instances/--max-batch-size/--dynamic-batching/--queue-delay-us")
    return name


def repository_of(s: Scenario) -> Path:
    return templates_dir() / "scenarios" / str(s.repository)


def materialize(source: Path, dest: Path, control: bool, shape: str | None = None) -> Path:
    """A scenario's repository copied to ``dest`` with every model's ``fault`` parameter set to
    ``off`` (its negative control) or left ``on``, and served with the instances ``shape`` names
    (its other parts are the models' own: a shape a scenario runs in never asks for others)."""
    from rig.scenarios import shapes

    instances = shapes.parse(shape).instances if shape else 1
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    value = "off" if control else "on"
    for cfg in dest.glob("*/config.pbtxt"):
        text = cfg.read_text()
        new = re.sub(r'(key:\s*"fault"\s*,?\s*value:\s*\{\s*string_value:\s*)"\w+"', rf'\1"{value}"', text)
        if instances > 1:
            new = shapes.with_instances(new, instances)
        cfg.write_text(new)
    return dest

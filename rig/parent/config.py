"""The effective configuration of a run: defaults < TOML file < command-line options.

``RunConfig`` is the option table's fields (``rig.contract.option_table``, where each option is
one line) with the checks a run makes of them. Every key of the file is a field of it (sections
``[thresholds]`` and ``[workload]`` hold the nested ones), read by the table's ``read``; an unknown
key, a wrong type or a bad value is one ``RigError`` line, raised before anything starts.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from collections.abc import Callable
from pathlib import Path

from rig.common.errors import RigError
from rig.contract import option_table
from rig.contract.engines import ENGINES
from rig.contract.option_table import (
    WORKLOADS,
    Arrivals,
    RestartMode,
    Retain,
    RunOptions,
    StopStrategy,
)
from rig.contract.option_table import Thresholds as Thresholds  # the run's sections, read here too
from rig.contract.option_table import WorkloadConfig as WorkloadConfig
from rig.parent.repository import FAULTS, KINDS

# Each vocabulary of the options, from the table (rig.contract.option_table): the command line's
# choices, the TOML file's checks and the matrix's lists all read these.
RETAIN = typing.get_args(Retain)
STOP_STRATEGIES = typing.get_args(StopStrategy)
RESTART_MODES = typing.get_args(RestartMode)
ARRIVALS = typing.get_args(Arrivals)
MODELS = KINDS  # the rig's template models (rig.parent.repository renders them)
FAULT_PRESETS = tuple(FAULTS)  # the template model's fault injection presets
VOCABULARIES = {"models": MODELS, "faults": FAULT_PRESETS}  # the table's choices named, not listed there


@dataclasses.dataclass(frozen=True)
class RunConfig(RunOptions):
    """A run's options, frozen: the option table's fields (``rig.contract.option_table.RunOptions``),
    built once from the defaults, the TOML file and the command line (``load``), checked once
    (``validate``, which returns the config a scenario or a model shape completes). A command that
    runs something else (a bench point, a resumed run's new place) derives a config of its own with
    ``dataclasses.replace``; none is edited in place."""

    def validate(self) -> RunConfig:
        """This config checked (bad input: one ``RigError`` line), as the run will use it: a
        locustfile's path made absolute, a scenario or a model shape applied, the inputs in their
        canonical form."""

        def one_of(name, value, allowed):
            if value not in allowed:
                raise RigError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")

        one_of("engine", self.engine, ENGINES)
        one_of("retain", self.retain, RETAIN)
        one_of("stop_strategy", self.stop_strategy, STOP_STRATEGIES)
        one_of("restart", self.restart, RESTART_MODES)
        cfg = self
        if cfg.workload.name.endswith(".py"):
            path = Path(cfg.workload.name).expanduser()
            if not path.is_file():
                raise RigError(
                    f"workload file {path} does not exist: give a locustfile, or one of {', '.join(WORKLOADS)}"
                )
            cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, name=str(path.resolve())))
            if cfg.workload.rate is not None:
                raise RigError(
                    "--rate drives the rig's own open-loop lane; a locustfile workload is "
                    "closed loop (its users send the requests): drop one of the two"
                )
        else:
            one_of("workload.name", cfg.workload.name, ("none",) + WORKLOADS)
        one_of("workload.arrivals", cfg.workload.arrivals, ARRIVALS)
        w = cfg.workload
        if (
            w.seconds <= 0
            or w.window_seconds <= 0
            or w.users < 1
            or w.in_flight < 1
            or (w.rate is not None and w.rate <= 0)
        ):
            raise RigError("workload seconds, window_seconds and rate must be > 0; users and in_flight >= 1")
        if w.master is not None:
            from rig.contract.fleet import parse_master

            parse_master(w.master)
        if cfg.scenario is not None:
            from rig.scenarios import setup as scenario_setup

            cfg = scenario_setup.apply(cfg)
        elif cfg.model_shape is not None:
            cfg = cfg._model_shape()
        elif cfg.control:
            raise RigError(
                "--control runs a scenario's negative control: give --scenario NAME too (`rig scenarios` lists them)"
            )
        if cfg.model_repository is None:
            one_of("model", cfg.model, MODELS)
            one_of("fault", cfg.fault, FAULT_PRESETS)
        cfg = cfg._inputs()
        if cfg.cycles < 1 or cfg.requests < 0 or cfg.exit_timeout < 0 or cfg.requests_in_flight < 1:
            raise RigError("cycles must be >= 1, requests >= 0, requests_in_flight >= 1 and exit_timeout >= 0")
        t = cfg.thresholds
        if t.min_finalize_success is not None and not 0 <= t.min_finalize_success <= 1:
            raise RigError("thresholds.min_finalize_success is a fraction between 0 and 1")
        if t.max_memory_growth < 0 or t.max_slowdown < 0:
            raise RigError(
                "thresholds.max_memory_growth (bytes per 1,000 requests) and thresholds.max_slowdown (%) must be >= 0"
            )
        return cfg

    def _model_shape(self) -> RunConfig:
        """The template model served in ``model_shape`` (rig.scenarios.shapes): its batching, instances and
        transaction policy; a model repository's own, or a shape given twice, refused in one line."""
        from rig.scenarios import shapes

        assert self.model_shape is not None
        if self.model_repository:
            raise RigError(
                f"--model-shape {self.model_shape} shapes the rig's template model, and "
                "--model-repository runs your own (its config.pbtxt says its shape): drop one"
            )
        shape = shapes.parse(self.model_shape)
        if shapes.settings_of(self) not in (shapes.DEFAULTS, shapes.settings_of(shape)):
            raise RigError(
                f"--model-shape {self.model_shape} sets the model's batching and instances: drop "
                "--instances, --max-batch-size, --dynamic-batching and --queue-delay-us (or --model-shape)"
            )
        return dataclasses.replace(self, **shape.settings(), model_shape=shape.name)

    def _inputs(self) -> RunConfig:
        """``input_data`` zero, random or a file (made absolute: the worker runs elsewhere; a
        relative path is the user's working folder's), ``shapes`` in its canonical text."""
        from rig.contract.inputs import GENERATED, format_shapes, parse_shapes

        input_data = self.input_data
        if input_data not in GENERATED:
            path = Path(input_data).expanduser()
            if not path.is_file():
                raise RigError(
                    f"--input-data {input_data}: no such file (give zero, random, or a JSON "
                    "file in perf_analyzer's format)"
                )
            input_data = str(path.resolve())
        return dataclasses.replace(self, input_data=input_data, shapes=format_shapes(parse_shapes(self.shapes)) or None)

    def to_toml(self) -> str:
        """The effective config as TOML text (stored with every run; ``option_table.to_toml``)."""
        return option_table.to_toml(self)


def load(
    path: str | None, overrides: dict | None = None, settle: Callable[[RunConfig], RunConfig] | None = None
) -> RunConfig:
    """Defaults, then the TOML file (if any), then the non-None overrides (dotted keys allowed);
    ``settle``, a command's own rule on what was given (a rate alone means an open loop), before
    the one check."""
    cfg = RunConfig()
    if path:
        p = Path(path)
        if not p.is_file():
            raise RigError(f"config file {path} does not exist")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise RigError(f"config file {path} is not valid TOML: {e}") from None
        cfg = option_table.read(cfg, data, str(path))
    cfg = option_table.read(cfg, _nested(overrides or {}), "option")
    if settle is not None:
        cfg = settle(cfg)
    return cfg.validate()


def _nested(flat: dict) -> dict:
    """Config keys, dotted for a section's (``workload.users``), as the nested tables a file
    gives; a None value is left out (not given)."""
    nested: dict = {}
    for key, value in flat.items():
        if value is None:
            continue
        if "." in key:
            section, sub = key.split(".", 1)
            nested.setdefault(section, {})[sub] = value
        else:
            nested[key] = value
    return nested


def file_sets(path: str | None, section: str, key: str) -> bool:
    """Whether the TOML config file at ``path`` sets ``[section] key`` itself (a command whose
    default differs from the config's, such as bench's window length, yields to the file)."""
    if not path:
        return False
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    table = data.get(section)
    return isinstance(table, dict) and any(k.replace("-", "_") == key for k in table)


def from_toml_text(text: str) -> RunConfig:
    return option_table.read(RunConfig(), tomllib.loads(text), "stored config").validate()


def derive(base: RunConfig, changes: dict, validate: bool = True) -> RunConfig:
    """``base`` with ``changes`` (config keys, dotted for a section's: ``workload.users``,
    ``thresholds.allow_outcomes``; a None value leaves the key as it is), as ``load`` reads a
    file and then options: ``base.to_toml()`` parsed, the changes applied, validated (a bad key,
    type or value is one ``RigError`` line). ``base.to_toml()`` redacts a results URI's
    credentials: give ``results`` in ``changes`` where it has any. ``validate=False``: the config
    as a file gives it, not yet validated (a scenario named but not applied), whose ``to_toml()``
    ``from_toml_text`` validates once (an applied scenario's does not read back: its shape's
    settings clash with it)."""
    cfg = option_table.read(RunConfig(), tomllib.loads(base.to_toml()), "base config")
    cfg = option_table.read(cfg, _nested(changes), "option")
    return cfg.validate() if validate else cfg

"""The option table (rig.contract.option_table) is the one place a run option is written: every field
of the config is a line of it and reaches the worker's spec or says why not, every flag of the run
commands reaches a field (or says where else it goes), and the TOML the config is stored as reads
back to the same config."""

from __future__ import annotations

import argparse
import dataclasses
import tomllib
import typing

import pytest

from rig import cli
from rig.contract import option_table as table
from rig.contract.cell import BenchSettings
from rig.contract.runtime import ContainerRuntime
from rig.contract.spec import ClosedLoop, CycleSpec, OpenLoop
from rig.parent import config, options
from rig.parent.orchestrator.prepare import Prepared
from rig.parent.orchestrator.spec import run_spec

ENTRIES = table.entries()
# A value a run accepts for each option whose type alone does not give one (a new str option that
# reaches the spec needs a line here: the walk below cannot make one up)
SAMPLES = {
    "input_data": "zero",
    "input_memory": "gpu",
    "shapes": "X:2,3",
    "client": "exit-after-stop",
    "workload.name": "ramp",
    "workload.master": "127.0.0.1:5557",
    "node": "n1",
}
# The options of a run command that are no field of the config, beside FLAGS: each command's own
OWN = {
    "cycle": {},
    "soak": {
        "--resume": "the run continued (soak.Resume): its stored config is the run's",
        "--cpu-idle": "held by the command around the run (rig.common.cpuidle); runs.cpu_idle records it",
        "--summary-json": "a file the judged run is written to (soak.Outputs)",
    },
    "bench": {f"--{f.name.replace('_', '-')}": "a BenchSettings field" for f in dataclasses.fields(BenchSettings)},
    "matrix": {},  # its own group, "the matrix" (rig.commands.matrix._matrix_options)
}


def _sample(e: table.Entry):
    """A value of ``e``'s type other than its default, valid for a run."""
    if e.key in SAMPLES:
        return SAMPLES[e.key]
    kinds = [t for t in (typing.get_args(e.type) or (e.type,)) if t is not type(None)]
    if typing.get_origin(e.type) is typing.Literal:
        return next(v for v in typing.get_args(e.type) if v != e.default)
    if bool in kinds:
        return not e.default
    if int in kinds:
        return 8089 if e.default is None else e.default + 2
    if float in kinds:
        return 6.5 if e.default is None else e.default + 1.5
    raise AssertionError(f"{e.key}: no sample value for its type {e.type}; add one to SAMPLES")


def _get(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _spec(tmp_path, changes: dict) -> CycleSpec:
    """The spec of a run whose config is the defaults with ``changes`` (validated as a run's)."""
    repo = tmp_path / "repo"
    (repo / "m").mkdir(parents=True, exist_ok=True)
    cfg = config.load(None, changes)
    runtime = ContainerRuntime("container", "2.51.0", "/opt/tritonserver", "/x/libtritonserver.so", "/x/backends")
    p = Prepared("r", cfg, runtime, "capi", "", repo, ["m"], "m", tmp_path / "work", store=None)
    return run_spec(p)


def test_every_field_of_the_config_is_a_line_of_the_table():
    def fields(cls, prefix=""):
        for f in dataclasses.fields(cls):
            section = getattr(cls(), f.name)
            if dataclasses.is_dataclass(section):
                yield from fields(type(section), f"{f.name}.")
            else:
                yield prefix + f.name, f

    for key, f in fields(config.RunConfig):
        assert "option" in f.metadata, f"RunConfig.{key} is no line of the option table: give it metadata=option(...)"
    assert {key for key, _ in fields(config.RunConfig)} == {e.key for e in ENTRIES}


@pytest.mark.parametrize("e", ENTRIES, ids=lambda e: e.key)
def test_each_line_says_where_it_goes(e):
    o = e.option
    assert (o.spec is None) != (o.parent is None), f"{e.key}: give either the spec field it reaches or why it stays"
    assert o.group in table.GROUPS and set(o.commands) <= set(table.COMMANDS)
    assert o.made is None or o.spec is not None
    if o.spec is not None:
        where, _, name = o.spec.rpartition(".")
        kinds = (ClosedLoop, OpenLoop) if where == "workload" else (CycleSpec,)
        assert any(name in {f.name for f in dataclasses.fields(k)} for k in kinds), f"{e.key}: no spec field {o.spec}"


@pytest.mark.parametrize("e", [e for e in ENTRIES if e.option.spec], ids=lambda e: e.key)
def test_every_option_that_goes_to_the_worker_reaches_its_spec(e, tmp_path):
    target = e.option.spec
    base = {}
    if target.startswith("workload."):
        closed = target.split(".", 1)[1] in {f.name for f in dataclasses.fields(ClosedLoop)}
        base = {"workload.name": "steady"} if closed else {"workload.name": "steady", "workload.rate": 5.0}
    value = _sample(e)
    before = _get(_spec(tmp_path, base), target)
    after = _get(_spec(tmp_path, {**base, e.key: value}), target)
    assert after != before, f"{e.key} = {value!r} did not reach the spec's {target}"
    if e.option.made is None:
        assert after == value, f"{e.key} = {value!r} reached the spec's {target} as {after!r}"


@pytest.mark.parametrize("e", [e for e in ENTRIES if e.option.spec and not e.option.made], ids=lambda e: e.key)
def test_the_spec_takes_its_defaults_from_the_table(e):
    where, _, name = e.option.spec.rpartition(".")
    for kind in (ClosedLoop, OpenLoop) if where == "workload" else (CycleSpec,):
        f = next((f for f in dataclasses.fields(kind) if f.name == name), None)
        if f is not None and f.default is not dataclasses.MISSING:
            assert f.default == e.default, f"{kind.__name__}.{name} defaults to {f.default!r}, the table to {e.default!r}"


def _parser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _word(e: table.Entry) -> str:
    o = e.option
    if o.words is not None:
        return o.words[1] if e.default else o.words[0]
    choices = options.VOCABULARIES.get(o.choices) if isinstance(o.choices, str) else o.choices
    if choices and not o.listed:
        return choices[-1]
    if typing.get_origin(e.type) is typing.Literal:
        return typing.get_args(e.type)[-1]
    kinds = typing.get_args(e.type) or (e.type,)
    return "7" if int in kinds else "2.5" if float in kinds else "X:2"


@pytest.mark.parametrize("command", ["cycle", "soak", "bench", "matrix"])
def test_every_flag_reaches_a_field_or_says_where_it_goes(command):
    p = _parser(command)
    first = ["--runtimes", "0.7.0"] if command == "matrix" else []  # its one required option
    flags = {f.flag: f for f in options.FLAGS}
    matrix_own = {a.dest for g in p._action_groups if g.title == "the matrix" for a in g._group_actions}
    offered = set()
    for action in p._actions:
        flag = next((s for s in action.option_strings if s.startswith("--")), None)
        if flag in (None, "--help") or action.dest in matrix_own:
            continue
        e = next((e for e in ENTRIES if e.dest == action.dest), None)
        if e is None:
            why = flags[flag].why if flag in flags else OWN[command].get(flag)
            assert why, f"`rig {command} {flag}` reaches no field of the config and says nowhere where it goes"
            continue
        offered.add(e.key)
        ns = p.parse_args([*first, flag] + ([_word(e)] if action.nargs != 0 else []))
        given = options.overrides(ns)
        assert given[e.key] is not None, f"`rig {command} {flag}` reached no config key"
        if command == "bench" and e.key == "instances":
            continue  # a list of counts to sweep, each a config of its own (bench.instance_counts)
        cfg = table.read(config.RunConfig(), config._nested(given), "option")
        assert _get(cfg, e.key) != e.default, f"`rig {command} {flag} {_word(e)}` did not reach {e.key}"
    assert offered == {e.key for e in ENTRIES if command in e.option.commands and e.flag}, (
        f"`rig {command}` offers other options than the table says"
    )


@pytest.mark.parametrize("command", ["cycle", "soak", "bench", "matrix"])
def test_help_gives_the_tables_defaults(command):
    """An option's help says the table's default, unless the command says it its own way."""
    for action in _parser(command)._actions:
        e = next((e for e in ENTRIES if e.dest == action.dest), None)
        if e is None or e.shown() is None:
            continue
        own = (e.option.help or "").replace("%", "%%")
        said = action.help or ""
        from_the_table = said == own or (said.startswith(own) and said[len(own) :].startswith((" (default", ": ")))
        if "default" not in own and from_the_table:
            assert f"(default {e.shown()}" in action.help, (command, action.help)


def test_the_stored_toml_reads_back_to_the_same_config():
    """Every field set away from its default (strings that need escaping, a tuple, None left out):
    what the writer writes, the reader reads back, equal."""

    def away(cls, prefix=""):
        changes = {}
        for f in dataclasses.fields(cls):
            section = getattr(cls(), f.name)
            if dataclasses.is_dataclass(section):
                changes[f.name] = dataclasses.replace(section, **away(type(section), f"{f.name}."))
                continue
            e = table.entry(prefix + f.name)
            if e.key == "shapes":
                changes[f.name] = ("X:2", 'Y:"3"')
            elif str in (typing.get_args(e.type) or (e.type,)):
                changes[f.name] = f'C:\\{f.name} "x"'
            else:
                changes[f.name] = _sample(e)
        return changes

    cfg = config.RunConfig(**away(config.RunConfig))
    assert all(getattr(cfg, f.name) != getattr(config.RunConfig(), f.name) for f in dataclasses.fields(cfg))
    again = table.read(config.RunConfig(), tomllib.loads(cfg.to_toml()), "stored config")
    assert again == cfg
    defaults = config.RunConfig()
    assert table.read(config.RunConfig(), tomllib.loads(defaults.to_toml()), "stored config") == defaults
    valid = config.load(None, {"cycles": 3, "retain": "last-array", "workload.name": "steady", "shapes": ["X:2"]})
    assert config.from_toml_text(valid.to_toml()) == valid


def test_the_fleet_master_names_the_nodes_options_as_the_table_does():
    """`rig fleet`'s options that its nodes are given too: the table's flags and types (its defaults the master's)."""
    fleet, soak = _parser("fleet"), _parser("soak")
    for key in ("cycles", "workload.name", "workload.users", "workload.seconds", "workload.window_seconds", "results"):
        flag = table.entry(key).flag
        assert fleet._option_string_actions[flag].type == soak._option_string_actions[flag].type, flag


def test_the_lists_the_refusals_read_are_the_tables():
    assert options.TEMPLATE_ONLY == (
        "model", "model_size", "instances", "max_batch_size", "dynamic_batching", "queue_delay_us", "fault",
        "execute_delay_ms",
    )
    assert set(options.WORKLOAD_ONLY) == {
        "workload_seconds", "users", "in_flight", "arrivals", "window_seconds", "seed", "locust_web_port",
        "server_stats",
    }

"""A frozen dataclass to JSON and back, with the types it declares: the one way the parent writes what
it hands a process (the worker's ``CycleSpec``) and the way that process reads it. Reading checks every
field against its annotation (nested dataclasses, ``X | None``, ``Literal``, ``tuple[T, ...]``,
``list[T]``, ``dict[str, T]``) and refuses an unknown or missing field: a spec edited by hand with a
wrong type is one line that names the field, never a traceback deep in the worker.

Plain dataclasses and this checker rather than msgspec or pydantic: the spec's types are few and
simple, and one dependency less is one wheel less in the NGC image and in the GPU kit
(``benchmarks/gpu_kit.sh``), which carry the rig's dependencies offline."""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing

from rig.common.errors import RigError

T = typing.TypeVar("T")


def to_json(obj) -> str:
    """The dataclass as JSON (tuples as lists), one field a line: a person may read and edit it."""
    return json.dumps(dataclasses.asdict(obj), indent=1)


def from_json(cls: type[T], text: str, what: str = "spec") -> T:
    """``cls`` read back from ``to_json``'s text; a ``RigError`` of one line where it does not fit."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise RigError(f"{what}: not JSON ({e})") from None
    return decode(cls, data, what)


def decode(cls: type[T], data, what: str = "spec") -> T:
    """``cls`` from JSON-shaped data (dicts, lists, numbers, strings), every field checked."""
    try:
        return _value(cls, data, "$")
    except RigError as e:
        raise RigError(f"{what}: {e}") from None


@functools.cache
def _hints(cls: type) -> dict[str, typing.Any]:
    return typing.get_type_hints(cls)


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__


def _value(tp, value, where: str):
    origin = typing.get_origin(tp)
    if tp is typing.Any:
        return value
    if origin in (typing.Union, types.UnionType):
        arms = typing.get_args(tp)
        if value is None and type(None) in arms:
            return None
        kinds = {_kind_of(arm): arm for arm in arms if _kind_of(arm) is not None}
        if kinds and isinstance(value, dict):  # a union told apart by its ``kind``: that arm, or why not
            if value.get("kind") not in kinds:
                raise RigError(f"{where}.kind: {value.get('kind')!r:.60} is not one of {', '.join(map(repr, kinds))}")
            return _value(kinds[value["kind"]], value, where)
        problems = []
        for arm in arms:
            if arm is type(None):
                continue
            try:
                return _value(arm, value, where)
            except RigError as e:
                problems.append(str(e))
        raise RigError(problems[0] if len(problems) == 1 else f"{where}: {value!r:.60} fits none of {tp}")
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise RigError(f"{where}: {value!r:.60} is not one of {', '.join(map(repr, typing.get_args(tp)))}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp, value, where)
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise RigError(f"{where}: expected a list, got {_kind(value)} {value!r:.60}")
        args = typing.get_args(tp)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise RigError(f"{where}: expected {len(args)} items, got {len(value)}")
            return tuple(_value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        items = [_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise RigError(f"{where}: expected an object, got {_kind(value)} {value!r:.60}")
        return {_value(key_type, k, f"{where} key"): _value(value_type, v, f"{where}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise RigError(f"{where}: expected true or false, got {_kind(value)} {value!r:.60}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RigError(f"{where}: expected an integer, got {_kind(value)} {value!r:.60}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RigError(f"{where}: expected a number, got {_kind(value)} {value!r:.60}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise RigError(f"{where}: expected a string, got {_kind(value)} {value!r:.60}")
        return value
    raise RigError(f"{where}: the type {tp} cannot be read from JSON")  # a spec field typed beyond the above


def _kind_of(tp) -> str | None:
    """A dataclass's ``kind``, where it declares one as a one-value Literal with that default."""
    if not (dataclasses.is_dataclass(tp) and isinstance(tp, type)):
        return None
    field = next((f for f in dataclasses.fields(tp) if f.name == "kind"), None)
    if field is None or typing.get_origin(_hints(tp)["kind"]) is not typing.Literal:
        return None
    return field.default if isinstance(field.default, str) else None


def _dataclass(cls: type, value, where: str):
    if not isinstance(value, dict):
        raise RigError(f"{where}: expected an object ({cls.__name__}), got {_kind(value)} {value!r:.60}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise RigError(f"{where}: {cls.__name__} has no field {', '.join(unknown)}")
    missing = [
        name
        for name, f in fields.items()
        if name not in value and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise RigError(f"{where}: {cls.__name__} needs {', '.join(missing)}")
    hints = _hints(cls)
    return cls(**{name: _value(hints[name], v, f"{where}.{name}") for name, v in value.items()})

"""The worker's spec is one typed, frozen value: written by the parent, read back by the worker with
the same types, and a hand-edited field that does not fit is one line and exit 2."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import typing

import pytest

from rig.common.errors import RigError
from rig.contract import spec as spec_mod
from rig.contract import typed
from rig.contract.runtime import BuiltRuntime, Runtime
from rig.contract.spec import ClosedLoop, CycleSpec, OpenLoop

RUNTIME = BuiltRuntime("built-2.67.0", "2.67.0", "/x", "/x/lib/libtritonserver.so", "/x/backends", ("/x/lib",))


def a_spec(**kw) -> CycleSpec:
    return CycleSpec(
        run_id="r1", engine="capi", runtime=RUNTIME, model_repository="/m", models=("a", "b"), model_label="a",
        cycles=(1, 2), workload=ClosedLoop("steady", users=4, node="n1"),
        shapes={"INPUT0": (4, 2)}, optional_inputs={"a": ("X",)}, **kw,
    )


def test_the_spec_module_has_no_field_typed_by_a_bare_container():
    """No field typed dict or list (or tuple) without its element types, in any dataclass of the module."""
    bare = []
    for cls in (c for c in vars(spec_mod).values() if dataclasses.is_dataclass(c) and isinstance(c, type)):
        for name, tp in typing.get_type_hints(cls).items():
            for t in [tp, *typing.get_args(tp)]:
                if t in (dict, list, tuple, set) or (typing.get_origin(t) in (dict, list, tuple) and not typing.get_args(t)):
                    bare.append(f"{cls.__name__}.{name}: {tp}")
    assert not bare, bare
    assert dataclasses.fields(CycleSpec) and CycleSpec.__dataclass_params__.frozen


def test_written_and_read_back_it_is_the_same_value(tmp_path):
    s = a_spec()
    s.write(tmp_path / "spec.json")
    back = CycleSpec.read(tmp_path / "spec.json")
    assert back == s and isinstance(back.runtime, Runtime) and isinstance(back.workload, ClosedLoop)
    assert back.shapes == {"INPUT0": (4, 2)} and back.cycles == (1, 2)


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda d: d.update(requests="100"), "$.requests: expected an integer, got str '100'"),
        (lambda d: d.update(retian="none"), "$: CycleSpec has no field retian"),
        (lambda d: d["workload"].update(users=2.5), "$.workload.users: expected an integer, got float 2.5"),
        (lambda d: d["workload"].update(kind="open"), "$.workload: OpenLoop has no field in_flight, master, name, node, users, web_port"),
        (lambda d: d["workload"].update(kind="burst"), "$.workload.kind: 'burst' is not one of 'closed', 'open'"),
        (lambda d: d["runtime"].pop("core_library"), "$.runtime: BuiltRuntime needs core_library"),
        (lambda d: d.update(shapes={"INPUT0": [4, "x"]}), "$.shapes.INPUT0[1]: expected an integer, got str 'x'"),
        (lambda d: d.update(server_stats=1), "$.server_stats: expected true or false, got int 1"),
    ],
)
def test_a_field_that_does_not_fit_is_named(tmp_path, edit, said):
    path = tmp_path / "spec-0001.json"
    a_spec().write(path)
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(RigError) as e:
        CycleSpec.read(path)
    assert str(e.value) == f"spec {path}: {said}"


def test_each_kind_of_load_reads_back_as_its_own_type(tmp_path):
    for load in (ClosedLoop("ramp", users=8, in_flight=2), OpenLoop(500.0, "constant", seed=3)):
        s = dataclasses.replace(a_spec(), workload=load)
        s.write(tmp_path / "spec.json")
        assert CycleSpec.read(tmp_path / "spec.json").workload == load
    data = json.loads((tmp_path / "spec.json").read_text())
    data["workload"]["users"] = 4  # a closed loop's field on an open loop
    (tmp_path / "spec.json").write_text(json.dumps(data))
    with pytest.raises(RigError, match=r"\$\.workload: OpenLoop has no field users"):
        CycleSpec.read(tmp_path / "spec.json")


def test_a_hand_edited_spec_is_one_line_and_exit_2_from_the_worker(tmp_path):
    path = tmp_path / "spec-0001.json"
    a_spec().write(path)
    data = json.loads(path.read_text())
    data["exit_timeout"] = "30s"
    path.write_text(json.dumps(data))
    p = subprocess.run([sys.executable, "-m", "rig", "worker", "--spec", str(path)], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.splitlines() == [f"rig: error: spec {path}: $.exit_timeout: expected an integer, got str '30s'"]


def test_decode_reads_unions_literals_and_fixed_tuples():
    @dataclasses.dataclass(frozen=True)
    class T:
        mode: typing.Literal["a", "b"]
        pair: tuple[int, str]
        maybe: float | None = None

    assert typed.decode(T, {"mode": "a", "pair": [1, "x"], "maybe": 2}) == T("a", (1, "x"), 2.0)
    with pytest.raises(RigError, match=r"\$\.mode: 'c' is not one of 'a', 'b'"):
        typed.decode(T, {"mode": "c", "pair": [1, "x"]})
    with pytest.raises(RigError, match=r"\$\.pair: expected 2 items, got 1"):
        typed.decode(T, {"mode": "a", "pair": [1]})

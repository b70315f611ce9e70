"""`rig check`'s work (rig.store.check): the files in a store's tables that readers skip or that do not
belong there, moving them aside, and where they may not go. (The command, run whole:
tests/store/test_store_scale.py; over S3: tests/store/test_s3.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import cycle_row

from rig.common.errors import RigError
from rig.store import Store
from rig.store.check import check_aside, move_aside, problems


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "r")
    s.write("cycles", [cycle_row(1)], "2.51.0", "c000001")
    s.write("cycles", [cycle_row(2)], "2.51.0", "c000002")
    return Store.open(tmp_path / "r")


def test_a_readable_store_has_no_problems(store):
    assert problems(store) == []


def test_damaged_foreign_and_stray_files_each_with_why_hidden_ones_skipped(store):
    unit = next(f for f in store.files("cycles") if f.endswith("-c000002.parquet"))
    data = Path(unit).read_bytes()
    Path(unit).write_bytes(data[: len(data) // 2])
    stray = os.path.join(store.base, "cycles", "README.txt")
    Path(stray).write_text("not data")
    Path(os.path.dirname(unit), ".half-written.parquet").write_bytes(b"x")  # a write in progress: skipped
    found = dict(problems(store))
    assert set(found) == {unit, stray}
    assert found[unit].startswith("not a whole Parquet file")
    assert found[stray].startswith("foreign: not a file the rig writes (cycles/triton_version=V/date=D/")


def test_move_aside_keeps_the_path_below_the_store(store, tmp_path):
    unit = store.files("cycles")[0]
    rel = os.path.relpath(unit, store.base)
    moved = move_aside(store, unit, str(tmp_path / "aside"))
    assert moved == str(tmp_path / "aside" / rel) and os.path.exists(moved) and not os.path.exists(unit)


def test_the_folder_aside_may_not_be_inside_a_table(store, tmp_path):
    for inside in (f"{store.base}/cycles", f"{store.base}/windows/q"):
        with pytest.raises(RigError, match="is inside a table folder, where readers look"):
            check_aside(store, inside)
    check_aside(store, f"{store.base}/_damaged")
    check_aside(store, str(tmp_path / "elsewhere"))
    with pytest.raises(RigError, match="not a filesystem URI"):
        check_aside(store, "nosuchscheme://bucket/aside")

"""What a Triton core was built with, for the scenarios that need it (``Scenario.needs``): the
ensemble scheduler (``TRITON_ENABLE_ENSEMBLE``, a build option of the core) and the sequence
batcher (always built, checked all the same).

A core is asked without starting it: a built runtime's recipe says its flags
(``runtime.json``'s ``core_flags``); every core's library holds the C++ type names of the
schedulers it has (``N6triton4core17EnsembleSchedulerE``, ...), read from its bytes. Measured
here (2026-12-04): the nvidia-pytriton cores 2.41.0 (0.5.0), 2.48.0 (0.5.10) and 2.51.0 (0.7.0)
and the cores built 2.51.0-2.71.0 have both.
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path

from rig.common.errors import RigError

# feature: (the type name its library holds, the build flag that turns it off, what it is in words)
FEATURES = {
    "ensemble": (b"N6triton4core17EnsembleSchedulerE", "TRITON_ENABLE_ENSEMBLE", "ensembles"),
    "sequence_batching": (b"N6triton4core22SequenceBatchSchedulerE", None, "the sequence batcher"),
}
_seen: dict[tuple[str, str], bool] = {}


def has(runtime, feature: str) -> bool:
    """Whether ``runtime``'s core (a ``rig.contract.runtime.Runtime``) has ``feature``. A core
    whose library cannot be read is taken to have it (its models then say otherwise as they load)."""
    marker, flag, _ = FEATURES[feature]
    key = (str(runtime.core_library), feature)
    if key not in _seen:
        _seen[key] = _flag_on(runtime, flag) and _holds(Path(runtime.core_library), marker)
    return _seen[key]


def missing(runtime, needs: tuple[str, ...]) -> list[str]:
    """The features of ``needs`` the core lacks, in words (empty: it has them all)."""
    return [FEATURES[f][2] for f in needs if not has(runtime, f)]


def check(scenario, runtime) -> None:
    """Refuse, in one line, a scenario whose models need what this core was built without."""
    lacks = missing(runtime, scenario.needs)
    if lacks:
        raise RigError(why_not(scenario, runtime, lacks))


def why_not(scenario, runtime, lacks: list[str]) -> str:
    return (
        f"scenario {scenario.name} needs a core built with {' and '.join(lacks)}: Triton "
        f"{runtime.triton_version} ({runtime.kind}) was built without"
    )


def _flag_on(runtime, flag: str | None) -> bool:
    if flag is None:
        return True
    # a built runtime: <root>/runtime.json beside <root>/py3.X/lib/libtritonserver.so (or <root>/lib)
    recipe = next(
        (d / "runtime.json" for d in Path(str(runtime.core_library)).parents[:3] if (d / "runtime.json").is_file()),
        None,
    )
    try:
        flags = json.loads(recipe.read_text()).get("core_flags") or {} if recipe else {}
    except (OSError, ValueError):
        return True
    return flags.get(flag, "ON") != "OFF"


def _holds(library: Path, marker: bytes) -> bool:
    try:
        with open(library.resolve(), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(marker) >= 0
    except (OSError, ValueError):
        return True

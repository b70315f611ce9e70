"""``python -m rig.worker.engines.official.probe [CORE_LIBRARY]``: do the ``tritonserver`` bindings load
(over CORE_LIBRARY's core, in the runtime's environment the parent gives this process)? One JSON line,
``[ok, why]``; ``rig.parent.engines.official_probe`` asks it, so that a failing binding never takes
the parent down."""

from __future__ import annotations

import json
import sys

from rig.contract.engines import explain_bindings
from rig.worker.engines.base import EngineError
from rig.worker.engines.official import loader


def answer(core_library: str | None) -> tuple[bool, str]:
    if core_library is None:  # only whether the package is installed here
        library = loader.bindings_library()
        if library is None:
            return False, explain_bindings("No module named 'tritonserver'")
        return True, f"tritonserver {loader.bindings_version()} installed ({library.parent.parent})"
    try:
        loader.load(core_library)
    except (EngineError, OSError) as e:  # anything else ends the child: the parent reads its last line
        return False, str(e)
    extra = f"; {loader.note}" if loader.note else ""
    return True, f"tritonserver {loader.bindings_version()} over {core_library}{extra}"


if __name__ == "__main__":
    print(json.dumps(answer(sys.argv[1] if len(sys.argv) > 1 else None)))

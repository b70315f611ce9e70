"""triton-soak-rig: benchmark and soak-test Triton Inference Server's in-process API.

Public API: ``RunConfig`` and ``load_config`` (what to run), ``Store`` (the Parquet results),
``run`` (a cycle or soak, as the CLI does). Everything else is private to the rig.
"""

__version__ = "0.1.0"

from rig.config import RunConfig  # noqa: E402
from rig.config import load as load_config  # noqa: E402
from rig.store import Store  # noqa: E402


def run(cfg: "RunConfig", command: str = "soak", **kwargs):
    """Run cycles as ``rig soak`` does; returns (exit status, tally, run_id, reasons)."""
    from rig.soak import execute

    return execute(cfg, command, **kwargs)


__all__ = ["RunConfig", "Store", "load_config", "run", "__version__"]

"""triton-soak-rig: benchmark and soak-test Triton Inference Server's in-process API.

Public API: ``RunConfig`` and ``load_config`` (what to run), ``Store`` (the Parquet results),
``run`` (a cycle or soak, as the CLI does). Everything else is private to the rig.
They are imported on first use: a worker, which hosts Triton, never needs pyarrow.
"""

from rig.common.version import __version__

__all__ = ["RunConfig", "Store", "__version__", "load_config", "run"]


def __getattr__(name):
    if name == "RunConfig":
        from rig.parent.config import RunConfig

        return RunConfig
    if name == "load_config":
        from rig.parent.config import load

        return load
    if name == "Store":
        from rig.store import Store

        return Store
    raise AttributeError(f"module 'rig' has no attribute {name!r}")


def run(cfg, command: str = "soak", junit=None, summary_json=None, **kwargs):
    """Run cycles as ``rig soak`` does; returns (exit status, tally, run_id, reasons). ``junit``
    and ``summary_json``: files to write the judged run to (as ``--junit``, ``--summary-json``)."""
    from rig.workflows.soak import Outputs, execute

    return execute(cfg, command, outputs=Outputs(junit, summary_json), **kwargs)

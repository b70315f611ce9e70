"""Retention: what the user's code keeps referenced across ``stop()`` (server#8755's trigger),
applied by the cycle's sequential requests and by a workload's last request alike."""

from __future__ import annotations

from rig.worker.engines.base import Engine, EngineError, as_entries


class Retained:
    """What the retention policy keeps referenced across stop(), as the user's code would."""

    def __init__(self):
        self.response = None
        self.array = None

    def keep(self, response, retain: str) -> None:
        """Hold ``response`` as the policy says: the object, an array over its output, or nothing."""
        if retain == "last-response":
            self.response = response
        elif retain == "last-array":
            self.array = response.output_view(next(iter(response.outputs())))
        else:
            response.release()

    def clear(self):
        self.array = None
        if self.response is not None:
            self.response.release()
        self.response = None


def apply_retention(
    engine: Engine, model: str, inputs, retain: str, kept: Retained, timeout_s: float, failed: dict | None = None
) -> str | None:
    """One last request after a workload, kept as the policy says (what the user's code holds);
    ``inputs``: the model's entries (or one), the request carries the first.
    Returns why it failed, or None: a failed retention request holds nothing, so the cycle would
    measure ``none`` while claiming the policy; the caller records it as an error."""
    if retain == "none":
        return None
    try:
        kept.keep(engine.infer(model, as_entries(inputs)[0], timeout_s=timeout_s), retain)
    except EngineError as e:
        if failed is not None:
            failed.update(code=e.code, message=str(e))
        return f"the {retain} retention request failed: {e}"
    return None

"""The capi engine: Triton's C API through ctypes (``engine``, on ``core``'s types and
constants; ``response``: its responses) and its native lane (``lane``, over ``_fastpath.c``).
One way: the engine makes its lanes; the lane knows the core and the responses, not the engine."""

from rig.worker.engines.capi.engine import CapiEngine
from rig.worker.engines.capi.response import CapiResponse

__all__ = ["CapiEngine", "CapiResponse"]

"""The capi engine: Triton's C API through ctypes, the engine adapting the rig's binding
(``rig.capi``: ``engine``; ``response``: its responses) and its native lane (``lane``, over
``_fastpath.c``). One way: the engine makes its lanes; the lane knows the binding and the
responses, not the engine."""

from rig.worker.engines.capi.engine import CapiEngine
from rig.worker.engines.capi.response import CapiResponse

__all__ = ["CapiEngine", "CapiResponse"]

"""The capi engine: Triton's C API through ctypes (``engine``, on ``core``'s types and
constants) and its native lane (``lane``, over ``_fastpath.c``)."""

from rig.engines.capi.engine import CapiEngine, CapiResponse

__all__ = ["CapiEngine", "CapiResponse"]

"""Triton's C API (``libtritonserver.so``, ``tritonserver.h``) through ctypes, importing nothing of the
rig (the standard library and numpy only): ``core`` (the library with the signatures of the
functions called, its data types, error codes and callback types, ``CoreError``) and ``server`` (one
in-process server: its options and start, the response allocator, a request's submission and its two
ends, a response's outputs read in place, the stop and the delete).

The rig's capi engine (``rig/worker/engines/capi/``) adapts it, and ``rig repro`` copies these files
into the reproducer's script as they are: a reproducer and the rig run the same binding."""

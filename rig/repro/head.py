"""A reproducer of one lifecycle cell of triton-soak-rig, standing alone: ``rig repro`` writes
this file into its folder as ``repro.py``, with the cell written into ``CELL``.

It imports the standard library, numpy and ctypes only (no rig, no ``tritonserver`` package) and
drives Triton's C API (``libtritonserver.so``, ``tritonserver.h``) through ctypes with the rig's
own binding (its package ``rig/capi/``, copied into this file as it is), as the rig's C API engine
does: it starts a server over ``models/`` (strict model config and readiness, the
cell's exit timeout, the install's ``backends/``), waits for the models, sends the cell's
requests, sets the scene the cell's client sets before ``stop()`` (requests in flight, requests
refused, a load under way, a model's file taken away, a stub killed, sequences left open), keeps
what the cell's client keeps across ``stop()`` (the last response object, or a numpy array over
its output), calls ``TRITONSERVER_ServerStop`` and times it, lets go of what it kept, waits for
the models' finalize, and calls ``TRITONSERVER_ServerDelete``. The models record each
``initialize`` and ``finalize`` themselves (a few lines appended to their ``model.py``: one JSON
line per call in the file ``$REPRO_EVIDENCE`` names), so the script tells whether each
instance's finalize ran before ``stop()`` returned, after, or never; where the cell needs it (a
stub that dies of a signal as it exits) a small signal handler, ``crash.c`` beside this file,
compiled here with ``cc``, records a stub's crash.

Usage: ``python repro.py --triton DIR`` (or ``$TRITON_HOME``): DIR in perf_analyzer's layout,
``lib/libtritonserver.so`` and ``backends/python/``. The environment it needs: ``LD_LIBRARY_PATH``
with ``DIR/lib``, the folder of the core's own libraries and this Python's ``libpython3.X.so.1.0``
(the stubs link it; the script re-executes itself once with them added where they are missing);
a stub built for this Python's version; numpy for the stubs: the Python backend's stubs embed this
interpreter, isolated (``PYTHONPATH`` is ignored there), and read the site-packages of the
``python3`` they find on ``PATH``: the script makes a small venv for them in its work folder whose
one ``.pth`` names ``$REPRO_STUB_SITE`` (a folder with numpy<2, for stubs built against numpy 1)
or else this interpreter's numpy. Exit status: 0 the cell's expected verdicts reproduced, 1 not,
2 bad input.
"""

from __future__ import annotations

from typing import Any

# The cell: written here by `rig repro` (scenario, shape, models, requests, client, retention, expected verdicts).
CELL: dict[str, Any] = {}

STARTUP_TIMEOUT_S = 120.0
GRACE_AFTER_STOP_S = 5.0  # the least time given to the finalizes once what was kept is let go
MAX_CONSECUTIVE_ERRORS = 3  # the fixed count stops sending after this many failures in a row (a dead stub)
STUB = "triton_python_backend_stub"

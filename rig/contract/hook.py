"""The line that brings the evidence hook (``rig/worker/hook/evidence.py``) into every backend stub: the
parent writes it as a ``.pth`` into the site-packages the stubs read (``rig.parent.preflight``), and
the stub, as its interpreter starts, runs the hook file that the worker names in ``RIG_EVIDENCE_HOOK``."""

from __future__ import annotations

import os

PTH_NAME = "rig_evidence.pth"
# Both lines act inside a Triton Python-backend stub only (its executable), never in the other
# Python processes of the environment; the first runs the rig's hook file, nothing else, and
# only one owned by root or this user that no one else may write.
PTH_LINE = (
    'import os; _rig_h = os.environ.get("RIG_EVIDENCE_HOOK"); _rig_h and '
    'os.path.realpath("/proc/self/exe").endswith("triton_python_backend_stub") and '
    'os.path.basename(_rig_h) == "evidence.py" and os.path.basename(os.path.dirname(_rig_h)) == "hook" '
    "and os.path.exists(_rig_h) and (lambda s: s.st_uid in (0, os.getuid()) and not s.st_mode & 0o022)"
    '(os.stat(_rig_h)) and exec(compile(open(_rig_h).read(), _rig_h, "exec"), '
    '{"__name__": "rig_evidence_hook"})\n'
    # Embedded cores' stubs need numpy 1 (with numpy 2 their outputs come back empty): a stub,
    # and only a stub, puts the rig's numpy-1 folder first.
    'import os, sys; _rig_s = os.environ.get("RIG_STUB_SITE"); _rig_s and os.path.isdir(_rig_s) '
    'and os.path.realpath("/proc/self/exe").endswith("triton_python_backend_stub") '
    "and sys.path.insert(0, _rig_s)\n"
)


def pth_installed(site_packages):
    try:
        with open(os.path.join(site_packages, PTH_NAME)) as f:
            return f.read() == PTH_LINE
    except OSError:
        return False


def install_pth(site_packages):
    """Write the ``.pth`` (idempotent, atomic); returns its path or None if not writable."""
    path = os.path.join(site_packages, PTH_NAME)
    if pth_installed(site_packages):
        return path
    try:
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(PTH_LINE)
        os.replace(tmp, path)
        return path
    except OSError:
        return None

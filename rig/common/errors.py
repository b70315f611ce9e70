"""The one exception type meant for users (caught once in the CLI, printed as one line), and the
rig's exit statuses (the README's *Exit codes* table)."""

from __future__ import annotations

import enum


class RigError(Exception):
    """A problem the user can fix; its message says what to do."""


class Exit(enum.IntEnum):
    """Every command's exit status; the README's *Exit codes* table says the same."""

    OK = 0  # every threshold holds, the gate passes, nothing damaged
    FAILED = 1  # a threshold crossed, a gate failed, damaged files, a node lost, a matrix cell failed
    USAGE = 2  # bad input: one line, never a traceback
    SKIPPED = 3  # nothing was run (the cupy model without a GPU; --skip-ok makes it OK)
    MACHINE = 4  # the machine around the rig failed the run (a full disk, ...)
    INTERRUPTED = 130  # Ctrl-C, or SIGTERM from a nightly job's timeout (128 + SIGINT, as shells say)

"""The originals of names that gevent's monkey-patching replaces (Locust patches the worker).

Triton completes requests on its own native threads; a gevent primitive must never be touched
from one, and a "thread" made by patched ``threading`` is a greenlet. Code that must have the
kernel's own thread, lock, selector or socket asks here.
"""

from __future__ import annotations

import importlib


def original(module: str, name: str):
    """``module.name`` as it was before gevent patched it (as it is, where nothing is patched)."""
    try:
        from gevent import monkey

        if monkey.is_module_patched(module):
            return monkey.get_original(module, name)
    except ImportError:
        pass
    return getattr(importlib.import_module(module), name)

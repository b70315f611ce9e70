"""Pair the ``tritonserver`` bindings with the core the rig was told to use.

The bindings are a pybind11 module over ``libtritonserver.so``. The 2.70 wheels on PyPI carry a
placeholder of that library (it exports every C API symbol and does nothing); later ones link
``libtritonserver.so`` by name. Either way the bindings must call the *chosen runtime's* core,
so that ``--engine tritonserver --runtime X`` measures X: the core is loaded first, with
``RTLD_GLOBAL``, and the global scope then wins over the placeholder. Before importing, every
``TRITONSERVER_*`` function the bindings call is looked up in that core: a function the core
lacks would otherwise be served by the placeholder, and fail in garbled ways at run time.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from pathlib import Path

from rig.contract.engines import explain_bindings as explain
from rig.worker.engines.base import EngineError

_loaded_core: str | None = None  # the core library this process loaded globally
_core_handle: ctypes.CDLL | None = None
note: str | None = None  # what the last load() found worth saying (functions served by a placeholder)


def bindings_library() -> Path | None:
    """The bindings' shared object, found without importing the package."""
    spec = importlib.util.find_spec("tritonserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        found = sorted(Path(base, "_c").glob("triton_bindings*.so"))
        if found:
            return found[0]
    return None


def placeholder(library: Path) -> Path | None:
    """The do-nothing ``libtritonserver`` some wheels (2.70) carry beside the bindings."""
    found = sorted(library.parent.parent.parent.glob("tritonserver.libs/libtritonserver*.so*"))
    return found[0] if found else None


def bindings_version() -> str:
    try:
        from importlib.metadata import version

        return version("tritonserver")
    except Exception:  # noqa: BLE001 - a wheel installed without metadata (PYTHONPATH, NGC copy)
        return "?"


def needed_functions(library: Path) -> list[str] | None:
    """The ``TRITONSERVER_*`` functions the bindings import; None where that cannot be read."""
    try:
        from elftools.elf.elffile import ELFFile
    except ImportError:
        return None
    with open(library, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".dynsym")
        if symtab is None:
            return None
        return sorted(
            {
                s.name
                for s in symtab.iter_symbols()
                if s.name.startswith("TRITONSERVER_") and s["st_shndx"] == "SHN_UNDEF"
            }
        )


def _core_version(core: ctypes.CDLL) -> str:
    major, minor = ctypes.c_uint32(), ctypes.c_uint32()
    try:
        core.TRITONSERVER_ApiVersion(ctypes.byref(major), ctypes.byref(minor))
    except AttributeError:
        return "?"
    return f"C API {major.value}.{minor.value}"


def preload(core_library: str) -> ctypes.CDLL:
    """Load the core globally, once per process; a second, different core is refused."""
    global _loaded_core, _core_handle
    path = os.path.realpath(core_library)
    if _loaded_core is not None:
        if _loaded_core != path:
            raise EngineError(
                f"this process already loaded the core {_loaded_core}; a worker hosts "
                f"one core, so {path} needs a worker of its own",
                "ALREADY_EXISTS",
            )
        return _core_handle
    try:
        handle = ctypes.CDLL(core_library, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    except OSError as e:
        raise EngineError(f"cannot load the Triton core {core_library}: {e}", "UNAVAILABLE") from None
    _loaded_core, _core_handle = path, handle
    return handle


def load(core_library: str | None):
    """``import tritonserver`` over ``core_library`` (None: whatever the bindings find themselves).

    Raises ``EngineError`` with one line where the package is missing, does not import, or
    needs C API functions that the core lacks.
    """
    global note
    if "tritonserver" in sys.modules and core_library is None:
        return sys.modules["tritonserver"]
    note = None
    library = bindings_library()
    if library is None:
        raise EngineError(explain("No module named 'tritonserver'"), "UNAVAILABLE")
    if core_library:
        core = preload(core_library)
        needed = needed_functions(library)
        missing = [name for name in needed or () if not hasattr(core, name)]
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        if missing and placeholder(library) is not None:
            # Measured: 2.70 over core 2.44 works; the one function 2.44 lacks is an option
            # setter the placeholder answers with success.
            note = f"the core lacks {shown}: the wheel's placeholder library answers those calls (they do nothing)"
        elif missing:
            raise EngineError(
                f"the tritonserver {bindings_version()} bindings do not fit this core "
                f"({_core_version(core)}, {core_library}): it lacks {shown}; use a newer runtime, "
                "or bindings that fit it (the 2.70.0 wheel, whose placeholder library answers what a core "
                "lacks, runs over 2.44.0 and newer: docs/measurements/lifecycle.md)",
                "UNSUPPORTED",
            )
    try:
        import tritonserver
    except Exception as e:  # noqa: BLE001 - ImportError, OSError, garbled binding errors
        error = EngineError(
            explain(f"{e}" if isinstance(e, ImportError) else f"{type(e).__name__}: {e}"), "UNAVAILABLE"
        )
    else:
        missing = [a for a in ("Server", "Options", "ModelControlMode") if not hasattr(tritonserver, a)]
        if not missing:
            return tritonserver
        error = EngineError(
            f"the tritonserver module at {getattr(tritonserver, '__file__', '?')} has no "
            f"{', '.join(missing)}: it is not Triton's in-process API package",
            "UNAVAILABLE",
        )
    raise error

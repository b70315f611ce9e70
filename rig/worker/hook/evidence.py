"""Finalize evidence for any Python-backend model, without editing the model's files.

Backend stubs run their interpreter isolated (``PYTHONPATH`` and ``sitecustomize`` on it are
ignored), but they do read the ``.pth`` files of the site-packages they find. The rig puts one
line there (``rig_evidence.pth``, see ``rig.contract.hook.install_pth``) that executes this file when
``RIG_EVIDENCE_HOOK`` names it, and the rig names a folder in ``RIG_EVIDENCE_DIR``. Every class named
``TritonPythonModel`` defined afterwards (the model file the stub loads) gets its
``initialize`` and ``finalize`` wrapped so that each leaves a marker file: pid, model, instance,
phase, monotonic time (CLOCK_MONOTONIC, comparable with the rig's own clock) and, for finalize,
the error it raised, if any. Its ``execute`` is wrapped too, for one fact: the first time it returns
None (the model answers through the request's response sender, maybe after ``execute`` returned,
where Triton's statistics of the request have ended), the instance leaves one ``answers_after_return``
marker; each later call costs the wrapper and an ``is None`` check. Where the worker names the
crash recorder in ``RIG_CRASH_LIB`` (``crash.c``, built by ``crashlib.arm_env``) it also arms it,
first thing: a stub that dies of a signal of its own (SIGSEGV, SIGABRT, ...), even after its
Python is finalized, leaves ``<pid>-crash-<signal>.json``. Outside a stub started by the rig (no
``RIG_EVIDENCE_DIR``) it does nothing.
"""

import builtins
import inspect
import json
import os
import time

_EVIDENCE_DIR = os.environ.get("RIG_EVIDENCE_DIR")
_MODEL_CLASS = "TritonPythonModel"


def _write_marker(phase, model, instance, error=None):
    record = {
        "pid": os.getpid(),
        "model": model,
        "instance": instance,
        "phase": phase,
        "t_mono": time.monotonic(),
        "t_wall": time.time(),
        "error": error,
    }
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(instance))
    final = os.path.join(_EVIDENCE_DIR, f"{os.getpid()}-{safe}-{phase}.json")
    tmp = final + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.replace(tmp, final)
    except OSError:
        try:  # evidence is best effort: never break the user's model, never leave a half file
            os.unlink(tmp)
        except OSError:
            pass


def _instrument(cls):
    if getattr(cls, "_rig_instrumented", False):
        return
    orig_init = getattr(cls, "initialize", None)
    orig_fin = getattr(cls, "finalize", None)

    def initialize(self, args):
        self._rig_model = str(args.get("model_name", "?")) if isinstance(args, dict) else "?"
        self._rig_instance = str(args.get("model_instance_name", self._rig_model)) if isinstance(args, dict) else "?"
        try:
            result = orig_init(self, args) if orig_init is not None else None
        except BaseException as e:
            _write_marker("init_failed", self._rig_model, self._rig_instance, f"{type(e).__name__}: {e}")
            raise
        _write_marker("init", self._rig_model, self._rig_instance)
        return result

    def finalize(self):
        model = getattr(self, "_rig_model", "?")
        instance = getattr(self, "_rig_instance", "?")
        _write_marker("finalize_start", model, instance)
        try:
            result = orig_fin(self) if orig_fin is not None else None
        except BaseException as e:
            _write_marker("finalize_end", model, instance, f"{type(e).__name__}: {e}")
            raise
        _write_marker("finalize_end", model, instance)
        return result

    cls.initialize = initialize
    cls.finalize = finalize
    if callable(getattr(cls, "execute", None)):
        cls.execute = _execute_wrapper(cls.execute)
    cls._rig_instrumented = True


def _answered_after_return(self):
    """Once per instance: its execute returned None (``ANSWERS_AFTER_RETURN`` in rig.contract.evidence)."""
    self._rig_after_return = True
    model = getattr(self, "_rig_model", "?")
    _write_marker("answers_after_return", model, getattr(self, "_rig_instance", model))


def _execute_wrapper(orig):
    if inspect.iscoroutinefunction(orig):  # an async execute stays a coroutine function

        async def execute_async(self, requests):
            result = await orig(self, requests)
            if result is None and not getattr(self, "_rig_after_return", False):
                _answered_after_return(self)
            return result

        return execute_async

    def execute(self, requests):
        result = orig(self, requests)
        if result is None and not getattr(self, "_rig_after_return", False):
            _answered_after_return(self)
        return result

    return execute


def _arm_crash_recorder():
    """Best effort, silent: a library that is missing, not ours, or fails to arm leaves the stub
    as it was (``stub_crashes`` then reads 0 for it: the cycle's finalize columns say whether
    the hook ran at all)."""
    lib = os.environ.get("RIG_CRASH_LIB")
    if not lib:
        return
    try:
        st = os.stat(lib)
        # as the .pth line holds the hook file: only a library no one else may write
        if st.st_uid not in (0, os.getuid()) or st.st_mode & 0o022:
            return
        import ctypes

        arm = ctypes.CDLL(lib).rig_crash_arm
        arm.argtypes = [ctypes.c_char_p]
        arm.restype = ctypes.c_int
        arm(os.fsencode(_EVIDENCE_DIR))
    except (ImportError, OSError, AttributeError, ValueError, TypeError):
        pass  # never break the user's model: the recorder is evidence, not a requirement


if _EVIDENCE_DIR:
    _arm_crash_recorder()
    _orig_build_class = builtins.__build_class__

    def _build_class(func, name, *bases, **kwargs):
        cls = _orig_build_class(func, name, *bases, **kwargs)
        if name == _MODEL_CLASS:
            try:
                _instrument(cls)
            except Exception:  # noqa: BLE001, S110
                pass
        return cls

    builtins.__build_class__ = _build_class

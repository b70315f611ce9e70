"""Engine over Triton's official in-process Python API (the ``tritonserver`` package).

The package ships in the NGC images ``nvcr.io/nvidia/tritonserver:<yy.mm>-py3`` and, for 2.70+,
on PyPI for CPython 3.12 on glibc 2.39+. ``loader`` pairs it with the chosen runtime's core,
``engine`` drives a server through it, ``lane`` keeps requests in flight for workloads,
``loop`` hosts its completions, ``responses`` and ``errors`` keep nothing that would hold a model,
``allocation`` reads whether the bindings allocate outputs in the memory a request asks.
"""

from rig.worker.engines.official.engine import OfficialEngine

__all__ = ["OfficialEngine"]

"""The worker's side: everything that runs in the process that hosts Triton (``python -m rig worker``):
the cycle and its observers, what a lifecycle scenario's client does (``clients``), the engines (the
C API and the official bindings, and the probe the parent runs in a child), the load (Locust, the
native lanes, a fleet's node and master), the outputs' checks, and the hook loaded into the backend
stubs. Only the entry point (``rig.cli``) imports it from the parent's side; the rest of the parent
knows it through ``rig.contract``."""

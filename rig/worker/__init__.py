"""The worker's side: everything that runs in the process that hosts Triton (``python -m rig worker``):
the cycle and its observers, the engines (the C API and the official bindings), the load (Locust
and the native lanes), the inputs and outputs, and the hook loaded into the backend stubs."""

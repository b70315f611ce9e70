"""What the worker brings into the backend stubs: the evidence hook (``evidence.py``, run by the
``.pth`` line of ``rig.contract.hook`` inside each stub, never imported by the rig) that leaves a
marker per initialize and finalize, and the crash recorder (``crash.c``, built and armed by
``crashlib``) that leaves one per stub that dies of a signal of its own."""

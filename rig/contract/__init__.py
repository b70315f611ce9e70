"""The contract between the parent and its workers, imported by both sides and the only way the
parent knows the worker: the cycle spec a worker is given (``spec``, read back with its types by
``typed``), a matrix cell's spec (``cell``), the typed messages it sends back, the rows of the
results tables and their schema, the verdicts and how a cycle is judged, the runtime a spec names
and the release table (``ngc``), the engines' names, model metadata and datatypes (``engines``),
the request inputs (``inputs``), the finalize and crash markers (``evidence``), the ``.pth`` line
of the hook (``hook``), Triton's statistics (``server_stats``) and the fleet's node protocol.
Nothing here starts a process or Triton."""

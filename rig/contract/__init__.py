"""The contract between the parent and its workers, imported by both sides: the cycle spec a worker
is given, the typed messages it sends back, the rows of the results tables, the verdicts, the
runtime a spec names, and the fleet's node protocol. Nothing here starts a process or Triton."""

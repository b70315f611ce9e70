"""A lifecycle scenario, in one package: what it is, the shapes it runs in, the verdicts it is known to
give, and what its client does inside a worker's cycle.

Two sides live here, as they do in the rig (docs/dev/architecture.md), and the layer rule keeps
them apart:

- the parent's side, what is decided before a worker starts: ``catalog`` (the scenarios: each a
  model plus what the client does, named after its upstream report, and how one is applied to a
  run's configuration), ``shapes`` (the model shapes that can move a verdict), ``known`` (the
  verdicts each is known to give per core, API and shape: ``known_verdicts.csv``, data, not code)
  and ``core_features`` (what a core was built with, for the scenarios that need it);
- the worker's side, ``client/``: the client behaviours around ``stop()`` (``clientside``), the
  scenes set after the load (``scenes``) and the sequences left open at the stop (``sequences``),
  which ``rig.worker.observers`` runs by the name the spec carries.

This module imports neither side: a worker that imports ``rig.scenarios.client`` loads none of
the parent's modules."""

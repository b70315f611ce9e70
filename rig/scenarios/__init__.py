"""A lifecycle scenario, the parent's side of it: what it is, the shapes it runs in and the verdicts
it is known to give. What its client does inside a worker's cycle is the worker's, in
``rig.worker.clients`` (docs/dev/architecture.md): a layer below, which never imports this package.

- ``catalog``: the scenarios, each a model plus what the client does, named after its upstream
  report, and how one is applied to a run's configuration (``setup``);
- ``shapes``: the model shapes that can move a verdict;
- ``known``: the verdicts each is known to give per core, API and shape (``known_verdicts.csv``,
  data, not code);
- ``core_features``: what a core was built with, for the scenarios that need it."""

"""What a lifecycle scenario's client does inside a worker's cycle (the worker's side of a
scenario; its definition, shapes and known verdicts are the parent's, in ``rig.scenarios``):
``clientside`` (the behaviours around ``stop()``), ``scenes`` (the scenes set after the load) and
``sequences`` (sequences open at the stop). ``rig.worker.observers`` runs them by the name the spec
carries (``CycleSpec.client``); nothing of the parent's side is imported."""

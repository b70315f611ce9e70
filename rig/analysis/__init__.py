"""Analysis of stored results (Parquet tables only; no Triton needed), usable from a notebook, by
topic: ``conformance/`` (the conformance table, where its rows changed, its pages, findings and
upgrade diff), ``report/`` (``rig report``'s page and sections) and ``capacity/`` (``rig
capacity``'s plans and fleet checks); beside them the helpers the topics share: statistics and
frames, a run's and a gate's verdicts, sweeps, the version matrix, plots, the USL and tail models,
the release order (docs/dev/architecture.md, "Analysis by topic")."""

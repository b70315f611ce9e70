"""Analysis of stored results (Parquet tables only; no Triton needed), usable from a notebook:
statistics and frames, a run's and a gate's verdicts, sweeps and their knees, capacity plans (a USL
fit, fleets), the version matrix and the conformance table (its release order, dating, batches,
upgrade diff and pages), the report (Markdown and one HTML page) and its plots."""

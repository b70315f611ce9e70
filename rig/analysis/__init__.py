"""Analysis of stored results (Parquet tables only; no Triton needed): sweeps and plots."""

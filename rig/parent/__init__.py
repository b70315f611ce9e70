"""The parent's side: what is decided and checked before a worker starts (the run's configuration and
options, runtimes, which engine (asked of a child), model repositories, scenarios and shapes,
preflight checks, perf_analyzer) and the orchestrator
that starts workers, watches them and records each cycle. It never hosts Triton."""

"""What a run's options must agree on: an option given that the run could not apply is refused
in one line, never ignored."""

from __future__ import annotations

from rig.errors import RigError


def option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


TEMPLATE_ONLY = ("model", "model_size", "instances", "max_batch_size", "dynamic_batching", "fault",
                  "execute_delay_ms")


def refuse_inapplicable(args, cfg) -> None:
    """Options given on the command line that this run could not apply: one line, never ignored."""
    def given(*dests):
        return [option(d) for d in dests if getattr(args, d, None) is not None]

    def refuse(options, why):
        if options:
            raise RigError(f"{', '.join(options)} {why}")

    if cfg.model_repository:
        refuse(given(*TEMPLATE_ONLY), "shape(s) the rig's template model, and --model-repository runs "
               "your own: drop them")
    elif args.dynamic_batching and cfg.max_batch_size < 1:
        raise RigError("--dynamic-batching batches requests up to --max-batch-size, which is 0: give "
                       "--max-batch-size N (N >= 1) too, or drop it")
    if args.command == "bench":
        if args.rates:
            refuse(given("workload", "in_flight"), "apply to closed-loop points (--concurrency), not to --rates")
            if args.compare:
                raise RigError("--compare perf-analyzer runs at closed-loop points here (its request-rate "
                               "mode is not checked against the rig's): use --concurrency")
        else:
            refuse(given("arrivals", "seed"), "apply to open-loop points (--rates), not to --concurrency")
        if args.all_models:
            refuse(given("target_model"), "names one model, and --all-models spreads the load: drop one")
            if args.compare:
                raise RigError("--all-models spreads the load over every model, and perf_analyzer measures one: "
                               "drop --all-models to compare (the rig then loads the same model)")
        return
    if cfg.cycles == 1 and not getattr(args, "resume", None):
        refuse(given("restart"), "says how the server restarts between cycles, and this run has one cycle: "
               "give --cycles N (N > 1) or drop it")
    w = cfg.workload
    if w.name != "none":
        refuse(given("requests"), "counts the requests of a cycle without a workload; a workload runs for "
               "--workload-seconds: drop it")
    if w.master is not None:
        refuse(given("users", "workload_seconds", "window_seconds", "locust_web_port", "rate"),
               "come(s) from the `rig fleet` master with --locust-master: give it to the master, or drop it")
    if w.rate is not None:
        refuse(given("users", "in_flight", "locust_web_port"), "apply to Locust users (a closed loop); "
               "--rate runs one open-loop lane: drop one or the other")
    elif w.name != "none":
        refuse(given("arrivals", "seed"), "apply to an open loop (--rate), not to Locust users: drop them")

"""The options of the commands that run Triton (cycle, soak, bench; matrix passes them to each
cell): their definitions, the run's configuration they make (file, then options), and what they
must agree on: an option given that the run could not apply is refused in one line, never ignored."""

from __future__ import annotations

import argparse
import dataclasses

from rig.common.errors import RigError
from rig.contract.spec import INPUT_MEMORY
from rig.parent.config import (
    ARRIVALS,
    ENGINES,
    FAULT_PRESETS,
    MODELS,
    RESTART_MODES,
    RETAIN,
    STOP_STRATEGIES,
)


def option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def add_target_options(p: argparse.ArgumentParser) -> None:
    """What runs: the runtime, the engine and the model (cycle, soak, bench and matrix)."""
    g = p.add_argument_group("what runs")
    g.add_argument("--config", help="TOML file of options (example: workloads/nightly.toml)")
    g.add_argument("--runtime", help="auto (default), container, or an embedded version such as 0.7.0")
    g.add_argument("--engine", choices=ENGINES)
    g.add_argument("--model", choices=MODELS, help="the rig's model template (default numpy)")
    g.add_argument("--model-repository", help="soak your own model repository instead of a template")
    g.add_argument("--model-size", type=int, help="matrix size of the template model (default 4)")
    g.add_argument("--instances", type=int, help="model instances (default 1)")
    g.add_argument("--max-batch-size", type=int)
    g.add_argument("--dynamic-batching", action="store_true", default=None)
    g.add_argument(
        "--queue-delay-us",
        type=int,
        metavar="US",
        help="with --dynamic-batching: the batcher's max_queue_delay_microseconds (default 0)",
    )
    g.add_argument("--fault", help=f"fault injection preset of the template model: {', '.join(FAULT_PRESETS)}")
    g.add_argument("--execute-delay-ms", type=float, help="make the template model slow on purpose")
    g.add_argument(
        "--input-data",
        metavar="zero|random|FILE.json",
        help="what requests carry: random data, zeros, or a JSON file in perf_analyzer's format "
        '({"data": [{"INPUT": [1, 2]}, ...]}, entries sent in turn; a relative path is this folder\'s)',
    )
    g.add_argument(
        "--input-memory",
        choices=INPUT_MEMORY,
        help="where the requests' inputs live, and whether outputs the model leaves on the GPU stay "
        "there: cpu, or gpu (CUDA device 0 of those visible, through CuPy: inputs copied there once, "
        "submitted as GPU memory, outputs allocated there and read back to be checked) (default auto: "
        "gpu for the cupy model, cpu otherwise); recorded in every window's input_memory, output_memory",
    )
    g.add_argument(
        "--shape",
        action="append",
        metavar="NAME:d1,d2",
        help="variable dimensions of an input (repeat it, or INPUT0:5,X:2,3), for generated data and "
        "for file entries without a shape; the batch dimension left out",
    )
    g.add_argument(
        "--skip-ok",
        action="store_true",
        help="exit 0 when the run is skipped (the cupy model without a GPU); default: exit 3",
    )


def add_server_options(g) -> None:
    g.add_argument("--exit-timeout", type=int, help="the server's exit_timeout in seconds (default 30)")
    g.add_argument("--startup-timeout", type=float, help="seconds to become ready (default 120)")
    g.add_argument("--request-timeout", type=float, help="seconds a request may take (default 30)")
    g.add_argument(
        "--memory-samples",
        choices=("on", "off"),
        help="sample every process's memory (worker, each backend stub, GPU) through the load, for "
        "the growth verdict and the memory table (default on)",
    )
    g.add_argument(
        "--server-stats",
        choices=("on", "off"),
        help="read Triton's own statistics of the models as each window closes (requests, queue and "
        "compute time, batch sizes formed: the windows' server_* columns) (default on)",
    )
    g.add_argument("--results", help="results folder (default results/)")
    g.add_argument("--node", help="the name this machine's rows carry in `host` (default the hostname)")
    g.add_argument(
        "--cpus",
        metavar="LIST|count:N|quota:X",
        help="hold the run to a share of the machine: CPUs as taskset -c lists them (0, 0,1, 0-3), "
        "count:N (the first N this process may use) or quota:X (X CPUs' time, as a pod's CPU limit: a "
        "cgroup of its own, which needs root); the worker, its load and the backend stubs inherit "
        "it, and the run's row records it (runs.cpu_share, runs.cpus) (default: all it may use)",
    )


def add_cycle_options(p: argparse.ArgumentParser, cycles_default_help: str) -> None:
    """The lifecycle, the workload inside each cycle and the thresholds (cycle, soak and matrix)."""
    c = p.add_argument_group("lifecycle")
    c.add_argument("--cycles", type=int, help=cycles_default_help)
    c.add_argument("--requests", type=int, help="requests per cycle when no workload runs (default 100)")
    c.add_argument(
        "--requests-in-flight",
        type=int,
        metavar="N",
        help="send those requests N at a time, so that a batched model can form batches of up to N "
        "(default 1: one at a time)",
    )
    c.add_argument("--retain", choices=RETAIN, help="what stays referenced across stop() (default none)")
    c.add_argument(
        "--scenario",
        metavar="NAME",
        help="a lifecycle scenario (`rig scenarios` lists them): its "
        "fault and retention, or models of its own; recorded in each cycle's `scenario`",
    )
    c.add_argument(
        "--control",
        action="store_true",
        default=None,
        help="with --scenario: its negative control, the same model and client without the fault",
    )
    c.add_argument(
        "--model-shape",
        metavar="SHAPE",
        help="how the model is served: unbatched, batched (max_batch_size 8, dynamic batching), "
        "instances-2, decoupled, or several joined with commas; with --scenario, one of the shapes "
        "it runs in (`rig scenarios` says which; default its first); recorded in each cycle's `shape`",
    )
    c.add_argument("--stop-strategy", choices=STOP_STRATEGIES)
    c.add_argument(
        "--restart",
        choices=RESTART_MODES,
        help="how the server restarts between cycles: fresh-process (a new worker per cycle), "
        "same-process (one worker starts and stops the server again and again), reload (one server; "
        "the models unloaded and loaded again each cycle) (default fresh-process)",
    )
    add_server_options(c)
    w = p.add_argument_group("workload inside each cycle")
    w.add_argument(
        "--workload",
        help="none (fixed request count), steady, ramp, step, spike, soak "
        "(locustfiles in workloads/), or the path of your own locustfile (FILE.py)",
    )
    w.add_argument("--workload-seconds", type=float)
    w.add_argument("--users", type=int)
    w.add_argument("--in-flight", type=int)
    w.add_argument("--rate", help="open loop: arrivals per second")
    w.add_argument("--arrivals", choices=ARRIVALS)
    w.add_argument("--window-seconds", type=float)
    w.add_argument("--seed", type=int)
    w.add_argument("--locust-web-port", type=int, help="serve Locust's web UI on 127.0.0.1:PORT while loading")
    w.add_argument(
        "--locust-master",
        help="HOST:PORT of a `rig fleet` master: each cycle's load joins it as a "
        "Locust worker, and the master sets users, shape and length",
    )
    t = p.add_argument_group("thresholds (exit status 1 when crossed)")
    t.add_argument("--max-stop-latency", type=float, help="seconds")
    t.add_argument("--min-finalize-success", type=float, help="fraction 0..1")
    t.add_argument("--allow-leaks", action="store_true", default=None)
    t.add_argument(
        "--max-memory-growth",
        type=float,
        metavar="BYTES_PER_1K",
        help="a cycle is `leaking` where a process kind (the worker, a model's stubs) grows by more "
        "than this many bytes per 1,000 requests over its whole interval (default 262144)",
    )
    t.add_argument(
        "--max-slowdown",
        type=float,
        metavar="PCT",
        help="a cycle is `slowing` where its load's end is more than PCT %% slower than its start "
        "(p50 up or throughput down) over the whole interval; a run, the same across its cycles "
        "(default 50)",
    )
    t.add_argument(
        "--allow-outcomes",
        default=None,
        help="comma-separated verdicts that do not fail the run, of the lifecycle (clean, "
        "exit_timeout, ...), of the load (ok, errors, timeouts, ...) and of the growth (leaking, "
        "slowing); a kind left unnamed keeps its default (soak: clean, ok and ok; cycle: any, it "
        "records and reports)",
    )
    t.add_argument(
        "--junit",
        metavar="FILE",
        help="also write what was judged as JUnit XML for CI (Jenkins, GitLab, GitHub Actions): a test "
        "case per threshold and per cycle; its folder must exist (checked before the run)",
    )


OVERRIDES = {  # config key -> option dest (a subcommand without the option leaves the key alone)
    "runtime": "runtime",
    "engine": "engine",
    "model": "model",
    "model_repository": "model_repository",
    "model_size": "model_size",
    "instances": "instances",
    "max_batch_size": "max_batch_size",
    "dynamic_batching": "dynamic_batching",
    "queue_delay_us": "queue_delay_us",
    "fault": "fault",
    "execute_delay_ms": "execute_delay_ms",
    "cycles": "cycles",
    "requests": "requests",
    "requests_in_flight": "requests_in_flight",
    "retain": "retain",
    "scenario": "scenario",
    "control": "control",
    "model_shape": "model_shape",
    "exit_timeout": "exit_timeout",
    "stop_strategy": "stop_strategy",
    "restart": "restart",
    "startup_timeout": "startup_timeout",
    "request_timeout": "request_timeout",
    "results": "results",
    "node": "node",
    "input_data": "input_data",
    "input_memory": "input_memory",
    "shapes": "shape",
    "workload.master": "locust_master",
    "workload.name": "workload",
    "workload.seconds": "workload_seconds",
    "workload.users": "users",
    "workload.in_flight": "in_flight",
    "workload.arrivals": "arrivals",
    "workload.window_seconds": "window_seconds",
    "workload.seed": "seed",
    "workload.web_port": "locust_web_port",
    "thresholds.max_stop_latency_s": "max_stop_latency",
    "thresholds.min_finalize_success": "min_finalize_success",
    "thresholds.allow_leaks": "allow_leaks",
    "thresholds.allow_outcomes": "allow_outcomes",
    "thresholds.max_memory_growth": "max_memory_growth",
    "thresholds.max_slowdown": "max_slowdown",
    "memory_samples": "memory_samples",
    "server_stats": "server_stats",
}
# Options that shape a workload: without one (--workload none, the default) they cannot apply.
WORKLOAD_ONLY = (
    "workload_seconds",
    "users",
    "in_flight",
    "arrivals",
    "window_seconds",
    "seed",
    "locust_web_port",
    "server_stats",
)  # --server-stats: read as each (stored) window closes


def overrides(a: argparse.Namespace) -> dict:
    """The options given, as the config keys they override (None: not given)."""
    out = {key: getattr(a, dest, None) for key, dest in OVERRIDES.items()}
    out["workload.rate"] = one_rate(getattr(a, "rate", None))
    for key in ("memory_samples", "server_stats"):  # on | off
        if out[key] is not None:
            out[key] = out[key] == "on"
    return out


def one_rate(rate: str | None) -> float | None:
    if rate is None:
        return None
    try:
        return float(rate)
    except ValueError:
        raise RigError(
            f"--rate is one number of arrivals per second (got {rate!r}); lists are for `rig bench --rates`"
        ) from None


def _open_loop(cfg):
    """A rate (or a fleet's master) given with no workload: the rig's own steady lane runs it."""
    w = cfg.workload
    if w.name == "none" and (w.rate is not None or w.master is not None):
        return dataclasses.replace(cfg, workload=dataclasses.replace(w, name="steady"))
    return cfg


def run_config(args):
    """The run's configuration (file, then options), or None when the run is skipped here (said
    in one line). An option that cannot apply is refused in one line, never ignored."""
    from rig.parent import config

    if getattr(args, "junit", None) is not None:  # before anything runs: a night never ends unable to write it
        from rig.parent import junit

        junit.check_path(args.junit)
    if getattr(args, "resume", None):
        kept = [
            option(d)
            for d in (*OVERRIDES.values(), "rate")
            if d not in ("cycles", "results") and getattr(args, d, None) is not None
        ] + (["--config"] if args.config else [])
        if kept:
            raise RigError(
                f"a resumed run keeps the options it was started with; drop {', '.join(kept)} "
                "(only --cycles, to run more, and --results, where it is now, may be given)"
            )
    cfg = config.load(args.config, overrides(args), settle=None if args.command == "bench" else _open_loop)
    from rig.common import cpushare

    cpushare.hold(getattr(args, "cpus", None))  # before anything starts: all the run starts inherits it
    if cfg.workload.name == "none" and args.command != "bench":
        given = [option(d) for d in WORKLOAD_ONLY if getattr(args, d, None) is not None]
        if given:
            raise RigError(
                f"{', '.join(given)} shape(s) a workload, and none runs: add --workload "
                "steady (or a locustfile), or drop them"
            )
    refuse_inapplicable(args, cfg)
    if cfg.input_memory not in INPUT_MEMORY:
        raise RigError(f"input_memory must be one of {', '.join(INPUT_MEMORY)} (got {cfg.input_memory!r})")
    if cfg.model == "cupy" and not cfg.model_repository:
        from rig.parent.preflight import cupy_usable

        ok, why = cupy_usable()
        if not ok:
            print(
                f"rig: skipped: the cupy model needs a CUDA device and CuPy ({why}); nothing was run. "
                "Use --model numpy on this machine, or --skip-ok where a skip is a success."
            )
            return None
    if input_memory(cfg) == "gpu":
        from rig.parent.preflight import cupy_usable

        ok, why = cupy_usable()
        if not ok:
            print(
                f"rig: skipped: --input-memory gpu needs a CUDA device and CuPy ({why}); nothing was run. "
                "Use --input-memory cpu on this machine, or --skip-ok where a skip is a success."
            )
            return None
    return cfg


def input_memory(cfg) -> str:
    """Where the run's inputs live, ``cpu`` or ``gpu`` (``auto``: the cupy template's inputs on the
    GPU, where its execute uses them in place; every other model's on the host)."""
    if cfg.input_memory == "auto":
        return "gpu" if cfg.model == "cupy" and not cfg.model_repository else "cpu"
    return cfg.input_memory


def gpu_of(cfg) -> int:
    """The CUDA device of the run's GPU work: the input placement's (``gpu:N``), else the first."""
    kind, _, device = input_memory(cfg).partition(":")
    return int(device) if kind == "gpu" and device.isdigit() else 0


TEMPLATE_ONLY = (
    "model",
    "model_size",
    "instances",
    "max_batch_size",
    "dynamic_batching",
    "queue_delay_us",
    "fault",
    "execute_delay_ms",
)


def refuse_inapplicable(args, cfg) -> None:
    """Options given on the command line that this run could not apply: one line, never ignored."""

    def given(*dests):
        return [option(d) for d in dests if getattr(args, d, None) is not None]

    def refuse(options, why):
        if options:
            raise RigError(f"{', '.join(options)} {why}")

    if cfg.model_repository:
        refuse(
            given(*TEMPLATE_ONLY), "shape(s) the rig's template model, and --model-repository runs your own: drop them"
        )
    elif getattr(args, "queue_delay_us", None) is not None and not cfg.dynamic_batching:
        raise RigError(
            "--queue-delay-us is the dynamic batcher's delay: give --dynamic-batching and "
            "--max-batch-size N too, or drop it"
        )
    elif args.dynamic_batching and cfg.max_batch_size < 1:
        raise RigError(
            "--dynamic-batching batches requests up to --max-batch-size, which is 0: give "
            "--max-batch-size N (N >= 1) too, or drop it"
        )
    if args.command == "bench":
        if args.rates:
            refuse(given("workload", "in_flight"), "apply to closed-loop points (--concurrency), not to --rates")
            if args.compare:
                raise RigError(
                    "--compare perf-analyzer runs at closed-loop points here (its request-rate "
                    "mode is not checked against the rig's): use --concurrency"
                )
        else:
            refuse(given("arrivals", "seed"), "apply to open-loop points (--rates), not to --concurrency")
        if args.all_models:
            refuse(given("target_model"), "names one model, and --all-models spreads the load: drop one")
            if args.compare:
                raise RigError(
                    "--all-models spreads the load over every model, and perf_analyzer measures one: "
                    "drop --all-models to compare (the rig then loads the same model)"
                )
        return
    if cfg.cycles == 1 and not getattr(args, "resume", None):
        refuse(
            given("restart"),
            "says how the server restarts between cycles, and this run has one cycle: "
            "give --cycles N (N > 1) or drop it",
        )
    w = cfg.workload
    if w.name != "none":
        refuse(
            given("requests"),
            "counts the requests of a cycle without a workload; a workload runs for --workload-seconds: drop it",
        )
        refuse(
            given("requests_in_flight"),
            "sends the fixed count of a cycle without a workload; a workload "
            "keeps --users x --in-flight requests in flight: drop it",
        )
    if w.master is not None:
        refuse(
            given("users", "workload_seconds", "window_seconds", "locust_web_port", "rate"),
            "come(s) from the `rig fleet` master with --locust-master: give it to the master, or drop it",
        )
    if w.rate is not None:
        refuse(
            given("users", "in_flight", "locust_web_port"),
            "apply to Locust users (a closed loop); --rate runs one open-loop lane: drop one or the other",
        )
    elif w.name != "none":
        refuse(given("arrivals", "seed"), "apply to an open loop (--rate), not to Locust users: drop them")


class Parser(argparse.ArgumentParser):
    """A parser whose errors are one line (``RigError``), never usage and a traceback."""

    def error(self, message):
        raise RigError(f"{message} (see `{self.prog} --help`)")


def soak_parser() -> argparse.ArgumentParser:
    """The options of ``rig soak`` that a run's configuration is read from (``run_config``)."""
    p = Parser(prog="rig soak")
    add_target_options(p)
    add_cycle_options(p, "cycles to run")
    p.set_defaults(command="soak")
    return p

"""Command line: ``rig cycle | soak | bench | runtime | doctor | worker`` here; the commands over
stored results (report, gate, capacity, compact, check) in ``rig.commands``."""

from __future__ import annotations

import argparse
import sys

from rig.errors import RigError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not usage + traceback
        raise RigError(f"{message} (see `{self.prog} --help`)")


def _target_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what runs")
    g.add_argument("--config", help="TOML file of options (example: workloads/nightly.toml)")
    g.add_argument("--runtime", help="auto (default), container, or an embedded version such as 0.7.0")
    g.add_argument("--engine", choices=["auto", "capi", "tritonserver"])
    g.add_argument("--model", choices=["numpy", "cupy"], help="the rig's model template (default numpy)")
    g.add_argument("--model-repository", help="soak your own model repository instead of a template")
    g.add_argument("--model-size", type=int, help="matrix size of the template model (default 4)")
    g.add_argument("--instances", type=int, help="model instances (default 1)")
    g.add_argument("--max-batch-size", type=int)
    g.add_argument("--dynamic-batching", action="store_true", default=None)
    g.add_argument("--fault", help="fault injection preset of the template model: none, finalize-raises, "
                   "finalize-sleeps, stub-exits, execute-raises, load-fails, load-hangs, leaks-memory")
    g.add_argument("--execute-delay-ms", type=float, help="make the template model slow on purpose")
    g.add_argument("--input-data", metavar="zero|random|FILE.json",
                   help="what requests carry: random data, zeros, or a JSON file in perf_analyzer's format "
                   '({"data": [{"INPUT": [1, 2]}, ...]}, entries sent in turn; a relative path is this folder\'s)')
    g.add_argument("--shape", action="append", metavar="NAME:d1,d2",
                   help="variable dimensions of an input (repeat it, or INPUT0:5,X:2,3), for generated data and "
                   "for file entries without a shape; the batch dimension left out")
    g.add_argument("--skip-ok", action="store_true",
                   help="exit 0 when the run is skipped (the cupy model without a GPU); default: exit 3")


def _server_options(g) -> None:
    g.add_argument("--exit-timeout", type=int, help="the server's exit_timeout in seconds (default 30)")
    g.add_argument("--startup-timeout", type=float, help="seconds to become ready (default 120)")
    g.add_argument("--request-timeout", type=float, help="seconds a request may take (default 30)")
    g.add_argument("--results", help="results folder (default results/)")
    g.add_argument("--node", help="the name this machine's rows carry in `host` (default the hostname)")


def _cycle_options(p: argparse.ArgumentParser, cycles_default_help: str) -> None:
    c = p.add_argument_group("lifecycle")
    c.add_argument("--cycles", type=int, help=cycles_default_help)
    c.add_argument("--requests", type=int, help="requests per cycle when no workload runs (default 100)")
    c.add_argument("--retain", choices=["none", "last-response", "last-array"],
                   help="what stays referenced across stop() (default none)")
    c.add_argument("--stop-strategy", choices=["stop", "unload-then-stop"])
    c.add_argument("--restart", choices=["fresh-process", "same-process"])
    _server_options(c)
    w = p.add_argument_group("workload inside each cycle")
    w.add_argument("--workload", help="none (fixed request count), steady, ramp, step, spike, soak "
                   "(locustfiles in workloads/), or the path of your own locustfile (FILE.py)")
    w.add_argument("--workload-seconds", type=float)
    w.add_argument("--users", type=int)
    w.add_argument("--in-flight", type=int)
    w.add_argument("--rate", help="open loop: arrivals per second")
    w.add_argument("--arrivals", choices=["poisson", "constant"])
    w.add_argument("--window-seconds", type=float)
    w.add_argument("--seed", type=int)
    w.add_argument("--locust-web-port", type=int, help="serve Locust's web UI on 127.0.0.1:PORT while loading")
    w.add_argument("--locust-master", help="HOST:PORT of a `rig fleet` master: each cycle's load joins it as a "
                   "Locust worker, and the master sets users, shape and length")
    t = p.add_argument_group("thresholds (exit status 1 when crossed)")
    t.add_argument("--max-stop-latency", type=float, help="seconds")
    t.add_argument("--min-finalize-success", type=float, help="fraction 0..1")
    t.add_argument("--allow-leaks", action="store_true", default=None)
    t.add_argument("--allow-outcomes", default=None,
                   help="comma-separated verdicts that do not fail the run, of the lifecycle (clean, "
                   "exit_timeout, ...) and of the load (ok, errors, timeouts, ...); a kind left unnamed "
                   "keeps its default (soak: clean and ok; cycle: any, it records and reports)")


def _bench_options(p: argparse.ArgumentParser) -> None:
    """Bench runs each point in a fresh worker for --windows windows; it has no cycles,
    retention, restart mode or thresholds, and its points replace --users and --rate."""
    c = p.add_argument_group("server")
    _server_options(c)
    b = p.add_argument_group("sweep")
    b.add_argument("--concurrency", help="closed loop points (requests in flight), e.g. 1,2,4,8 "
                   "(default 1,2,4,8 when no --rates)")
    b.add_argument("--rates", "--rate", dest="rates", help="open loop points (infer/s), e.g. 1000,2000,4000")
    b.add_argument("--workload", help="closed loop: steady (default) or a locustfile whose users "
                   "have no tasks of their own and no LoadTestShape (a point holds its concurrency: "
                   "ramp, step and spike are refused)")
    b.add_argument("--in-flight", type=int, help="requests in flight per user (default 1)")
    b.add_argument("--arrivals", choices=["poisson", "constant"])
    b.add_argument("--seed", type=int)
    b.add_argument("--windows", type=int, default=3, help="windows per point (default 3)")
    b.add_argument("--window-seconds", type=float,
                   help="seconds per window (default 5, perf_analyzer's measurement interval, unless the "
                   "config file sets workload.window_seconds)")
    b.add_argument("--p99-bound-ms", type=float, help="stop the sweep once p99 exceeds this")
    b.add_argument("--compare", choices=["perf-analyzer"], help="also run perf_analyzer at the same points")
    b.add_argument("--repeats", type=int, default=3, help="measurements per point (default 3); with --compare, "
                   "the rig and perf_analyzer alternate in order, and the table gives medians over repeats")
    b.add_argument("--cpu-idle", choices=["hold", "os"], default="hold",
                   help="hold (default): keep the CPUs out of idle while measuring, for every tool, so that "
                   "wake-up costs do not decide the figures; os: leave idle to the kernel")
    b.add_argument("--target-model", help="the model the load goes to (default the repository's first, the "
                   "one perf_analyzer measures)")
    b.add_argument("--all-models", action="store_true", default=None,
                   help="spread the closed loop over every model of the repository (not with --compare)")
    inst = p._option_string_actions["--instances"]  # a list here: each count is a sweep of its own
    inst.type, inst.help = str, "model instances, or counts to sweep: 1,2,4 (a fresh server each; default 1)"


_OVERRIDES = {  # config key -> option dest (a subcommand without the option leaves the key alone)
    "runtime": "runtime", "engine": "engine", "model": "model", "model_repository": "model_repository",
    "model_size": "model_size", "instances": "instances", "max_batch_size": "max_batch_size",
    "dynamic_batching": "dynamic_batching", "fault": "fault", "execute_delay_ms": "execute_delay_ms",
    "cycles": "cycles", "requests": "requests", "retain": "retain", "exit_timeout": "exit_timeout",
    "stop_strategy": "stop_strategy", "restart": "restart", "startup_timeout": "startup_timeout",
    "request_timeout": "request_timeout", "results": "results", "node": "node",
    "input_data": "input_data", "shapes": "shape",
    "workload.master": "locust_master",
    "workload.name": "workload", "workload.seconds": "workload_seconds", "workload.users": "users",
    "workload.in_flight": "in_flight", "workload.arrivals": "arrivals",
    "workload.window_seconds": "window_seconds", "workload.seed": "seed", "workload.web_port": "locust_web_port",
    "thresholds.max_stop_latency_s": "max_stop_latency",
    "thresholds.min_finalize_success": "min_finalize_success",
    "thresholds.allow_leaks": "allow_leaks",
    "thresholds.allow_outcomes": "allow_outcomes",
}


def _overrides(a: argparse.Namespace) -> dict:
    out = {key: getattr(a, dest, None) for key, dest in _OVERRIDES.items()}
    out["workload.rate"] = _one_rate(getattr(a, "rate", None))
    return out


def _one_rate(rate: str | None) -> float | None:
    if rate is None:
        return None
    try:
        return float(rate)
    except ValueError:
        raise RigError(f"--rate is one number of arrivals per second (got {rate!r}); "
                       "lists are for `rig bench --rates`") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rig", description="Benchmark and soak-test Triton's in-process API: "
                "start, load, infer, stop, verify; again and again.",
                epilog="exit status: 0 ok; 1 a threshold crossed or a gate failed (FAIL: lines say why); 2 bad "
                "input (one line); 3 nothing was run (--skip-ok makes it 0); 4 the machine failed the run")
    p.add_argument("--version", dest="show_version", action="store_true", help="print the rig's version")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="{cycle,soak,bench,report,gate,capacity,compact,check,matrix,fleet,runtime,doctor}")

    c = sub.add_parser("cycle", help="one lifecycle cycle: start, infer, retain, stop, verify, record")
    _target_options(c)
    _cycle_options(c, "cycles to run (default 1)")
    c.set_defaults(func=cmd_cycle)

    s = sub.add_parser("soak", help="many cycles (the nightly job), with progress, summary and exit status")
    _target_options(s)
    _cycle_options(s, "cycles to run (default 1; the nightly config runs hundreds)")
    s.add_argument("--resume", metavar="RUN_ID", help="continue a killed run (same run id, each cycle once)")
    s.set_defaults(func=cmd_soak)

    b = sub.add_parser("bench", help="sweep concurrency or arrival rate; store every window")
    _target_options(b)
    _bench_options(b)
    b.set_defaults(func=cmd_bench)

    from rig.commands import add_parsers

    add_parsers(sub)  # report, gate, capacity, compact, check: over stored results

    from rig.commands import runtime as runtime_command

    runtime_command.add_parser(sub, parser_class=_Parser)

    d = sub.add_parser("doctor", help="which runtimes, engines, GPUs and CuPy are usable here, and why not")
    d.set_defaults(func=cmd_doctor)

    for sp in (c, s, b):
        _show_defaults(sp)

    wk = sub.add_parser("worker")  # internal: hosts Triton for the parent; listed nowhere
    sub._choices_actions = [a for a in sub._choices_actions if a.dest != "worker"]
    wk.add_argument("--spec", required=True)
    wk.add_argument("--result-fd", type=int, default=-1)
    wk.set_defaults(func=cmd_worker)
    return p


def _show_defaults(p: argparse.ArgumentParser) -> None:
    """Append each option's default (the config's, which the option overrides) to its help."""
    from rig.config import RunConfig

    cfg = RunConfig()
    defaults = {}
    for key, dest in _OVERRIDES.items():
        value = cfg
        for part in key.split("."):
            value = getattr(value, part)
        defaults[dest] = value
    for action in p._actions:
        value = defaults.get(action.dest)
        if value is None or value is False or action.help == argparse.SUPPRESS:
            continue
        if "default" not in (action.help or ""):
            action.help = f"{action.help} (default {value})" if action.help else f"(default {value})"


# ---------------------------------------------------------------- subcommands

EXIT_SKIPPED = 3
EXIT_MACHINE = 4  # the machine around the rig failed the run (a full disk, ...)


# Options that shape a workload: without one (--workload none, the default) they cannot apply.
_WORKLOAD_ONLY = ("workload_seconds", "users", "in_flight", "arrivals", "window_seconds", "seed",
                  "locust_web_port")


from rig.options import option as _option, refuse_inapplicable as _refuse_inapplicable  # noqa: E402


def _config(args):
    """The run's configuration (file, then options), or None when the run is skipped here.
    An option that cannot apply is refused in one line, never ignored."""
    from rig import config

    _terminate_like_interrupt()
    if getattr(args, "resume", None):
        kept = [_option(d) for d in (*_OVERRIDES.values(), "rate") if d not in ("cycles", "results")
                and getattr(args, d, None) is not None] + (["--config"] if args.config else [])
        if kept:
            raise RigError(f"a resumed run keeps the options it was started with; drop {', '.join(kept)} "
                           "(only --cycles, to run more, and --results, where it is now, may be given)")
    cfg = config.load(args.config, _overrides(args))
    if cfg.workload.name == "none" and args.command != "bench":
        if cfg.workload.rate is not None or cfg.workload.master is not None:
            cfg.workload.name = "steady"  # --rate alone: an open loop on the rig's own lane
        else:
            given = [_option(d) for d in _WORKLOAD_ONLY if getattr(args, d, None) is not None]
            if given:
                raise RigError(f"{', '.join(given)} shape(s) a workload, and none runs: add --workload "
                               "steady (or a locustfile), or drop them")
    _refuse_inapplicable(args, cfg)
    if cfg.model == "cupy" and not cfg.model_repository:
        from rig.preflight import cupy_usable

        ok, why = cupy_usable()
        if not ok:
            print(f"rig: skipped: the cupy model needs a CUDA device and CuPy ({why}); nothing was run. "
                  "Use --model numpy on this machine, or --skip-ok where a skip is a success.")
            return None
    return cfg


def _cycles(args, cfg, allowed: tuple[str, ...]) -> int:
    """``allowed``: the outcomes that pass unless the run's config names others."""
    from rig import soak
    from rig.text import redact

    status, tally, run_id, reasons = soak.execute(
        cfg, args.command, resume=getattr(args, "resume", None), cycles_given=args.cycles is not None,
        allowed=allowed, log=_log)
    if args.command == "soak" or len(tally.rows) > 1:
        print(soak.summary_table(tally))
    for reason in reasons:
        print(f"FAIL: {reason}")
    print(f"results: {redact(str(cfg.results))}/cycles (run_id {run_id})")
    return status


def cmd_cycle(args) -> int:
    """A single cycle is a reproducer: it records and reports every outcome; soaks judge."""
    from rig.cycle import LOAD_OUTCOMES, OUTCOMES

    cfg = _config(args)
    if cfg is None:
        return 0 if args.skip_ok else EXIT_SKIPPED
    if args.allow_leaks is None and not args.config:
        cfg.thresholds.allow_leaks = True
    return _cycles(args, cfg, tuple(OUTCOMES) + tuple(LOAD_OUTCOMES))


def cmd_soak(args) -> int:
    from rig import soak

    cfg = _config(args)
    if cfg is None:
        return 0 if args.skip_ok else EXIT_SKIPPED
    return _cycles(args, cfg, soak.DEFAULT_ALLOWED)


def cmd_bench(args) -> int:
    from rig import bench

    args.instance_list = bench.instance_counts(args.instances)
    args.instances = args.instance_list[0] if args.instance_list else None
    cfg = _config(args)
    if cfg is None:
        return 0 if args.skip_ok else EXIT_SKIPPED
    return bench.run(cfg, args, log=_log)


def cmd_doctor(args) -> int:
    from rig import doctor

    print(doctor.report())
    return 0


def cmd_worker(args) -> int:
    from rig import worker

    return worker.main(args.spec, args.result_fd)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.show_version:
            import rig

            print(rig.__version__)
            return 0
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        return args.func(args)
    except RigError as e:
        print(f"rig: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as e:  # a dependency that does not import here (e.g. pyarrow vs numpy 1)
        first = (str(e).strip().splitlines() or [type(e).__name__])[-1]
        if (getattr(e, "name", None) or "").split(".")[0] == "rig":
            print(f"rig: error: this installation of the rig is incomplete ({first}); reinstall it "
                  "from its checkout: pip install -e .", file=sys.stderr)
        else:
            print(f"rig: error: a dependency does not import ({first}); `rig doctor` names the conflict",
                  file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rig: interrupted; the cycles stored so far stay", file=sys.stderr)
        return 130
    except OSError as e:  # the machine failed the run: a full disk, a folder gone, ...
        where = f" ({e.filename})" if e.filename else ""
        print(f"rig: error: {e.strerror or e}{where}; the cycles stored before it stay (free space or "
              "choose another --results, then resume)", file=sys.stderr)
        return EXIT_MACHINE


def _terminate_like_interrupt() -> None:
    """A nightly job's timeout sends SIGTERM: kill the worker group and keep what is stored."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _log(msg: str) -> None:
    print(msg, flush=True)

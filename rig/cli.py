"""Command line: ``rig cycle | soak | bench | runtime | doctor | worker``. Only this module prints."""

from __future__ import annotations

import argparse
import sys

from rig.errors import RigError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not usage + traceback
        raise RigError(f"{message} (see `{self.prog} --help`)")


def _run_options(p: argparse.ArgumentParser, cycles_default_help: str) -> None:
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
                   "finalize-sleeps, stub-exits, load-fails, load-hangs, leaks-memory")
    g.add_argument("--execute-delay-ms", type=float, help="make the template model slow on purpose")
    c = p.add_argument_group("lifecycle")
    c.add_argument("--cycles", type=int, help=cycles_default_help)
    c.add_argument("--requests", type=int, help="requests per cycle when no workload runs (default 100)")
    c.add_argument("--retain", choices=["none", "last-response", "last-array"],
                   help="what stays referenced across stop() (default none)")
    c.add_argument("--exit-timeout", type=int, help="the server's exit_timeout in seconds (default 30)")
    c.add_argument("--stop-strategy", choices=["stop", "unload-then-stop"])
    c.add_argument("--restart", choices=["fresh-process", "same-process"])
    c.add_argument("--startup-timeout", type=float, help="seconds to become ready (default 120)")
    c.add_argument("--request-timeout", type=float, help="seconds a request may take (default 30)")
    c.add_argument("--results", help="results folder (default results/)")
    w = p.add_argument_group("workload inside each cycle")
    w.add_argument("--workload", help="none (fixed request count), steady, ramp, step, spike, soak "
                   "(locustfiles in workloads/), or the path of your own locustfile (FILE.py)")
    w.add_argument("--workload-seconds", type=float)
    w.add_argument("--users", type=int)
    w.add_argument("--in-flight", type=int)
    w.add_argument("--rate", help="open loop: arrivals per second (bench: a list, e.g. 1000,2000)")
    w.add_argument("--arrivals", choices=["poisson", "constant"])
    w.add_argument("--window-seconds", type=float)
    w.add_argument("--seed", type=int)
    w.add_argument("--locust-web-port", type=int, help="serve Locust's web UI on 127.0.0.1:PORT while loading")
    t = p.add_argument_group("thresholds (exit status 1 when crossed)")
    t.add_argument("--max-stop-latency", type=float, help="seconds")
    t.add_argument("--min-finalize-success", type=float, help="fraction 0..1")
    t.add_argument("--allow-leaks", action="store_true", default=None)
    t.add_argument("--allow-outcomes", default=None,
                   help="comma-separated outcomes that do not fail the run (default: clean for soak; "
                   "any for cycle, which records and reports)")


def _overrides(a: argparse.Namespace) -> dict:
    return {
        "runtime": a.runtime, "engine": a.engine, "model": a.model, "model_repository": a.model_repository,
        "model_size": a.model_size, "instances": a.instances, "max_batch_size": a.max_batch_size,
        "dynamic_batching": a.dynamic_batching, "fault": a.fault, "execute_delay_ms": a.execute_delay_ms,
        "cycles": a.cycles, "requests": a.requests, "retain": a.retain, "exit_timeout": a.exit_timeout,
        "stop_strategy": a.stop_strategy, "restart": a.restart, "startup_timeout": a.startup_timeout,
        "request_timeout": a.request_timeout,
        "results": a.results,
        "workload.name": a.workload, "workload.seconds": a.workload_seconds, "workload.users": a.users,
        "workload.in_flight": a.in_flight, "workload.rate": _one_rate(a), "workload.arrivals": a.arrivals,
        "workload.window_seconds": a.window_seconds, "workload.seed": a.seed, "workload.web_port": a.locust_web_port,
        "thresholds.max_stop_latency_s": a.max_stop_latency,
        "thresholds.min_finalize_success": a.min_finalize_success,
        "thresholds.allow_leaks": a.allow_leaks,
    }


def _one_rate(a: argparse.Namespace) -> float | None:
    if a.rate is None or a.command == "bench":
        return None  # bench sweeps its --rate list itself
    try:
        return float(a.rate)
    except ValueError:
        raise RigError(f"--rate is one number of arrivals per second (got {a.rate!r}); "
                       "lists are for `rig bench`") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rig", description="Benchmark and soak-test Triton's in-process API: "
                "start, load, infer, stop, verify; again and again.")
    p.add_argument("--version", dest="show_version", action="store_true", help="print the rig's version")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="{cycle,soak,bench,runtime,doctor}")

    c = sub.add_parser("cycle", help="one lifecycle cycle: start, infer, retain, stop, verify, record")
    _run_options(c, "cycles to run (default 1)")

    s = sub.add_parser("soak", help="many cycles (the nightly job), with progress, summary and exit status")
    _run_options(s, "cycles to run (default 1; the nightly config runs hundreds)")
    s.add_argument("--resume", metavar="RUN_ID", help="continue a killed run (same run id, each cycle once)")

    b = sub.add_parser("bench", help="sweep concurrency or arrival rate; store every window")
    _run_options(b, "unused")
    b.add_argument("--concurrency", help="closed loop points, e.g. 1,2,4,8")
    b.add_argument("--rates", help="same as --rate: open loop points (infer/s), e.g. 1000,2000,4000")
    b.add_argument("--windows", type=int, default=3, help="windows per point (default 3)")
    b.add_argument("--p99-bound-ms", type=float, help="stop the sweep once p99 exceeds this")
    b.add_argument("--compare", choices=["perf-analyzer"], help="also run perf_analyzer at the same points")

    r = sub.add_parser("runtime", help="install and list Triton runtimes")
    rs = r.add_subparsers(dest="runtime_command", parser_class=_Parser)
    ri = rs.add_parser("install", help="unpack an embedded runtime from the nvidia-pytriton wheel")
    ri.add_argument("version", nargs="?", default=None, help="nvidia-pytriton version (default the rig's pin)")
    ri.add_argument("--force", action="store_true")
    rs.add_parser("list", help="the runtimes installed here")

    sub.add_parser("doctor", help="which runtimes, engines, GPUs and CuPy are usable here, and why not")

    wk = sub.add_parser("worker")  # internal: hosts Triton for the parent; listed nowhere
    sub._choices_actions = [a for a in sub._choices_actions if a.dest != "worker"]
    wk.add_argument("--spec", required=True)
    wk.add_argument("--result-fd", type=int, default=-1)
    return p


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
        if args.command == "worker":
            from rig import worker

            return worker.main(args.spec, args.result_fd)
        if args.command == "runtime":
            return _runtime(args)
        if args.command == "doctor":
            from rig import doctor

            print(doctor.report())
            return 0
        from rig import config

        _terminate_like_interrupt()
        cfg = config.load(args.config, _overrides(args))
        if cfg.model == "cupy" and not cfg.model_repository:
            from rig.orchestrator import cupy_usable

            ok, why = cupy_usable()
            if not ok:  # GPU-only paths skip with a reason, never fail
                print(f"rig: skipped: the cupy model needs a CUDA device and CuPy ({why}); "
                      "nothing was run. Use --model numpy on this machine.")
                return 0
        if args.allow_outcomes is not None:
            allowed = tuple(x.strip() for x in args.allow_outcomes.split(",") if x.strip())
            from rig.cycle import OUTCOMES

            unknown = [x for x in allowed if x not in OUTCOMES]
            if unknown:
                raise RigError(f"unknown outcome(s) {', '.join(unknown)}: choose from {', '.join(OUTCOMES)}")
        elif args.command == "cycle":
            # A single cycle is a reproducer: it records and reports; soaks judge.
            from rig.cycle import OUTCOMES

            allowed = tuple(OUTCOMES)
            if args.allow_leaks is None and not args.config:
                cfg.thresholds.allow_leaks = True
        else:
            allowed = ("clean",)
        if args.command == "bench":
            from rig import bench

            return bench.run(cfg, args, log=_log)
        from rig import soak

        status, tally, run_id, reasons = soak.execute(
            cfg, args.command, resume=getattr(args, "resume", None), allowed=allowed, log=_log)
        if args.command == "soak" or len(tally.rows) > 1:
            print(soak.summary_table(tally))
        for reason in reasons:
            print(f"FAIL: {reason}")
        print(f"results: {cfg.results}/cycles (run_id {run_id})")
        return status
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


def _terminate_like_interrupt() -> None:
    """A nightly job's timeout sends SIGTERM: kill the worker group and keep what is stored."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _log(msg: str) -> None:
    print(msg, flush=True)


def _runtime(args) -> int:
    from rig import runtime

    if args.runtime_command == "install":
        rt = runtime.install_embedded(args.version or runtime.DEFAULT_EMBEDDED, force=args.force, log=_log)
        print(f"installed {rt.name}: Triton {rt.triton_version} in {rt.server_dir}")
        return 0
    if args.runtime_command == "list":
        rows = runtime.list_embedded()
        home = runtime.container_home()
        if home:
            print(f"container  Triton {runtime.container_runtime().triton_version}  {home}")
        for r in rows:
            print(f"{r['name']:<16} Triton {r['triton_version']:<8} stubs {','.join(r['stubs']) or '-':<24} {r['path']}")
        if not rows and not home:
            print(f"no runtime installed; `rig runtime install` adds the default ({runtime.DEFAULT_EMBEDDED})")
        return 0
    raise RigError("say `rig runtime install [VERSION]` or `rig runtime list`")

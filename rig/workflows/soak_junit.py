"""A soak's run as JUnit XML (``rig soak --junit FILE``): a test case per threshold the soak
judges and per cycle, over ``rig.parent.junit`` (the XML) and ``rig.workflows.soak`` (the tally and its verdicts)."""

from __future__ import annotations

import time

from rig.common.text import redact
from rig.contract import verdicts
from rig.parent.config import RunConfig
from rig.workflows.tally import Judged, Tally, cycle_line


def junit_suite(
    tally: Tally,
    cfg: RunConfig,
    allowed: tuple[str, ...],
    reasons: list[str],
    command: str,
    run: dict,
    time_s: float | None = None,
    timestamp: str | None = None,
    interrupted: str | None = None,
):
    """The run as a JUnit test suite (``rig.parent.junit``): a case per threshold the soak judges, failed
    with the reasons ``judge`` gave (skipped where it was not judged, and why), a case per cycle
    (failed where a verdict of it is not allowed), and an error where the run was ``interrupted``.
    ``run``: the run's identity (run_id, triton_version, engine, ...), kept as the suite's properties."""
    from rig.common import trends
    from rig.parent import junit

    t = cfg.thresholds
    subject = f"{cfg.scenario}{'-control' if cfg.control else ''}" if cfg.scenario else cfg.retain
    classname = f"{command}.{run.get('engine') or cfg.engine}.{subject}"

    def counts(c) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(c.items())) or "-"

    lat, fs, (stubs, shm) = tally.stop_latencies, tally.finalize_success, tally.leaks
    trend = tally.run_trend()
    figures = {
        "lifecycle outcomes": f"{counts(tally.outcomes)} (allowed: {', '.join(allowed)})",
        "load outcomes": counts(tally.load_outcomes),
        "growth outcomes": counts(tally.growth_outcomes),
        "leaks": f"{stubs} stub(s) killed by the rig, {shm} shared-memory region(s) left",
    }
    if lat:
        figures["stop latency"] = f"max {max(lat):.3f} s" + (
            f" (threshold {t.max_stop_latency_s} s)" if t.max_stop_latency_s is not None else ""
        )
    if fs is not None:
        figures["finalize success"] = f"{fs:.1%} before stop returned" + (
            f" (threshold {t.min_finalize_success:.1%})" if t.min_finalize_success is not None else ""
        )
    if trend.get("slowdown_pct") is not None:
        figures["slowdown across the run"] = (
            f"{trend['slowdown_pct']:+.1f} % slower at the end (at least "
            f"{trend['slowdown_low_pct']:+.1f} %; threshold {t.max_slowdown:g} %)"
        )
    not_judged = {}
    if not set(tally.load_outcomes) - {verdicts.NOT_MEASURED}:
        not_judged["load outcomes"] = "no cycle's load was measured"
    if not set(tally.growth_outcomes) - {verdicts.NOT_MEASURED}:
        not_judged["growth outcomes"] = "no cycle's growth was measured (--memory-samples off, or loads too short)"
    if t.max_stop_latency_s is None:
        not_judged["stop latency"] = "no --max-stop-latency given"
    elif not lat:
        not_judged["stop latency"] = "no cycle measured its stop"
    if t.min_finalize_success is None:
        not_judged["finalize success"] = "no --min-finalize-success given"
    elif fs is None:
        not_judged["finalize success"] = "no cycle expected a finalize"
    if t.allow_leaks:
        not_judged["leaks"] = "leaks allowed (--allow-leaks)"
    if t.max_slowdown is None:
        not_judged["slowdown across the run"] = "no --max-slowdown given"
    elif "slowing" in allowed:
        not_judged["slowdown across the run"] = "slowing allowed (--allow-outcomes)"
    elif trend.get("slowdown_low_pct") is None:
        not_judged["slowdown across the run"] = f"no trend to read: it needs {trends.MIN_POINTS} cycles with a load"
    checks = junit.judged(reasons, junit.SOAK_CHECKS, f"{classname}.thresholds", not_judged, figures)
    checks += junit.cycle_checks(tally.rows, allowed, f"{classname}.cycles", line=cycle_line)
    if interrupted:
        checks.append(junit.Check(classname, "run", "error", interrupted, kind="interrupted"))
    return junit.suite(
        f"rig {command} {run.get('run_id')}",
        checks,
        time=time_s,
        timestamp=timestamp,
        hostname=run.get("host"),
        properties={**run, "allowed": ",".join(allowed)},
    )


def write(path: str, judged: Judged, reasons: list[str], interrupted: str | None = None) -> None:
    """``junit_suite`` of the run written to ``path`` (``rig.parent.junit.write``)."""
    import socket

    from rig.parent import junit

    p, cfg, tally, command, started = judged.p, judged.cfg, judged.tally, judged.command, judged.started

    run = {
        "run_id": p.run_id,
        "command": command,
        "triton_version": p.runtime.triton_version,
        "runtime": p.runtime.name,
        "engine": p.engine,
        "model": p.model_label,
        "retain": cfg.retain,
        "scenario": cfg.scenario,
        "control": cfg.control if cfg.scenario else None,
        "cycles": cfg.cycles,
        "results": redact(str(cfg.results)),
        "host": cfg.node or socket.gethostname(),
    }
    suite = junit_suite(
        tally,
        cfg,
        judged.allowed,
        reasons,
        command,
        run,
        time_s=time.monotonic() - started[1],
        timestamp=started[0],
        interrupted=interrupted,
    )
    junit.write(path, [suite])

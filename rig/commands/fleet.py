"""``rig fleet``: the master of a distributed run (Locust's distributed mode, ``rig.contract.fleet``).

It hosts no server. Each round it waits for its nodes (``rig soak --locust-master HOST:PORT``)
to join, drives one load shape across them, collects every node's figures, ends the round, and
stores one ``fleet`` row per node and round plus the round's total. A node that joined and never
reported (killed, say) is ``lost``; one expected that never joined is ``absent``; the rounds go
on with the nodes that are left. Exit status 1 when a node was lost or absent (a ``FAIL:`` line
each; ``--allow-node-loss`` makes it 0), 2 on bad input.
"""

from __future__ import annotations

import sys

from rig.common.errors import Exit, RigError
from rig.parent.options import add_option


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fleet",
        help="the master of a distributed run: one load shape across nodes that "
        "each host their own server (rig soak --locust-master HOST:PORT)",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("--nodes", type=int, required=True, help="nodes to wait for before the first round")
    # The options the nodes are given too: their flags and types the option table's, their defaults the master's
    add_option(p, "cycles", default=1, help="rounds, one per node cycle: give the nodes the same --cycles (default 1)")
    add_option(
        p,
        "workload.name",
        default="steady",
        help="steady (default), ramp, step, spike, soak or a "
        "locustfile: its shape drives the users (the nodes give the same --workload)",
    )
    add_option(
        p,
        "workload.users",
        default=None,
        help="users at the peak, spread over the nodes (default one per node; at least one per node)",
    )
    add_option(p, "workload.seconds", default=10.0, help="load per round (default 10)")
    add_option(p, "workload.window_seconds", default=1.0, help="the nodes' windows (default 1)")
    p.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 for nodes on other machines)",
    )
    p.add_argument("--port", type=int, default=5557, help="port to listen on (default 5557)")
    p.add_argument(
        "--join-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for the nodes at each round's start (default 120)",
    )
    add_option(p, "results", default="results", help="results folder or URI, shared with the nodes (default results/)")
    p.add_argument("--allow-node-loss", action="store_true", help="exit 0 even when a node was lost")
    p.set_defaults(func=None)  # rig.cli.cmd_fleet: run with the worker side's Master


def _check(a) -> None:
    from rig.contract.fleet import NODE_WAIT_S

    if a.nodes < 1 or a.cycles < 1:
        raise RigError("--nodes and --cycles must be >= 1")
    a.users = a.nodes if a.users is None else a.users
    if a.users < a.nodes:
        raise RigError(
            f"--users {a.users} leaves a node without a user (--nodes {a.nodes}): give at least one user per node"
        )
    if a.workload_seconds <= 0 or a.window_seconds <= 0:
        raise RigError("--workload-seconds and --window-seconds must be > 0")
    if not 0 < a.join_timeout <= NODE_WAIT_S:
        raise RigError(f"--join-timeout must be > 0 and <= {NODE_WAIT_S:g} (the longest a node waits)")
    if not 0 < a.port < 65536:
        raise RigError(f"--port {a.port}: give a TCP port (1-65535)")


def _rows(fleet_id: str, r: int, started: str, a, joined, reports, missing_at, absent, users: int):
    from rig.common import hdr
    from rig.contract.fleet import figures
    from rig.contract.table_rows import FleetRow

    rows, hists = [], []
    base = dict(run_id=fleet_id, round=r, started_at=started, seconds=a.workload_seconds, locust_requests=None)
    for name in sorted(joined):
        hello = joined[name][1]
        rep = reports.get(name)
        if rep is None:
            when = missing_at.get(name)
            why = (
                f"went silent {when:.1f} s into the round (no heartbeat) and never reported"
                if when is not None
                else "never reported its figures"
            )
            rows.append(
                FleetRow(
                    **base,
                    node=name,
                    outcome="lost",
                    users=None,
                    node_run_id=hello.get("run_id"),
                    node_cycle=hello.get("cycle"),
                    requests=None,
                    errors=None,
                    throughput=None,
                    p50_us=None,
                    p99_us=None,
                    max_us=None,
                    histogram=None,
                    detail=why,
                )
            )
            continue
        h = hdr.merge(rep.get("histograms") or [])
        if h is not None:
            hists.append(h)
        rows.append(
            FleetRow(
                **base,
                node=name,
                outcome="ok",
                users=None,
                node_run_id=rep.get("run_id"),
                node_cycle=rep.get("cycle"),
                requests=rep.get("requests"),
                errors=rep.get("errors"),
                throughput=rep.get("throughput"),
                detail=None,
                **figures(h),
            )
        )
    for name, why in sorted(absent.items()):
        rows.append(
            FleetRow(
                **base,
                node=name,
                outcome="absent" if "refused" not in why else "refused",
                users=None,
                node_run_id=None,
                node_cycle=None,
                requests=None,
                errors=None,
                throughput=None,
                p50_us=None,
                p99_us=None,
                max_us=None,
                histogram=None,
                detail=why,
            )
        )
    ok = [x for x in rows if x.outcome == "ok"]
    total = hists[0] if hists else None
    for h in hists[1:]:
        total.add(h)
    bad = [x for x in rows if x.outcome != "ok"]
    rows.append(
        FleetRow(
            **base,
            node="*",
            outcome="ok" if not bad else "degraded",
            users=users,
            node_run_id=None,
            node_cycle=None,
            requests=sum(x.requests or 0 for x in ok),
            errors=sum(x.errors or 0 for x in ok),
            throughput=sum(x.throughput or 0.0 for x in ok),
            detail="; ".join(f"{x.node} {x.outcome}: {x.detail}" for x in bad) or None,
            **figures(total),
        )
    )
    return rows


def run(a, Master) -> int:
    """``Master``: the Locust master runner with the rig's rounds on top (``rig.worker.load.master``,
    given by the entry point: the commands know the worker's side only through it)."""
    import dataclasses

    from rig.common.text import redact
    from rig.contract.rows import now_iso
    from rig.parent.orchestrator import new_run_id
    from rig.store import Store

    _check(a)
    log = _log
    store = Store(a.results)
    master = Master(a, log)
    fleet_id = new_run_id()
    log(
        f"fleet {fleet_id}: listening on {a.bind}:{a.port} for {a.nodes} node(s); {a.cycles} round(s) of "
        f"{a.workload_seconds:g} s, {a.users} user(s) at the peak"
    )
    known: set[str] = set()
    gone: dict[str, str] = {}
    fails: list[str] = []
    table = []
    try:
        for r in range(1, a.cycles + 1):
            expect = None if r == 1 else known - set(gone)
            if expect is not None and not expect:
                fails.append(f"round {r}: no node left; the remaining rounds were not run")
                break
            started = now_iso()
            joined, reports, missing_at = master.play(r, expect)
            known |= set(joined)
            absent = dict.fromkeys(
                (expect or set()) - set(joined), f"did not join round {r} within {a.join_timeout:g} s"
            )
            absent.update({n: f"refused: {why}" for n, why in master.refused.items() if n not in gone})
            master.refused.clear()
            for n, why in absent.items():
                gone[n] = why
            if r == 1 and len(joined) < a.nodes:
                fails.append(f"round 1: {len(joined)} of {a.nodes} node(s) joined within {a.join_timeout:g} s")
            if not joined:
                fails.append(f"round {r}: no node joined; the remaining rounds were not run")
                break
            rows = _rows(fleet_id, r, started, a, joined, reports, missing_at, absent, a.users)
            # Locust's master clears its stats when a round starts: what it holds now is this round's
            note = (
                "; ".join(
                    filter(
                        None,
                        [
                            rows[-1].detail,
                            *(
                                f"{n} joined during the round (for the next): the users Locust moved to it idled"
                                for n in master.late
                            ),
                        ],
                    )
                )
                or None
            )
            total = dataclasses.replace(rows[-1], locust_requests=master.env.stats.total.num_requests, detail=note)
            rows[-1] = total
            versions = {h.get("triton_version") for _, h in joined.values()} - {None}
            store.write(
                "fleet",
                rows,
                versions.pop() if len(versions) == 1 else ("mixed" if versions else "unknown"),
                f"r{r:06d}",
            )
            for x in rows[:-1]:
                if x.outcome != "ok":
                    fails.append(f"round {r}: node {x.node} {x.outcome}: {x.detail}")
            table.append((total, sum(x.outcome == "ok" for x in rows[:-1]), len(rows) - 1))
            log(
                f"round {r}/{a.cycles}: {sum(x.outcome == 'ok' for x in rows[:-1])}/{len(rows) - 1} node(s) reported, "
                f"{total.requests or 0:,} requests, {total.throughput or 0:,.0f} infer/s, p99 "
                f"{f'{total.p99_us:,.0f} us' if total.p99_us else '-'}" + (f"; {total.detail}" if total.detail else "")
            )
    except KeyboardInterrupt:
        fails.append("interrupted; the rounds stored so far stay")
    finally:
        master.close()
    print(f"{'round':>5}  {'nodes':>5}  {'requests':>9}  {'infer/s':>9}  {'p99 us':>8}  {'Locust saw':>10}  outcome")
    for t, ok, n in table:
        print(
            f"{t.round:>5}  {f'{ok}/{n}':>5}  {t.requests:>9,}  {t.throughput:>9,.0f}  "
            f"{t.p99_us or 0:>8,.0f}  {t.locust_requests or 0:>10,}  {t.outcome}"
        )
    for f in fails:
        print(f"FAIL: {f}")
    print(f"results: {redact(str(a.results))}/fleet (run_id {fleet_id})")
    return Exit.FAILED if fails and not a.allow_node_loss else Exit.OK


def _log(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)

"""``rig fleet``: the master of a distributed run (Locust's distributed mode, ``rig.contract.fleet``).

It hosts no server. Each round it waits for its nodes (``rig soak --locust-master HOST:PORT``)
to join, drives one load shape across them, collects every node's figures, ends the round, and
stores one ``fleet`` row per node and round plus the round's total. A node that joined and never
reported (killed, say) is ``lost``; one expected that never joined is ``absent``; the rounds go
on with the nodes that are left. Exit status 1 when a node was lost or absent (a ``FAIL:`` line
each; ``--allow-node-loss`` makes it 0), 2 on bad input.

The rounds themselves, stored and judged: ``rig.workflows.fleet``.
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


def run(a, Master) -> int:
    """``Master``: the Locust master runner with the rig's rounds on top (``rig.worker.load.master``,
    given by the entry point: the commands know the worker's side only through it)."""
    from rig.common.text import redact
    from rig.workflows import fleet

    _check(a)
    out = fleet.run(a, Master, _log)
    print(f"{'round':>5}  {'nodes':>5}  {'requests':>9}  {'infer/s':>9}  {'p99 us':>8}  {'Locust saw':>10}  outcome")
    for t, ok, n in out.table:
        print(
            f"{t.round:>5}  {f'{ok}/{n}':>5}  {t.requests:>9,}  {t.throughput:>9,.0f}  "
            f"{t.p99_us or 0:>8,.0f}  {t.locust_requests or 0:>10,}  {t.outcome}"
        )
    for f in out.fails:
        print(f"FAIL: {f}")
    print(f"results: {redact(str(a.results))}/fleet (run_id {out.fleet_id})")
    return Exit.FAILED if out.fails and not a.allow_node_loss else Exit.OK


def _log(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)

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


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fleet",
        help="the master of a distributed run: one load shape across nodes that "
        "each host their own server (rig soak --locust-master HOST:PORT)",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("--nodes", type=int, required=True, help="nodes to wait for before the first round")
    p.add_argument(
        "--cycles", type=int, default=1, help="rounds, one per node cycle: give the nodes the same --cycles (default 1)"
    )
    p.add_argument(
        "--workload",
        default="steady",
        help="steady (default), ramp, step, spike, soak or a "
        "locustfile: its shape drives the users (the nodes give the same --workload)",
    )
    p.add_argument(
        "--users",
        type=int,
        default=None,
        help="users at the peak, spread over the nodes (default one per node; at least one per node)",
    )
    p.add_argument("--workload-seconds", type=float, default=10.0, help="load per round (default 10)")
    p.add_argument("--window-seconds", type=float, default=1.0, help="the nodes' windows (default 1)")
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
    p.add_argument(
        "--results", default="results", help="results folder or URI, shared with the nodes (default results/)"
    )
    p.add_argument("--allow-node-loss", action="store_true", help="exit 0 even when a node was lost")
    p.set_defaults(func=run)


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


class Master:
    """Locust's master runner with the rig's rounds on top."""

    def __init__(self, a, log):
        from locust.env import Environment

        from rig.worker.load.users import load_workload, size_shape

        self.a, self.log = a, log
        self.shape = size_shape(load_workload(a.workload).shape, a.users, a.workload_seconds)
        self.env = Environment(user_classes=[])
        try:
            self.runner = self.env.create_master_runner(a.bind, a.port)
        except Exception as e:  # noqa: BLE001 - zmq's address in use, a bad address
            raise RigError(
                f"cannot listen on {a.bind}:{a.port} ({type(e).__name__}: {e}): choose another --port or --bind"
            ) from None
        self.pending: dict[str, tuple[str, dict]] = {}  # node -> (client id, hello), joined this round
        self.reports: dict[str, dict] = {}
        self.classes: dict | None = None
        self.round = 0
        self.over = False
        self.refused: dict[str, str] = {}
        self.late: list[str] = []
        self.current: dict[str, str] = {}  # node -> client id, this round
        self.released: set[str] = set()
        self.running = False  # Locust is driving this round's load
        self.runner.register_message("rig_node", self._on_node)
        self.runner.register_message("rig_done", self._on_done)

    def _on_node(self, environment, msg, **_):
        data, cid = msg.data, msg.node_id
        why = None
        if self.over:
            why = f"the fleet ran its {self.a.cycles} round(s)"
        elif self.classes is not None and data.get("classes") != self.classes:
            why = (
                f"its workload's users {sorted(data.get('classes') or {})} differ from the fleet's "
                f"{sorted(self.classes)}: give every node the master's --workload and model"
            )
            self.refused[data["node"]] = why
        if why:
            self.runner.send_message("rig_over", {"why": why}, client_id=cid)
            return
        if self.running:  # it joins the next round; the users Locust moves to it idle until then
            self.late.append(data["node"])
        self.pending[data["node"]] = (cid, data)

    def _on_done(self, environment, msg, **_):
        self.reports[msg.data["node"]] = msg.data
        if not self.running:
            self._release()

    def _release(self) -> None:
        """Let the nodes that reported leave (stop their servers, start their next cycles). Only
        once Locust has stopped driving: a worker leaving a running test makes Locust's master
        rebalance, and that restarts the test it had just stopped."""
        for name in set(self.reports) - self.released:
            cid = self.current.get(name)
            if cid is not None:
                self.runner.send_message("rig_release", {}, client_id=cid)
            self.released.add(name)

    def _user_classes(self, hellos: list[dict]) -> None:
        from locust import User, constant, task

        if self.classes is None:
            self.classes = hellos[0]["classes"]

        class Placeholder(User):  # the master runs no user: the names and weights steer the dispatch
            abstract = True
            wait_time = constant(1)

            @task
            def nothing(self):
                pass

        self.env.user_classes = [
            type(name, (Placeholder,), {"weight": w, "fixed_count": fc, "abstract": False})
            for name, (w, fc) in self.classes.items()
        ]

    def _drive(self):
        """The shape's ticks (Locust's own shape loop would stop the workers at its end)."""
        import gevent

        from rig.worker.load.locust_api import active_workers

        def active():
            return active_workers(self.runner)

        if self.shape is None:  # Locust's advice: at most 100 users a second per worker
            self.runner.start(self.a.users, spawn_rate=min(self.a.users * 100, 50 * max(1, active())))
            return
        self.shape.reset_time()
        while True:
            tick = self.shape.tick()
            if tick is None:
                return
            if active():  # none: every node has reported and left
                self.runner.start(tick[0], spawn_rate=min(tick[1], 50 * active()))
            gevent.sleep(1.0)

    def play(self, r: int, expect: set[str] | None):
        """Round ``r``: join, load, collect. Returns (joined, reports, missing_at)."""
        from time import monotonic as now

        import gevent

        from rig.contract.fleet import NODE_WAIT_S
        from rig.worker.load.locust_api import stop_load, worker_connected, worker_lost

        self.round = r
        want = self.a.nodes if expect is None else len(expect)
        t_join = now()
        while now() - t_join < self.a.join_timeout:
            names = set(self.pending)
            if len(names) >= want and (expect is None or expect <= names):
                break
            gevent.sleep(0.1)
        joined, self.pending, self.late = dict(self.pending), {}, []
        if not joined:
            return joined, {}, {}
        self._user_classes([h for _, h in joined.values()])
        self.reports, self.released = {}, set()
        self.current = {name: cid for name, (cid, _) in joined.items()}
        self.running = True

        shares = share_text({name: hello for name, (_, hello) in joined.items()})
        self.log(
            f"round {r}/{self.a.cycles}: {len(joined)} node(s) joined ({shares}); {self.a.workload_seconds:g} s of load"
        )
        for cid in self.current.values():
            self.runner.send_message(
                "rig_round",
                {"round": r, "seconds": self.a.workload_seconds, "window_seconds": self.a.window_seconds},
                client_id=cid,
            )
        driver = gevent.spawn(self._drive)
        t0, missing_at = now(), {}
        budget = min(NODE_WAIT_S, self.a.workload_seconds * 2 + 60)
        collect_until = None
        while now() - t0 < budget:
            for name, cid in self.current.items():
                if name not in self.reports and name not in missing_at and worker_lost(self.runner, cid):
                    missing_at[name] = now() - t0
            waiting = set(joined) - set(self.reports)
            if not waiting:
                break
            if self.running and (waiting <= set(missing_at) or (self.reports and now() - t0 > self.a.workload_seconds)):
                # The load is over (or only silent nodes are left): Locust stops driving, so that a
                # node joining for the next round gets no users meanwhile; stragglers may still report.
                driver.kill()
                stop_load(self.runner)
                self.running = False
                self._release()
                collect_until = now() + 10
            if collect_until is not None and now() > collect_until and waiting <= set(missing_at):
                break
            gevent.sleep(0.2)
        driver.kill()
        if self.running:
            stop_load(self.runner)
            self.running = False
        self._release()
        t_leave = now()  # the reported nodes leave, their last Locust stats sent: the cross-check is whole
        while now() - t_leave < 5 and any(worker_connected(self.runner, self.current[n]) for n in self.reports):
            gevent.sleep(0.05)
        self.current = {}
        return joined, dict(self.reports), missing_at

    def close(self):
        self.over = True
        self.runner.quit()


def _rows(fleet_id: str, r: int, started: str, a, joined, reports, missing_at, absent, users: int):
    from rig.common import hdr
    from rig.contract.fleet import figures
    from rig.contract.rows import FleetRow

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


def run(a) -> int:
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


def share_text(hellos: dict[str, dict]) -> str:
    """The nodes' shares of their machines, as the master logs them: ``a 1 CPU (0), b 1 CPU (1)``."""

    def one(h):
        n = h.get("cpu_share")
        return "share unknown" if n is None else f"{n:g} CPU{'s' if n != 1 else ''} ({h.get('cpus')})"

    return ", ".join(f"{name} {one(h)}" for name, h in sorted(hellos.items()))

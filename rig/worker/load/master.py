"""The master of ``rig fleet``: Locust's master runner, with the rig's rounds on top. It drives the
load shape across the nodes (each a ``rig soak --locust-master``), and collects what each node reports
at its round's end. Locust runs here, so this is the worker's side: ``rig.cli`` hands it to
``rig.commands.fleet.run``, which stores and judges the rounds."""

from __future__ import annotations

from rig.common.errors import RigError


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
        self.cpu_s = None  # this process's CPU seconds over the round's load (``play``)
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
        self.pending[data["node"]] = (cid, {**data, "machine": machine_of(cid)})

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
        """Round ``r``: join, load, collect. Returns (joined, reports, missing_at); ``cpu_s`` holds
        what this process (the master) spent of CPU time over the round's load."""
        from time import monotonic as now
        from time import process_time

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
        cpu0, self.cpu_s = process_time(), None
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
                self.cpu_s = process_time() - cpu0  # the load's: what the master took while the nodes measured
                self._release()
                collect_until = now() + 10
            if collect_until is not None and now() > collect_until and waiting <= set(missing_at):
                break
            gevent.sleep(0.2)
        driver.kill()
        if self.running:
            stop_load(self.runner)
            self.running = False
        if self.cpu_s is None:
            self.cpu_s = process_time() - cpu0
        self._release()
        t_leave = now()  # the reported nodes leave, their last Locust stats sent: the cross-check is whole
        while now() - t_leave < 5 and any(worker_connected(self.runner, self.current[n]) for n in self.reports):
            gevent.sleep(0.05)
        self.current = {}
        return joined, dict(self.reports), missing_at

    def close(self):
        self.over = True
        self.runner.quit()


def share_text(hellos: dict[str, dict]) -> str:
    """The nodes' shares of their machines, as the master logs them: ``a 1 CPU (0), b 1 CPU (1)``."""

    def one(h):
        n = h.get("cpu_share")
        return "share unknown" if n is None else f"{n:g} CPU{'s' if n != 1 else ''} ({h.get('cpus')})"

    return ", ".join(f"{name} {one(h)}" for name, h in sorted(hellos.items()))


def machine_of(client_id) -> str | None:
    """The machine a Locust worker runs on: its client id is ``<hostname>_<32 hex digits>``."""
    name, _, tail = str(client_id or "").rpartition("_")
    return name if name and len(tail) == 32 else None

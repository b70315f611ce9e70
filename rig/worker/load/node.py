"""A fleet node's side of a round, inside the worker's load: its link to the master (``NodeLink``)
and its hello. The protocol's names and the figures both sides exchange are ``rig.contract.fleet``'s."""

from __future__ import annotations

from rig.contract.fleet import NODE_WAIT_S, RELEASE_WAIT_S, node_name, parse_master


class NodeLink:
    """A node cycle's membership of the fleet: a Locust worker runner on ``env``, connected to
    the master, with the rig's messages. Raises EngineError when the master cannot be reached."""

    def __init__(self, env, master: str, hello: dict):
        import gevent.event

        from rig.worker.engines.base import EngineError
        from rig.worker.load import locust_api

        host, port = parse_master(master)
        locust_api.shorten_connect_retries(6)  # about 30 s, not Locust's 5 minutes
        self.round = gevent.event.AsyncResult()
        self.released = gevent.event.Event()
        try:
            self.runner = env.create_worker_runner(host, port)
        except (ConnectionError, OSError) as e:
            raise EngineError(
                f"no `rig fleet` master answered at {master} within 30 s ({type(e).__name__}): "
                "start the master first, or check --locust-master",
                "UNAVAILABLE",
            ) from None
        # Users run here only during this node's round: Locust's master moves users to a worker
        # as soon as it connects, even one that joins while another round is under way.
        self.open = False
        locust_api.gate_spawns(self.runner, lambda: self.open)

        def on_round(environment, msg, **_):
            self.open = True
            self.round.set(msg.data)

        self.runner.register_message("rig_round", on_round)
        self.runner.register_message("rig_over", lambda environment, msg, **_: self.round.set({"over": msg.data}))
        self.runner.register_message("rig_release", lambda environment, msg, **_: self.released.set())
        self.env = env
        self.runner.send_message("rig_node", hello)

    def wait_round(self) -> dict:
        """The round's settings; EngineError when none comes (the master is over, or silent)."""
        import gevent

        from rig.worker.engines.base import EngineError

        try:
            data = self.round.get(timeout=NODE_WAIT_S)
        except gevent.Timeout:
            raise EngineError(f"the fleet's master started no round within {NODE_WAIT_S:g} s", "TIMEOUT") from None
        if "over" in data:
            raise EngineError(
                f"the fleet's master has no round for this cycle: {data['over'].get('why')}", "UNAVAILABLE"
            )
        return data

    def finish(self) -> None:
        """The node's windows are over: its users stop (their requests drain into the last
        window), and a late spawn from the master no longer starts any here."""
        self.open = False
        self.runner.stop()

    def done(self, figures_: dict) -> None:
        """Report this node's figures, wait for the round's end, and leave the fleet."""
        self.runner.send_message("rig_done", figures_)
        self.released.wait(RELEASE_WAIT_S)
        self.leave()

    def leave(self) -> None:
        from rig.worker.load import locust_api

        # Locust's own figures, for the master's cross-check; then "quit"
        locust_api.leave_master(self.env, self.runner)


def node_hello(wcfg: dict, classes: list[type], tags: dict) -> dict:
    from rig.common.cpushare import current

    share = current()  # the worker's: inherited from the node's --cpus (rig.common.cpushare)
    return {
        "node": node_name(wcfg.get("node")),
        "run_id": tags.get("run_id"),
        "cycle": tags.get("cycle"),
        "triton_version": tags.get("triton_version"),
        "engine": tags.get("engine"),
        "model": tags.get("model"),
        "cpu_share": share["cpu_share"],
        "cpus": share["cpus"],
        "classes": {c.__name__: [getattr(c, "weight", 1), getattr(c, "fixed_count", 0)] for c in classes},
    }

"""Load across nodes: Locust's distributed mode, one round per cycle.

A node is ``rig soak --locust-master HOST:PORT --node NAME``: it runs its own cycles as ever, and
in each cycle, once its own server is up, the cycle's load joins the master as a Locust worker.
The master (``rig fleet``) hosts no server: each round it waits for its nodes to join, drives
one load shape across all of them (Locust spreads the users over the nodes and moves a lost
node's users to the others), collects each node's figures, ends the round, and stores one
``fleet`` row per node and round, and the round's total (node ``*``). Each node stores its own
runs, cycles and windows, tagged with its name in ``host``.

The rig's messages ride on the Locust connection (custom messages):

  node -> master  rig_node     who it is: name, run and cycle, user classes, Triton version
  master -> node  rig_round    the round starts: {round, seconds, window_seconds}; users follow
  master -> node  rig_over     no round for this cycle: {why}
  node -> master  rig_done     the node's figures for the round (windows' HDR histograms)
  master -> node  rig_release  the round is over: the node leaves and stops its server
"""

from __future__ import annotations

from rig import hdr
from rig.errors import RigError

NODE_WAIT_S = 300.0  # the longest a node's cycle waits for its round to start
RELEASE_WAIT_S = 60.0  # ... and for the master to end the round after its own figures are in


def parse_master(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); one line of RigError otherwise."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RigError(f"--locust-master takes HOST:PORT, the address `rig fleet` listens on (got {text!r})")
    return host.strip("[]"), int(port)


def check_master(text: str) -> None:
    """A node's first check: something listens at the master's address (one line otherwise)."""
    import socket

    host, port = parse_master(text)
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as e:
        raise RigError(f"no `rig fleet` master listens at {text} ({e.strerror or type(e).__name__}): start "
                       "`rig fleet --nodes N ...` there first, or check --locust-master") from None


def node_name(given: str | None) -> str:
    import platform

    return given or platform.node() or "node"


def figures(hist) -> dict:
    """p50/p99/max (us) and the encoded histogram of ``hist`` (None: all None)."""
    if hist is None or hist.get_total_count() == 0:
        return {"p50_us": None, "p99_us": None, "max_us": None, "histogram": None}
    table = hist.get_percentile_to_value_dict([50, 99])
    return {"p50_us": float(table[50]), "p99_us": float(table[99]), "max_us": float(hist.get_max_value()),
            "histogram": hdr.encode(hist)}


# ---------------------------------------------------------------- the node's side


class NodeLink:
    """A node cycle's membership of the fleet: a Locust worker runner on ``env``, connected to
    the master, with the rig's messages. Raises EngineError when the master cannot be reached."""

    def __init__(self, env, master: str, hello: dict):
        import gevent.event

        from rig.engines.base import EngineError
        from rig.load import locust_api

        host, port = parse_master(master)
        locust_api.shorten_connect_retries(6)  # about 30 s, not Locust's 5 minutes
        self.round = gevent.event.AsyncResult()
        self.released = gevent.event.Event()
        try:
            self.runner = env.create_worker_runner(host, port)
        except (ConnectionError, OSError) as e:
            raise EngineError(f"no `rig fleet` master answered at {master} within 30 s ({type(e).__name__}): "
                              "start the master first, or check --locust-master", "UNAVAILABLE") from None
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

        from rig.engines.base import EngineError

        try:
            data = self.round.get(timeout=NODE_WAIT_S)
        except gevent.Timeout:
            raise EngineError(f"the fleet's master started no round within {NODE_WAIT_S:g} s", "TIMEOUT") from None
        if "over" in data:
            raise EngineError(f"the fleet's master has no round for this cycle: {data['over'].get('why')}",
                              "UNAVAILABLE")
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
        from rig.load import locust_api

        # Locust's own figures, for the master's cross-check; then "quit"
        locust_api.leave_master(self.env, self.runner)


def node_hello(wcfg: dict, classes: list[type], tags: dict) -> dict:
    from rig.cpushare import current

    share = current()  # the worker's: inherited from the node's --cpus (rig.cpushare)
    return {"node": node_name(wcfg.get("node")), "run_id": tags.get("run_id"),
            "cycle": tags.get("cycle"), "triton_version": tags.get("triton_version"),
            "engine": tags.get("engine"), "model": tags.get("model"),
            "cpu_share": share["cpu_share"], "cpus": share["cpus"],
            "classes": {c.__name__: [getattr(c, "weight", 1), getattr(c, "fixed_count", 0)] for c in classes}}


def share_text(hellos: dict[str, dict]) -> str:
    """The nodes' shares of their machines, as the master logs them: ``a 1 CPU (0), b 1 CPU (1)``."""
    def one(h):
        n = h.get("cpu_share")
        return "share unknown" if n is None else f"{n:g} CPU{'s' if n != 1 else ''} ({h.get('cpus')})"

    return ", ".join(f"{name} {one(h)}" for name, h in sorted(hellos.items()))


def node_figures(hello: dict, summary: dict, rows: list[dict]) -> dict:
    return {"node": hello["node"], "run_id": hello["run_id"], "cycle": hello["cycle"],
            "requests": summary.get("requests"), "errors": summary.get("errors"),
            "throughput": summary.get("throughput"),
            "histograms": [r.get("histogram") for r in rows if r.get("histogram")]}

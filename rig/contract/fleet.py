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

from rig.common import hdr
from rig.common.errors import RigError

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
        raise RigError(
            f"no `rig fleet` master listens at {text} ({e.strerror or type(e).__name__}): start "
            "`rig fleet --nodes N ...` there first, or check --locust-master"
        ) from None


def node_name(given: str | None) -> str:
    import platform

    return given or platform.node() or "node"


def figures(hist) -> dict:
    """p50/p99/max (us) and the encoded histogram of ``hist`` (None: all None)."""
    if hist is None or hist.get_total_count() == 0:
        return {"p50_us": None, "p99_us": None, "max_us": None, "histogram": None}
    table = hist.get_percentile_to_value_dict([50, 99])
    return {
        "p50_us": float(table[50]),
        "p99_us": float(table[99]),
        "max_us": float(hist.get_max_value()),
        "histogram": hdr.encode(hist),
    }


def node_figures(hello: dict, summary: dict, rows: list[dict]) -> dict:
    return {
        "node": hello["node"],
        "run_id": hello["run_id"],
        "cycle": hello["cycle"],
        "requests": summary.get("requests"),
        "errors": summary.get("errors"),
        "throughput": summary.get("throughput"),
        "histograms": [r.get("histogram") for r in rows if r.get("histogram")],
    }

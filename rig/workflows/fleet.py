"""What ``rig fleet`` does (``rig.commands.fleet`` parses and prints): the rounds of a distributed
run, each one load shape across the nodes that joined it (Locust's master, ``rig.contract.fleet``),
stored as one ``fleet`` row per node and round plus the round's total, and judged: a node that
joined and never reported is ``lost``, one expected that never joined ``absent`` (or ``refused``);
the rounds go on with the nodes that are left."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rig.common import hdr
from rig.contract.fleet import figures
from rig.contract.rows import now_iso
from rig.contract.table_rows import FleetRow


@dataclasses.dataclass
class Outcome:
    """The fleet's run: its id, each round's total with the nodes that reported and those
    expected, and the failures (one ``FAIL:`` line each)."""

    fleet_id: str
    table: list[tuple[FleetRow, int, int]] = dataclasses.field(default_factory=list)
    fails: list[str] = dataclasses.field(default_factory=list)


def _lost_row(base: dict, name: str, hello: dict, when: float | None) -> FleetRow:
    why = (
        f"went silent {when:.1f} s into the round (no heartbeat) and never reported"
        if when is not None
        else "never reported its figures"
    )
    return _figureless_row(base, name, "lost", why, hello)


def _ok_row(base: dict, name: str, rep: dict, h, machine: str | None = None) -> FleetRow:
    return FleetRow(
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
        host=machine,
        **figures(h),
    )


def _absent_row(base: dict, name: str, why: str) -> FleetRow:
    return _figureless_row(base, name, "absent" if "refused" not in why else "refused", why, {})


def _figureless_row(base: dict, name: str, outcome: str, why: str, hello: dict) -> FleetRow:
    """A node's row without figures (lost, absent or refused): what it said when it joined, if it did."""
    return FleetRow(
        **base,
        node=name,
        outcome=outcome,
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


def _total_row(base: dict, rows: list[FleetRow], hists: list, users: int) -> FleetRow:
    ok = [x for x in rows if x.outcome == "ok"]
    total = None
    if hists:
        total = hists[0]
        for h in hists[1:]:
            total.add(h)
    bad = [x for x in rows if x.outcome != "ok"]
    return FleetRow(
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


def rows(fleet_id: str, r: int, started: str, a, joined, reports, missing_at, absent, users: int) -> list[FleetRow]:
    """Round ``r``'s rows: one per node that joined (``ok`` with its figures, or ``lost``), one per
    node ``absent`` (or ``refused``), and last the round's total (``*``: its histograms merged)."""
    out, hists = [], []
    base = dict(run_id=fleet_id, round=r, started_at=started, seconds=a.workload_seconds, locust_requests=None)
    for name in sorted(joined):
        rep = reports.get(name)
        if rep is None:
            out.append(_lost_row(base, name, joined[name][1], missing_at.get(name)))
            continue
        h = hdr.merge(rep.get("histograms") or [])
        if h is not None:
            hists.append(h)
        out.append(_ok_row(base, name, rep, h, joined[name][1].get("machine")))
    out.extend(_absent_row(base, name, why) for name, why in sorted(absent.items()))
    out.append(_total_row(base, out, hists, users))
    return out


def master_tags(cpu_s: float | None) -> dict:
    """The total row's figures of the master (this process): its machine, its CPUs, and the CPU
    seconds it spent over the round's load (``cpu_s``, the master's count)."""
    import os
    import platform

    from rig.common.cpushare import cpu_list

    return {"host": platform.node() or None, "master_cpus": cpu_list(os.sched_getaffinity(0)), "master_cpu_s": cpu_s}


def _note(total: FleetRow, late) -> str | None:
    """The total's detail, with each node that joined during the round (Locust's users moved to it idled)."""
    moved = (f"{n} joined during the round (for the next): the users Locust moved to it idled" for n in late)
    return "; ".join(filter(None, [total.detail, *moved])) or None


def _version(joined) -> str:
    """The Triton version the round's rows are stored under: the nodes' one, else ``mixed`` or ``unknown``."""
    versions = {h.get("triton_version") for _, h in joined.values()} - {None}
    return versions.pop() if len(versions) == 1 else ("mixed" if versions else "unknown")


class _Rounds:
    """The rounds' state: the nodes known, those gone (and why), and the outcome so far."""

    def __init__(self, a, master, store, out: Outcome, log: Callable[[str], None]) -> None:
        self.a, self.master, self.store, self.out, self.log = a, master, store, out, log
        self.known: set[str] = set()
        self.gone: dict[str, str] = {}

    def absent(self, r: int, expect, joined) -> dict[str, str]:
        """Who was expected and did not join round ``r``, or was refused (each gone from now on)."""
        absent = dict.fromkeys(
            (expect or set()) - set(joined), f"did not join round {r} within {self.a.join_timeout:g} s"
        )
        absent.update({n: f"refused: {why}" for n, why in self.master.refused.items() if n not in self.gone})
        self.master.refused.clear()
        self.gone.update(absent)
        return absent

    def play(self, r: int) -> bool:
        """Round ``r``: played, stored and judged. False where no node is left to play the rest."""
        a, fails = self.a, self.out.fails
        expect = None if r == 1 else self.known - set(self.gone)
        if expect is not None and not expect:
            fails.append(f"round {r}: no node left; the remaining rounds were not run")
            return False
        started = now_iso()
        joined, reports, missing_at = self.master.play(r, expect)
        self.known |= set(joined)
        absent = self.absent(r, expect, joined)
        if r == 1 and len(joined) < a.nodes:
            fails.append(f"round 1: {len(joined)} of {a.nodes} node(s) joined within {a.join_timeout:g} s")
        if not joined:
            fails.append(f"round {r}: no node joined; the remaining rounds were not run")
            return False
        self.store_round(
            r, rows(self.out.fleet_id, r, started, a, joined, reports, missing_at, absent, a.users), joined
        )
        return True

    def store_round(self, r: int, stored: list[FleetRow], joined) -> None:
        """Round ``r``'s rows stored, its total with what Locust counted; its failures and its line."""
        # Locust's master clears its stats when a round starts: what it holds now is this round's
        total = dataclasses.replace(
            stored[-1],
            locust_requests=self.master.env.stats.total.num_requests,
            detail=_note(stored[-1], self.master.late),
            **master_tags(getattr(self.master, "cpu_s", None)),
        )
        stored[-1] = total
        self.store.write("fleet", stored, _version(joined), f"r{r:06d}")
        for x in stored[:-1]:
            if x.outcome != "ok":
                self.out.fails.append(f"round {r}: node {x.node} {x.outcome}: {x.detail}")
        reported = sum(x.outcome == "ok" for x in stored[:-1])
        self.out.table.append((total, reported, len(stored) - 1))
        self.log(
            f"round {r}/{self.a.cycles}: {reported}/{len(stored) - 1} node(s) reported, "
            f"{total.requests or 0:,} requests, {total.throughput or 0:,.0f} infer/s, p99 "
            f"{f'{total.p99_us:,.0f} us' if total.p99_us else '-'}" + (f"; {total.detail}" if total.detail else "")
        )


def run(a, Master, log: Callable[[str], None]) -> Outcome:
    """Every round of the fleet (``a``: ``rig fleet``'s checked options), stored in ``a.results``.
    ``Master``: the Locust master runner with the rig's rounds on top (``rig.worker.load.master``, given
    by the entry point). Ctrl-C ends the rounds, those stored so far staying."""
    from rig.parent.orchestrator import new_run_id
    from rig.store import Store

    store = Store(a.results)
    master = Master(a, log)
    out = Outcome(new_run_id())
    log(
        f"fleet {out.fleet_id}: listening on {a.bind}:{a.port} for {a.nodes} node(s); {a.cycles} round(s) of "
        f"{a.workload_seconds:g} s, {a.users} user(s) at the peak"
    )
    rounds = _Rounds(a, master, store, out, log)
    try:
        for r in range(1, a.cycles + 1):
            if not rounds.play(r):
                break
    except KeyboardInterrupt:
        out.fails.append("interrupted; the rounds stored so far stay")
    finally:
        master.close()
    return out

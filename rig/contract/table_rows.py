"""The rows of the results tables beside the cycles' own: a fleet's rounds (``FleetRow``), the
memory samples (``MemoryRow``) and a bisection's steps (``BisectRow``). The cycles', runs' and
windows' rows: ``rig.contract.rows``.
"""

from __future__ import annotations

import dataclasses

from rig.contract.schema import SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class FleetRow:
    """One node's part in one round of a distributed run (``rig fleet``), or the round's total
    (``node`` = ``*``). ``run_id`` is the fleet's (the master's) run; ``node_run_id`` the node's."""

    run_id: str
    round: int
    node: str  # the node's name, or * for the round's total over its nodes
    outcome: str  # ok | lost (joined, never reported) | absent (expected, never joined) | refused
    started_at: str
    users: int | None  # the master's users at the round's peak (the total row)
    seconds: float | None
    node_run_id: str | None
    node_cycle: int | None
    requests: int | None
    errors: int | None
    throughput: float | None  # infer/s: the node's; the total row, the sum over the nodes that reported
    p50_us: float | None
    p99_us: float | None
    max_us: float | None
    histogram: str | None  # HDR, standard encoding, microseconds: the node's windows merged; the total, all nodes'
    locust_requests: int | None  # the total row: requests as Locust's master counted them from worker reports
    detail: str | None
    schema_version: int = SCHEMA_VERSION
    # the machine the row's process ran on: a node row's, as Locust's worker id names it; the total
    # row's, the master's (``rig fleet``'s own hostname). Null in older files.
    host: str | None = None
    # the total row: the master's (``rig fleet``'s process: Locust's master) CPU seconds over the
    # round's load, user and system, and the CPUs it could run on (its affinity, as ``0-3``); a
    # master on the nodes' host and CPUs takes that time from them. Null in node rows and older files.
    master_cpu_s: float | None = None
    master_cpus: str | None = None


@dataclasses.dataclass(frozen=True)
class MemoryRow:
    """One process's memory at one sample of a cycle's load (the table ``memory``): the worker
    (the core and the in-process API) and every backend stub, by model and instance."""

    run_id: str
    cycle: int
    sample: int  # 0, 1, ... in the order taken
    t_s: float  # since the load started
    requests: float | None  # requests completed by then (from the windows; None: unknown)
    process: str  # worker | stub
    model: str | None  # a stub's model (None: the worker)
    instance: str | None  # a stub's instance (numpy_0_0, ...)
    pid: int
    rss_bytes: int | None  # resident set size (/proc/PID/statm: no page walk, so free to sample)
    gpu_bytes: int | None  # the process's GPU memory (NVML), None without a GPU
    host: str | None = None
    schema_version: int = SCHEMA_VERSION


@dataclasses.dataclass(frozen=True)
class BisectRow:
    """One step of a bisection (``rig bisect``; the table ``bisect``): a release, a hybrid (the
    good release with one component taken from the bad, or two: a pair), a commit of that component,
    or a result. ``run_id`` is the bisection's id (a hash of what it bisects: it resumes under it).

    A bisection ends in one result row per commit it names: one (``cause`` ``one``); the commits a
    change needed together, one row each (``together``); or several changes in turn, one row each,
    ``effect`` saying what each did to the cell (``apart``; null in the others: what moved is in
    ``detail``). Every result row of a bisection is judged
    ``bad`` where each was decided, else ``mixed``; a bisection that named nothing has one result
    row (``mixed``, or ``refused`` where the window could not be bisected), ``detail`` saying why."""

    run_id: str
    step: int  # 0, 1, ... in the order run; the results' are the last
    kind: str  # release | component | pair | together | commit | result
    scenario: str
    control: bool
    shape: str | None
    engine: str
    good: str  # the release that gives the old verdict
    bad: str  # the release that gives the new one
    component: str | None  # core | common | backend | python_backend (a hybrid's, a commit's, a result's)
    commit: str | None  # the component's commit this step built (a result: the commit it names)
    subject: str | None  # that commit's subject line (its PR number is in it: "(#473)")
    runtime: str | None  # the runtime the step ran (built-2.67.0-v...)
    cycles: int
    # the signatures its cycles gave (rig.workflows.bisect_judge): the lifecycle verdict, the load
    # verdict where the two releases' differ, the readiness probed where the scenario probes:
    # "aborted_at_exit x3", "finalize_missing / server ready, model not ready x3"
    verdicts: str | None
    judged: str  # good | bad | other (neither side's) | mixed | failed (a build or run that failed) | refused
    cell_run_id: str | None  # the soak run that gave the verdicts
    detail: str | None
    started_at: str
    # the other components taken from the bad release (or the release the hybrids stand below) in this
    # step's build, each at that release's commit: "python_backend@<sha>, ..."; null: none
    held: str | None = None
    cause: str | None = None  # a result row: one | together | apart (above); null in other rows and older files
    effect: str | None = None  # an apart result row: what its commit did, "crashed / not_measured -> clean / ok"
    schema_version: int = SCHEMA_VERSION

"""Lifecycle scenarios: the known classes of Triton lifecycle bugs, each a model plus what the
client does, named after the upstream report, with the outcome it is known to give.

One vocabulary: a scenario is built from the rig's own building blocks, the template model's
fault presets (``--fault``, ``rig.parent.repository.FAULTS``) and the retention policies (``--retain``),
or from a model repository of its own (``models/scenarios/<name>/``, whose models read a
``fault`` parameter: ``on``, or ``off`` for the negative control); and, where the class lies in
what the client does, a client behaviour around ``stop()`` (``rig.worker.clients.clientside``) or a restart mode
(``--restart reload``). ``rig soak --scenario NAME`` runs one; ``--control`` runs its negative
control (the same model and client without the fault). A scenario made by its client alone also
runs over a model repository of the user's own (``--model-repository``): the same client around
their models, the same class of bug in another model's shape; so does one made by its client
around models of its own (``ready-stub-dead``, ``missing-model-py``, ``ensemble-in-flight``, ...):
the client acts on the user's models (a copy of them: ``missing-model-py`` takes a ``model.py`` away).
Every cycle records the scenario it ran under (``cycles.scenario``; a run given ``--fault`` or
``--retain`` alone is filed under the scenario built from exactly those).
"""

from __future__ import annotations

import dataclasses

from rig.common.errors import RigError
from rig.contract.spec import IN_FLIGHT, REFUSED


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    upstream: tuple[
        str, ...
    ]  # the reports it reproduces: "server#8755", "core#324", ... (none: a control of the rig's own)
    what: str  # what the model or the client does, in one line
    fault: str = "none"  # the template model's fault preset (rig.parent.repository.FAULTS)
    retain: str = "none"  # what the client keeps referenced across stop()
    repository: str | None = None  # a repository of its own: models/scenarios/<repository>/
    # The verdicts that show its class of bug (lifecycle, load), where it shows: what `rig scenarios`
    # lists. What it gives on each core, API and shape is data (rig.scenarios.known: rig/scenarios/known_verdicts.csv).
    expected: tuple[str, str] = ("clean", "ok")
    engines: tuple[str, ...] = ("capi", "tritonserver")  # the engines it runs through
    control: tuple[str, str] = ("clean", "ok")  # its negative control's
    growth: str = "ok"  # the growth verdict it gives (verdicts.GROWTH_OUTCOMES); its control's is ok
    # The model shapes it runs in (rig.scenarios.shapes), the first its default: those that can move its verdict.
    shapes: tuple[str, ...] = ("unbatched",)
    workload: bool = False  # needs load running (``--workload``) to show
    client: str = "none"  # what the client does around stop() (rig.worker.clients.clientside.CLIENTS)
    restart: str | None = None  # a restart mode of its own (reload)
    client_is_fault: bool = False  # the client is the fault: its control runs without it
    has_control: bool = True  # a negative control exists (memory measures, it has no fault to leave out)
    requests: int | None = None  # requests per cycle when no workload runs (default: the run's)
    in_flight: int = IN_FLIGHT  # stop-in-flight: requests outstanding at stop()
    # The phases ("start", "load") in which the faulted model only waits (an initialize that
    # sleeps, requests the model never answers): a matrix cell holds no quiet lock over them
    # (rig.worker.quiet), so that cells side by side overlap the waiting; its control holds it throughout.
    waits: tuple[str, ...] = ()
    # Where upstream fixed it: "core#473 in r26.04 (2.68.0)", one entry a fix; the table's
    # "changed in" is measured, this is what it is held up against.
    fixed_in: tuple[str, ...] = ()
    # What the core must be built with to load its models ("ensemble", "sequence_batching":
    # rig.scenarios.core_features); a core without it is a matrix row 'skipped' that says so.
    needs: tuple[str, ...] = ()
    # The parent SIGKILLs each cycle's worker (the server's process) in the middle of its load and
    # counts what the server left (rig.parent.orchestrator.reap); its control runs without the kill.
    kills_worker: bool = False
    # Each execute of the template model takes this long (``--execute-delay-ms``): a model as slow
    # as real ones, where the template's speed moves the verdict (``execute-raises-slow``).
    execute_delay_ms: float | None = None
    # The Locust users of the load it runs under (a matrix's: ``rig.workflows.matrix_setup.SCENARIO_LOAD_KEYS``,
    # 2 users, where None): where the load moves the verdict (``execute-raises-full``: enough users to fill
    # every batch, so that the dynamic batcher never waits its queue delay).
    users: int | None = None

    def expected_for(
        self, engine: str, version: str, shape: str | None = None, control: bool = False
    ) -> tuple[str, str] | None:
        """The verdicts known for this core, engine and shape (rig.scenarios.known; a shape it does not
        run in: the nearest it runs in, ``rig.scenarios.shapes.nearest``); None where none are."""
        from rig.scenarios import known
        from rig.scenarios.shapes import nearest

        k = known.lookup(self.name, control, nearest(shape or self.shapes[0], self.shapes), engine, version)
        return k.verdicts if k else None

    @property
    def template(self) -> bool:
        """Made from the template model (its fault preset), not from models of its own."""
        return self.repository is None

    @property
    def shared_control(self) -> bool:
        """Its negative control is the plain template model under the default client and load:
        the ``template`` scenario's cell, one a shape for every scenario so made (a matrix runs it
        once, not once a scenario)."""
        return (
            self.has_control
            and self.template
            and self.restart is None
            and not self.workload
            and self.requests is None
            and (self.client == "none" or self.client_is_fault)
            and self.name != TEMPLATE
        )


ALL_SHAPES = ("unbatched", "batched", "instances-2", "decoupled")
TEMPLATE = "template"  # the plain template: the shared negative control (Scenario.shared_control)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "retained-response",
            ("server#8755",),
            "the client keeps the last response object across stop()",
            retain="last-response",
            expected=("exit_timeout", "ok"),
            shapes=ALL_SHAPES,
        ),
        Scenario(
            "retained-array",
            ("server#8755",),
            "the client keeps a numpy array over the last response's output across stop()",
            retain="last-array",
            expected=("exit_timeout", "ok"),
            shapes=ALL_SHAPES,
        ),
        Scenario(
            "execute-raises",
            ("server#7481",),
            "the model raises in execute for every third request (shared memory counted before and after); "
            "batched-delayed: batched with the dynamic batcher's queue delay, which moves the race",
            fault="execute-raises",
            expected=("exit_timeout", "errors"),
            workload=True,
            shapes=(*ALL_SHAPES, "batched-delayed"),
        ),
        Scenario(
            "execute-raises-slow",
            ("server#7481",),
            "execute-raises with each execute taking 5 ms, as real models do: in a batched shape the "
            "requests fail and the stop is clean, where the template's sub-millisecond execute keeps the model "
            "loaded (the verdict moves with the model's speed)",
            fault="execute-raises",
            expected=("clean", "errors"),
            workload=True,
            execute_delay_ms=5.0,
            shapes=("batched", "unbatched", "instances-2"),
        ),
        Scenario(
            "execute-raises-full",
            ("server#7481",),
            "execute-raises under 8 users: batches of 4 to 8 (full through capi), so a batched model with a "
            "queue delay seldom waits it and loses the race as a batched model without one does (under 2 users "
            "batched-delayed stops clean on 2.51.0)",
            fault="execute-raises",
            expected=("exit_timeout", "errors"),
            workload=True,
            users=8,
            shapes=("batched-delayed",),
        ),
        Scenario(
            "stub-exits",
            ("server#8604", "server#7230"),
            "the model's stub calls os._exit on its third request",
            fault="stub-exits",
            expected=("exit_timeout", "errors"),
            waits=("load",),
            shapes=ALL_SHAPES,
        ),
        Scenario(
            "sender-kept",
            ("server#7626",),
            "a decoupled model keeps each request's response sender on self and never sends the final flag",
            repository="sender-kept",
            expected=("exit_timeout", "timeouts"),
            workload=True,
            waits=("load",),
            shapes=("decoupled", "decoupled,instances-2"),
        ),
        Scenario(
            "sender-after-return",
            ("python_backend QA: response sender after return",),
            "a non-decoupled model returns None from execute and closes the request from a thread "
            "with the final flag alone, no response",
            repository="sender-after-return",
            expected=("exit_timeout", "timeouts"),
            workload=True,
            waits=("load",),
            shapes=("unbatched", "instances-2"),
        ),
        Scenario(
            "stop-while-loading",
            ("core#324",),
            "stop() while a model's initialize is still running: the models unloaded, loaded again from a "
            "thread, stop() once a load is under way (the template's initialize sleeps 5 s past the exit timeout)",
            fault="load-slow",
            client="stop-while-loading",
            expected=("exit_timeout", "ok"),
            waits=("start",),
            shapes=("unbatched", "instances-2"),
        ),
        Scenario(
            "stop-in-flight",
            ("L0_lifecycle test_shutdown_dynamic",),
            f"stop() with {IN_FLIGHT} requests in flight and queued (125 ms each): every one answered or "
            "failed, none lost",
            fault="slow-execute",
            client="stop-in-flight",
            requests=10,
            shapes=ALL_SHAPES,
        ),
        Scenario(
            "bls-in-flight",
            ("python_backend#325",),
            "stop() with a request in flight to a BLS model whose request to a second model (1.5 s) is outstanding",
            repository="bls-in-flight",
            client="stop-in-flight",
            in_flight=1,
            requests=4,
            waits=("load",),
        ),
        Scenario(
            "refused-request",
            ("found here: a refused request is never deleted",),
            f"{REFUSED} requests per model with an input the model does not have, each refused at "
            "submission, then stop()",
            client="refused-request",
            client_is_fault=True,
            shapes=("unbatched", "batched"),
        ),
        Scenario(
            "metrics",
            ("server#8662", "server#8663"),
            "the model makes pb_utils.MetricFamily counters in initialize and increments them in execute",
            repository="metrics",
            expected=("aborted_at_exit", "ok"),
            shapes=("unbatched", "instances-2"),
        ),
        Scenario(
            "reload",
            ("server#6223",),
            "one server; the models unloaded and loaded again every cycle (--restart reload), the template "
            "writing 1 MiB to /dev/shm in each initialize (its control: no leak); RSS, fds, stubs and "
            "/dev/shm per reload",
            fault="leaks-per-load",
            restart="reload",
            shapes=("unbatched", "instances-2"),
        ),
        Scenario(
            "memory",
            ("server#8218",),
            "the worker's RSS and Python allocations (tracemalloc) sampled over 5,000 requests a cycle: "
            "growth per 1,000 requests",
            client="memory",
            has_control=False,
            requests=5000,
        ),
        Scenario(
            "finalize-raises",
            (),
            "the model's finalize raises",
            fault="finalize-raises",
            expected=("finalize_error", "ok"),
            shapes=("unbatched", "instances-2", "decoupled"),
        ),
        Scenario(
            "finalize-sleeps",
            (),
            "the model's finalize sleeps for an hour",
            fault="finalize-sleeps",
            expected=("exit_timeout", "ok"),
            shapes=("unbatched", "instances-2"),
        ),
        Scenario(
            "load-fails",
            (),
            "the model's initialize raises",
            fault="load-fails",
            expected=("load_failed", "not_measured"),
            shapes=("unbatched", "instances-2"),
        ),
        Scenario(
            "leaks-memory",
            ("server#8218",),
            "the model keeps 1 MiB more on every request (its stub's memory grows with the requests)",
            fault="leaks-memory",
            growth="leaking",
            shapes=("unbatched", "batched", "instances-2"),
        ),
        Scenario(
            "slows-down",
            (),
            "each execute of the model sleeps 100 us longer for every request it has taken (slower with "
            "every request, batched or not), 200 requests a cycle",
            fault="slows-down",
            requests=200,
            growth="slowing",
            shapes=("unbatched", "batched"),
        ),
        Scenario(
            "ensemble-in-flight",
            ("server#8458", "core#455", "server#8597", "core#482", "core#466", "core#470", "core#483"),
            f"stop() with {IN_FLIGHT} requests in flight to an ensemble (preprocess 20 ms, then two 300 ms "
            "steps side by side, one behind a queue of 2): they pile up in front of the slow steps, whose "
            "schedulers refuse them once stop() began while their other step still runs (its control: "
            "the steps fast, no request in flight at stop)",
            repository="ensemble-in-flight",
            client="stop-in-flight",
            client_is_fault=True,
            requests=4,
            waits=("load",),
            expected=("requests_lost", "ok"),
            needs=("ensemble",),
            fixed_in=(
                "core#483 in r26.05 (2.69.0): the request tracker's count when parallel steps fail",
                "core#466 in r26.03 (2.67.0), as core#470 in r26.02 (2.66.0)",
                "core#455 in r25.11 (2.63.0): ensemble max_inflight_requests, per request",
                "core#482 in r26.04 (2.68.0): max_inflight_requests shared by the ensemble's requests",
            ),
        ),
        Scenario(
            "worker-killed",
            ("python_backend#446",),
            "the parent SIGKILLs the worker (the server's process) 0.5 s into each cycle's load of 5,000 "
            "requests; the stubs and /dev/shm regions its server leaves are watched for 10 s, then cleaned "
            "up, each counted before and after (its control: the same cycle, no kill)",
            expected=("crashed", "not_measured"),
            requests=5000,
            kills_worker=True,
        ),
        Scenario(
            "ready-stub-dead",
            ("server#8604", "server#7230"),
            "once the load is over the client kills the model's stub (SIGKILL) and asks the server and the "
            "model for 2 s whether they are ready (ready after load: both still said so; its control: the "
            "stub left alive, asked the same)",
            repository="ready-stub-dead",
            client="stub-killed",
            expected=("finalize_missing", "ok"),
            shapes=("unbatched", "instances-2"),
            fixed_in=(
                "core#461 with python_backend#423 in r25.12 (2.64.0), as core#462: the model's readiness",
                "core#473 in r26.04 (2.68.0): the server's readiness",
            ),
        ),
        Scenario(
            "missing-model-py",
            ("server#8766",),
            "after the load the model is unloaded, its model.py taken away and the model loaded again "
            "(explicit model control, 20 s at most), unloaded if it did not load, then stop(): loading at "
            "stop, the load's and the unload's words in the detail (its control: model.py left)",
            repository="missing-model-py",
            client="load-missing",
        ),
        Scenario(
            "metrics-reload",
            ("server#8663",),
            "two instances make the same MetricFamily (a histogram and a counter, the same labels), released "
            "in finalize; after the load the model is reloaded in place (its files touched, loaded again) and, "
            "the old instances gone, sent 200 requests (its control: no metrics)",
            repository="metrics-reload",
            client="reload-in-place",
            expected=("crashed", "not_measured"),
            shapes=("instances-2",),
        ),
        Scenario(
            "shm-after-forced-stop",
            ("server#8881", "python_backend#450"),
            "the client keeps the last response across stop(), which waits out the exit timeout; the worker "
            "then exits at once (no release, no ServerDelete) and the parent counts the Python backend's "
            "/dev/shm regions left (shm left; its control: a clean stop, then the same exit)",
            retain="last-response",
            client="exit-after-stop",
            expected=("exit_timeout", "ok"),
            fixed_in=("python_backend#450 (merged 2026-07-18; in no release branch up to r26.07)",),
        ),
        Scenario(
            "sequence-at-stop",
            ("server#8449", "server#7117", "core#341"),
            "a stateful model under the sequence batcher (1 s idle timeout): 4 sequences opened, 2 left idle "
            "past the timeout (the reaper ends them, never telling the model), 2 still open at stop() (with "
            "--restart reload: at the unload); its control ends every sequence before the stop",
            repository="sequence-at-stop",
            client="sequence-at-stop",
            requests=4,
            needs=("sequence_batching",),
            fixed_in=(
                (
                    "core#341 (merged 2024-05-08) in r24.10 (2.51.0) and later: a cancelled request's slot was "
                    "released twice, again by the reaper (older branches are not in the sources read)"
                ),
            ),
        ),
        Scenario(
            "dlpack-versioned",
            ("found here: python_backend reads a DLPack 1.0 capsule as an unversioned one",),
            "the model returns its output through pb_utils.Tensor.from_dlpack in a DLPack 1.0 capsule "
            "(\"dltensor_versioned\", as numpy 2's __dlpack__(max_version=(1, 0)) and CuPy 14's toDlpack() give), "
            "which python_backend reads as an unversioned DLManagedTensor: where ASLR put the deleter decides "
            'whether the stub dies or from_dlpack raises (its control: an unversioned "dltensor" capsule)',
            repository="dlpack-versioned",
            expected=("exit_timeout", "errors"),
        ),
        Scenario(
            TEMPLATE,
            (),
            "the template model with no fault, no retention and no client: the negative control of "
            "every scenario made from it (the same model and client without the fault), run once a shape",
            has_control=False,
            shapes=ALL_SHAPES,
        ),
    )
}
# Fault presets and retention policies with no scenario of their own (a hang while loading takes
# the whole startup timeout: run it with --fault load-hangs when that is what you want).
UNNAMED = ("load-hangs",)


def get(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise RigError(
            f"unknown scenario {name!r}: choose one of {', '.join(SCENARIOS)} "
            "(`rig scenarios` lists them with what each does)"
        ) from None


def name_of(fault: str, retain: str, restart: str = "fresh-process", client: str = "none") -> str | None:
    """The scenario built from exactly this fault preset, retention policy, restart mode and
    client; ``baseline`` for none of them; None for a mix no scenario names (the row's
    ``retain`` and the run's config say it)."""
    mode = restart if restart == "reload" else None
    if fault == "none" and retain == "none" and client == "none":
        return "baseline"
    for s in SCENARIOS.values():
        if s.repository is None and (s.fault, s.retain, s.client, s.restart) == (fault, retain, client, mode):
            return s.name
    return None

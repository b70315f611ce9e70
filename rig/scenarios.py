"""Lifecycle scenarios: the known classes of Triton lifecycle bugs, each a model plus what the
client does, named after the upstream report, with the outcome it is known to give.

One vocabulary: a scenario is built from the rig's own building blocks, the template model's
fault presets (``--fault``, ``rig.repository.FAULTS``) and the retention policies (``--retain``),
or from a model repository of its own (``models/scenarios/<name>/``, whose models read a
``fault`` parameter: ``on``, or ``off`` for the negative control). ``rig soak --scenario NAME``
runs one; ``--control`` runs its negative control (the same model and client without the fault).
Every cycle records the scenario it ran under (``cycles.scenario``; a run given ``--fault`` or
``--retain`` alone is filed under the scenario built from exactly those).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from rig.errors import RigError


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    upstream: tuple[str, ...]     # the reports it reproduces: "server#8755", "core#324", ... (none: a control of the rig's own)
    what: str                     # what the model or the client does, in one line
    fault: str = "none"           # the template model's fault preset (rig.repository.FAULTS)
    retain: str = "none"          # what the client keeps referenced across stop()
    repository: str | None = None  # a repository of its own: models/scenarios/<repository>/
    # The verdicts it gives (lifecycle, load), measured here (docs/measurements/scenarios.md):
    # ``expected`` on every core and engine measured, unless ``known`` says otherwise for one:
    # (Triton version, engine or "*", verdicts).
    expected: tuple[str, str] = ("clean", "ok")
    known: tuple[tuple[str, str, tuple[str, str]], ...] = ()
    measured: tuple[str, ...] = ("2.51.0", "2.48.0")  # the cores its verdicts were measured on
    engines: tuple[str, ...] = ("capi", "tritonserver")  # and the engines
    control: tuple[str, str] = ("clean", "ok")  # its negative control's
    workload: bool = False        # needs load running (``--workload``) to show

    def expected_for(self, engine: str, version: str | None = None) -> tuple[str, str] | None:
        """The verdicts known for this core and engine; None where not measured (``version``
        None: those measured on most cores)."""
        for v, e, verdicts in self.known:
            if v == version and e in (engine, "*"):
                return verdicts
        if engine not in self.engines or (version is not None and version not in self.measured):
            return None
        return self.expected


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("retained-response", ("server#8755",),
             "the client keeps the last response object across stop()", retain="last-response",
             expected=("exit_timeout", "ok")),
    Scenario("retained-array", ("server#8755",),
             "the client keeps a numpy array over the last response's output across stop()",
             retain="last-array", expected=("exit_timeout", "ok")),
    Scenario("execute-raises", ("server#7481",),
             "the model raises in execute for every third request (shared memory counted before and after)",
             fault="execute-raises", expected=("exit_timeout", "errors"), workload=True,
             known=(("2.48.0", "*", ("clean", "errors")),)),
    Scenario("stub-exits", ("server#8604", "server#7230"),
             "the model's stub calls os._exit on its third request", fault="stub-exits",
             expected=("exit_timeout", "errors"), known=(("2.48.0", "*", ("exit_timeout", "timeouts")),)),
    Scenario("sender-kept", ("server#7626",),
             "a decoupled model keeps each request's response sender on self and never sends the final flag",
             repository="sender-kept", expected=("exit_timeout", "timeouts"), workload=True),
    Scenario("sender-after-return", ("python_backend QA: response sender after return",),
             "a non-decoupled model returns None from execute and closes the request from a thread "
             "with the final flag alone, no response", repository="sender-after-return",
             expected=("exit_timeout", "timeouts"), workload=True),
    Scenario("finalize-raises", (),
             "the model's finalize raises", fault="finalize-raises", expected=("finalize_error", "ok")),
    Scenario("finalize-sleeps", (),
             "the model's finalize sleeps for an hour", fault="finalize-sleeps",
             expected=("exit_timeout", "ok")),
    Scenario("load-fails", (),
             "the model's initialize raises", fault="load-fails", expected=("load_failed", "not_measured")),
    Scenario("leaks-memory", ("server#8218",),
             "the model keeps 1 MiB more on every request (the stubs' RSS grows with the requests)", fault="leaks-memory"),
)}
# Fault presets and retention policies with no scenario of their own (a hang while loading takes
# the whole startup timeout: run it with --fault load-hangs when that is what you want).
UNNAMED = ("load-hangs",)


def get(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise RigError(f"unknown scenario {name!r}: choose one of {', '.join(SCENARIOS)} "
                       "(`rig scenarios` lists them with what each does)") from None


def name_of(fault: str, retain: str) -> str | None:
    """The scenario built from exactly this fault preset and retention policy; ``baseline`` for
    neither; None for a mix no scenario names (the row's ``retain`` and the run's config say it)."""
    if fault == "none" and retain == "none":
        return "baseline"
    for s in SCENARIOS.values():
        if s.repository is None and (s.fault, s.retain) == (fault, retain):
            return s.name
    return None


def apply(cfg) -> None:
    """Make ``cfg`` (a ``RunConfig``) run its scenario: the fault and retention it is built from,
    none of them for its control. A fault, retention or model repository of the user's own cannot
    combine with a scenario (its own would be lost): refused in one line."""
    s = get(cfg.scenario)
    want_fault = "none" if cfg.control else s.fault
    want_retain = "none" if cfg.control else s.retain
    clashes = [f"--{k.replace('_', '-')} {v}" for k, v, mine in (("fault", cfg.fault, want_fault),
                                                                 ("retain", cfg.retain, want_retain))
               if v not in ("none", mine)]
    if cfg.model_repository and (s.repository is None or Path(cfg.model_repository) != repository_of(s)):
        clashes.append("--model-repository")
    if clashes:
        raise RigError(f"{', '.join(clashes)} cannot combine with --scenario {s.name}, which sets "
                       f"{'its own models' if s.repository else 'the fault and retention'}: drop them")
    cfg.fault, cfg.retain = want_fault, want_retain
    if s.repository is not None:
        cfg.model_repository = str(repository_of(s))


def repository_of(s: Scenario) -> Path:
    from rig.repository import templates_dir

    return templates_dir() / "scenarios" / str(s.repository)


def materialize(source: Path, dest: Path, control: bool) -> Path:
    """A scenario's repository copied to ``dest`` with every model's ``fault`` parameter set to
    ``off`` (its negative control) or left ``on``."""
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    value = "off" if control else "on"
    for cfg in dest.glob("*/config.pbtxt"):
        text = cfg.read_text()
        new = re.sub(r'(key:\s*"fault"\s*,?\s*value:\s*\{\s*string_value:\s*)"\w+"', rf'\1"{value}"', text)
        cfg.write_text(new)
    return dest

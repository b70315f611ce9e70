"""`rig repro --scenario NAME [--control] [--shape S] --runtime VERSION --out DIR`: a folder that
reproduces one conformance cell by itself, ready to file upstream.

It holds the model repository the rig serves for the cell (``models/``: the template rendered for
the scenario's fault and shape, its ``model.py`` with a few lines appended that record each
``initialize`` and ``finalize``), ``repro.py`` (``rig.commands.repro_script`` with the cell written
into it: the standard library, numpy and ctypes over ``libtritonserver.so``, no rig), ``run.sh``
(the environment of the runtime it was made for, then ``python repro.py``) and ``README.md``, a
bug report whose observed output is that of a run made here, once, with nothing of the rig on the
path. It covers the scenarios made of the template model and retention alone (``COVERED``); the
others need the rig's client or models of their own.
"""

from __future__ import annotations

import json
import os
import platform
import pprint
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from rig.common.errors import Exit, RigError

ALIASES = {"baseline": "template"}  # the plain template, as `name_of` files a cycle with no scenario
ENGINE = "capi"  # the verdicts a repro is held to: the rig's C API engine's, which the script follows
LOAD_USERS = 2  # a workload scenario's load (rig matrix's SCENARIO_LOAD_KEYS): 2 users for 2 s
LOAD_SECONDS = 2.0
REQUEST_TIMEOUT_S = 5.0  # rig matrix's SCENARIO_REQUEST_TIMEOUT
SCRIPT = Path(__file__).with_name("repro_script.py")
CELL_LINE = "CELL: dict[str, Any] = {}\n"

# Appended to each model's model.py: the model records its own initialize and finalize (one JSON
# line in $REPRO_EVIDENCE each), so the script needs no hook of the rig's to tell when they ran.
EVIDENCE_BLOCK = """

# ---- added by `rig repro` (triton-soak-rig): finalize evidence, nothing else changed above ----
# Each initialize and finalize of an instance appends one JSON line (phase, pid, instance,
# CLOCK_MONOTONIC time, wall time, the error finalize raised) to the file $REPRO_EVIDENCE names.
def _repro_mark(phase, instance, error=None):
    import json as _json
    import os as _os
    import time as _time

    path = _os.environ.get("REPRO_EVIDENCE")
    if path:
        line = {"phase": phase, "pid": _os.getpid(), "instance": instance, "t_mono": _time.monotonic(),
                "t_wall": _time.time(), "error": error}
        with open(path, "a") as f:
            f.write(_json.dumps(line) + "\\n")


_repro_initialize, _repro_finalize = TritonPythonModel.initialize, TritonPythonModel.finalize


def _repro_initialize_marked(self, args):
    self._repro_instance = str(args.get("model_instance_name", "?"))
    _repro_initialize(self, args)
    _repro_mark("init", self._repro_instance)


def _repro_finalize_marked(self):
    instance = getattr(self, "_repro_instance", "?")
    _repro_mark("finalize_start", instance)
    try:
        _repro_finalize(self)
    except BaseException as e:
        _repro_mark("finalize_end", instance, f"{type(e).__name__}: {e}")
        raise
    _repro_mark("finalize_end", instance)


TritonPythonModel.initialize = _repro_initialize_marked
TritonPythonModel.finalize = _repro_finalize_marked
"""


def add_parser(sub, parser_class) -> None:
    p = sub.add_parser(
        "repro",
        help="write a standalone reproducer of a scenario on one core (models, a ctypes script, run.sh, a report)",
        description="Write a folder that reproduces one conformance cell (a scenario, its control or not, a "
        "model shape, a runtime) with Triton's C API alone: models/, repro.py (standard library, numpy and "
        "ctypes; no rig), run.sh and README.md (an upstream bug report whose observed output is a run made "
        "here). Covers the scenarios made of the template model and retention alone: "
        + ", ".join(covered_names())
        + ".",
    )
    p.add_argument("--scenario", required=True, help="the scenario (`rig scenarios` lists them)")
    p.add_argument("--control", action="store_true", help="its negative control: the same without the fault")
    p.add_argument("--shape", help="a model shape the scenario runs in (default its first)")
    p.add_argument("--runtime", required=True, help="a runtime: 2.51.0 (the embedded wheel's), 0.7.0, 2.67.0, ...")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (new or empty)")
    p.add_argument(
        "--exit-timeout",
        type=int,
        default=None,
        help="the server's exit timeout in seconds (default 5, as rig matrix runs scenarios)",
    )
    p.set_defaults(func=run)


# ---------------------------------------------------------------- what it covers


def covers(s) -> bool:
    """Whether ``rig repro`` covers scenario ``s``: the template model and retention alone (no
    models of its own, no client around stop(), no restart mode, no killed worker), judged by its
    lifecycle and load verdicts (not growth, which the script does not measure)."""
    return (
        s.repository is None
        and s.client == "none"
        and s.restart is None
        and not s.kills_worker
        and s.growth == "ok"
        and not s.needs
    )


def covered_names() -> list[str]:
    from rig.scenarios.catalog import SCENARIOS

    return [name for name, s in SCENARIOS.items() if covers(s)] + list(ALIASES)


def scenario_of(name: str):
    """The scenario ``name`` names (``baseline``: the plain template), or one line: unknown, or not covered."""
    from rig.scenarios import catalog

    s = catalog.get(ALIASES.get(name, name))
    if not covers(s):
        raise RigError(
            f"rig repro covers the scenarios made of the template model and retention alone "
            f"({', '.join(covered_names())}); {name} needs the rig's own client, models or measures: "
            f"run it with rig soak --scenario {name}"
        )
    return s


# ---------------------------------------------------------------- the runtime


def runtime_of(spec: str, log=print):
    """The runtime ``spec`` names (``rig.parent.runtime.resolve``, installing nothing). A Triton version
    that no source build here has, but an installed wheel bundles (2.51.0: nvidia-pytriton 0.7.0),
    names that wheel's core."""
    from rig.parent import runtime

    try:
        rt = runtime.resolve(spec, auto_install=False, log=log)
    except RigError:
        wheels = [r for r in runtime.list_embedded() if r["triton_version"] == spec]
        if not wheels:
            raise
        wheels.sort(key=lambda r: (r["package_version"] != runtime.DEFAULT_EMBEDDED, r["package_version"]))
        chosen = wheels[0]["package_version"]
        log(f"Triton {spec}: no source build of it here; the core of nvidia-pytriton {chosen} (embedded-{chosen})")
        rt = runtime.resolve(chosen, auto_install=False, log=log)
    if rt.kind in ("embedded", "built"):
        problem = runtime.libpython_problem()
        if problem:
            raise RigError(problem)
    return rt


def runtime_words(rt, manifest: dict) -> str:
    """How the report names the core: the wheel it came in, or the source build (branch, commits)."""
    if rt.kind == "embedded":
        pkg = manifest.get("package_version") or rt.name.removeprefix("embedded-")
        wheel = f" ({manifest['wheel']})" if manifest.get("wheel") else ""
        return f"the core embedded in the PyPI wheel nvidia-pytriton {pkg}{wheel}"
    if rt.kind == "built":
        commits = manifest.get("commits") or {}
        refs = manifest.get("refs") or {}
        parts = [
            f"{c} {refs.get(c, '?')}@{str(commits[c])[:12]}"
            for c in ("core", "common", "backend", "python_backend")
            if c in commits
        ]
        branch = manifest.get("branch") or "?"
        return (
            f"built from source for CPU (branch {branch}: {', '.join(parts) or 'commits not recorded'}; "
            f"{manifest.get('compiler') or 'compiler not recorded'})"
        )
    return f"the container's install ({rt.server_dir})"


def manifest_of(rt) -> dict:
    path = Path(rt.server_dir).parent / "runtime.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


# ---------------------------------------------------------------- the cell


def cell_config(s, control: bool, shape: str | None, exit_timeout: int, runtime: str):
    """The run config the rig gives this cell (``rig.scenarios.catalog.apply`` through ``validate``)."""
    from rig.parent import config

    try:
        return config.load(
            None,
            {
                "scenario": s.name,
                "control": control or None,
                "model_shape": shape,
                "exit_timeout": exit_timeout,
                "request_timeout": REQUEST_TIMEOUT_S,
                "runtime": runtime,
            },
        )
    except RigError as e:  # the config's words for the options, this command's for its own
        raise RigError(str(e).replace("--model-shape", "--shape")) from None


def model_spec(cfg):
    """The template model the rig renders for ``cfg`` (``rig.parent.orchestrator.prepare``'s)."""
    from rig.parent.orchestrator.prepare import template_spec

    return template_spec(cfg)


def write_models(cfg, dest: Path) -> list[str]:
    """``dest/<model>/`` as the rig serves it for ``cfg``, each ``model.py`` with ``EVIDENCE_BLOCK`` appended."""
    from rig.parent import repository

    spec = model_spec(cfg)
    mdir = repository.render(spec, dest)
    py = mdir / "1" / "model.py"
    py.write_text(py.read_text().rstrip("\n") + "\n" + EVIDENCE_BLOCK)
    return [spec.model_name]


def expected_of(s, control: bool, shape: str, version: str) -> dict:
    """The verdicts the cell is held to: the rig's known ones for the C API on this core, else the
    control's contract, else the scenario's own."""
    from rig.scenarios import known

    k = known.expected(s, control, shape, ENGINE, version)
    if k is not None and k.run_id != "contract":
        return {
            "lifecycle": k.lifecycle,
            "load": k.load,
            "source": f"the rig's known verdicts for the C API on Triton {version}, {shape} (run {k.run_id})",
        }
    if k is not None:
        return {"lifecycle": k.lifecycle, "load": k.load, "source": "a negative control's contract"}
    lifecycle, load = s.expected
    return {
        "lifecycle": lifecycle,
        "load": load,
        "source": f"the scenario's expected verdicts (none known yet for Triton {version})",
    }


def cell_of(s, cfg, rt, control: bool, models: list[str]) -> dict[str, Any]:
    """What ``repro.py`` needs to know of the cell (``CELL``): plain values only."""
    from rig.contract.verdicts import LOAD_OUTCOMES, OUTCOMES

    shape = str(cfg.model_shape)
    title = f"{s.name}{' (negative control)' if control else ''}, {shape}, Triton {rt.triton_version}"
    workload = None
    if s.workload:
        workload = {"users": s.users or LOAD_USERS, "seconds": LOAD_SECONDS}
    what = s.what if not control else "the template model with no fault, nothing kept across stop()"
    return {
        "title": title,
        "scenario": s.name,
        "control": control,
        "shape": shape,
        "what": what,
        "upstream": list(s.upstream),
        "runtime": rt.name,
        "triton_version": rt.triton_version,
        "models": models,
        "template": True,
        "size": cfg.model_size,
        "fault": cfg.fault,
        "retain": cfg.retain,
        "requests": cfg.requests,
        "in_flight": cfg.requests_in_flight,
        "workload": workload,
        "request_timeout": cfg.request_timeout,
        "exit_timeout": cfg.exit_timeout,
        "expected": expected_of(s, control, shape, rt.triton_version),
        "meanings": {**OUTCOMES, **{k: v for k, v in LOAD_OUTCOMES.items() if k not in OUTCOMES}},
    }


def script_text(cell: dict[str, Any]) -> str:
    """``repro_script.py`` with ``cell`` written into ``CELL``."""
    text = SCRIPT.read_text()
    if CELL_LINE not in text:
        raise RigError(f"{SCRIPT} has no line {CELL_LINE.strip()!r} to write the cell into; reinstall the rig")
    literal = pprint.pformat(cell, width=110, sort_dicts=False)
    return text.replace(CELL_LINE, f"CELL: dict[str, Any] = {literal}\n", 1)


# ---------------------------------------------------------------- run.sh


def run_sh(rt, python: str) -> str:
    """``run.sh``: the environment the runtime needs (``Runtime.worker_env``'s, without the rig),
    then ``python repro.py``; arguments go to the script (``./run.sh --triton /opt/tritonserver``)."""
    from rig.contract.runtime import stub_site_of

    libs = ":".join(rt.library_path)
    stub_site = stub_site_of(rt)
    lines = [
        "#!/bin/sh",
        f"# Runs repro.py against the Triton it was made for: Triton {rt.triton_version} ({rt.name} of",
        "# triton-soak-rig). Arguments go to repro.py: ./run.sh --exit-timeout 10, ./run.sh --triton DIR.",
        "set -e",
        'here=$(cd "$(dirname "$0")" && pwd)',
        "# The Triton install, in perf_analyzer's layout: lib/libtritonserver.so and backends/python/.",
        f"TRITON_HOME={shlex.quote(rt.server_dir)}",
        (
            f"# A Python {sys.version_info.major}.{sys.version_info.minor} with numpy (the backend stub is built "
            "for this version); PYTHON=... overrides it."
        ),
        f'PYTHON="${{PYTHON:-{sys.executable}}}"',
        "# The loader reads LD_LIBRARY_PATH only at exec: the core's libraries and libpython for the stubs.",
        f'LD_LIBRARY_PATH={shlex.quote(libs)}"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"',
    ]
    if stub_site:
        lines += [
            "# This core's stubs are built against numpy 1 (with numpy 2 their outputs come back empty):",
            "# a folder with numpy<2 that repro.py puts on the stubs' path (pip install --target DIR 'numpy<2').",
            f"REPRO_STUB_SITE={shlex.quote(stub_site)}",
            "export REPRO_STUB_SITE",
        ]
    else:
        lines += ["# The stubs import the numpy of $PYTHON.", "unset REPRO_STUB_SITE"]
    lines += [
        "export TRITON_HOME LD_LIBRARY_PATH",
        "unset PYTHONPATH PYTHONHOME",
        'exec "$PYTHON" "$here/repro.py" "$@"',
        "",
    ]
    return "\n".join(lines)


def by_hand(rt, python: str) -> str:
    """The command ``run.sh`` amounts to, for the report."""
    from rig.contract.runtime import stub_site_of

    env = [f"LD_LIBRARY_PATH={shlex.quote(':'.join(rt.library_path))}"]
    if stub_site_of(rt):
        env.append(f"REPRO_STUB_SITE={shlex.quote(str(stub_site_of(rt)))}")
    return " \\\n  ".join([*env, f"{shlex.quote(python)} repro.py --triton {shlex.quote(rt.server_dir)}"])


# ---------------------------------------------------------------- the run and the report


def run_once(out: Path, timeout_s: float, log=print) -> tuple[int, str, dict]:
    """``run.sh`` run once in ``out`` with a bare environment (PATH and HOME alone: nothing of the
    rig on the path); (exit status, output, the script's result.json)."""
    work = Path(tempfile.mkdtemp(prefix="rig-repro-"))
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    lines: list[str] = []
    try:
        proc = subprocess.Popen(
            ["/bin/sh", str(out / "run.sh"), "--work", str(work)],
            cwd=out,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                log(f"  | {line.rstrip()}")
            rc = proc.wait()
        finally:
            timer.cancel()
        if killed.is_set():
            lines.append(f"(killed after {timeout_s:.0f} s)")
        elif rc < 0:
            lines.append(f"(repro.py died of signal {-rc})")
        try:
            result = json.loads((work / "result.json").read_text())
        except (OSError, ValueError):
            result = {}
        return rc, "\n".join(lines), result
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for cache in out.rglob("__pycache__"):  # the stubs compiled model.py: not part of the folder
            shutil.rmtree(cache, ignore_errors=True)


_SAYS = {
    "exit_timeout": "TRITONSERVER_ServerStop waits out exit_timeout",
    "finalize_missing": "TRITONSERVER_ServerStop returns but finalize() has not run",
    "finalize_error": "the model's finalize() raises",
    "load_failed": "the server or the model does not become ready",
    "stop_error": "TRITONSERVER_ServerStop returns an error",
    "clean": "stop returns promptly, every finalize() before it",
}


def title_of(cell: dict, result: dict) -> str:
    verdict = result.get("lifecycle")
    said = _SAYS.get(str(verdict), f"the run gave {verdict or 'no verdict'}")
    fin = result.get("finalize") or {}
    if verdict == "exit_timeout" and fin.get("expected"):
        said += ", finalize() runs only after it returns" if not fin.get("never") else ", finalize() never runs"
    prefix = f"Negative control of {cell['scenario']}" if cell["control"] else "Python backend"
    return f"{prefix}: {cell['what']}: {said} (Triton {result.get('triton_version') or cell['triton_version']}, C API)"


def upstream_links(refs: list[str]) -> list[str]:
    out = []
    for ref in refs:
        m = re.fullmatch(r"(server|core|python_backend|common|backend)#(\d+)", ref)
        if m:
            out.append(f"[{ref}](https://github.com/triton-inference-server/{m.group(1)}/issues/{m.group(2)})")
        else:
            out.append(ref)
    return out


def readme(cell: dict, rt, manifest: dict, rc: int, output: str, result: dict, models: Path) -> str:

    from rig.common.version import __version__

    version = result.get("triton_version") or cell["triton_version"]
    fin = result.get("finalize") or {}
    stop = result.get("stop_seconds")
    exp = cell["expected"]
    shape_words = f"shape `{cell['shape']}`"
    lines = [
        f"# {title_of(cell, result)}",
        "",
        (
            f"**Cell**: `{cell['scenario']}`{' (its negative control)' if cell['control'] else ''}, {shape_words}: "
            f"{cell['what']}."
        ),
        "",
        f"- **Triton**: {version} (the server's metadata), {runtime_words(rt, manifest)}",
        "- **API**: in-process, the C API (`tritonserver.h`) through ctypes; no HTTP or gRPC",
        f"- **Backend**: Python (`{'`, `'.join(cell['models'])}` in `models/`)",
        f"- **Upstream**: {', '.join(upstream_links(cell['upstream'])) or 'none (a check of the rig’s own)'}",
        f"- **Observed here**: `{result.get('lifecycle', '?')}`"
        + (
            f", `TRITONSERVER_ServerStop` took {stop:.2f} s with exit_timeout {result.get('exit_timeout')} s"
            if stop
            else ""
        )
        + (
            f"; finalize: {fin.get('before', 0)} of {fin.get('expected', 0)} before stop returned, "
            f"{fin.get('after', 0)} after, {fin.get('never', 0)} never"
            if fin
            else ""
        ),
        (
            f"- **Made by**: triton-soak-rig {__version__}, `rig repro --scenario {cell['scenario']}"
            f"{' --control' if cell['control'] else ''} --shape {cell['shape']} --runtime {rt.name} "
            f"--exit-timeout {cell['exit_timeout']}`"
        ),
        "",
    ]
    lines += _environment(rt, manifest)
    lines += [
        "",
        "## Steps to reproduce",
        "",
        "```sh",
        "./run.sh",
        "```",
        "",
        "which sets the environment above and runs:",
        "",
        "```sh",
        by_hand(rt, sys.executable),
        "```",
        "",
        (
            f"Another Triton install in the same layout: `./run.sh --triton DIR` (a Python {sys.version_info.major}."
            f"{sys.version_info.minor} stub in `DIR/backends/python/`). `repro.py` imports the standard library, numpy "
            "and ctypes only. It:"
        ),
        "",
        (
            f"1. starts a server over `models/` (`TRITONSERVER_ServerNew`: model control mode NONE, so every model "
            f"loads at start; strict model config and readiness; exit timeout {cell['exit_timeout']} s; the backend "
            "directory `backends/` of the install) and waits until the server and the model say ready;"
        ),
    ]
    lines += _steps(cell)
    lines += [
        "",
        "## Observed",
        "",
        f"`./run.sh` here (exit status {rc}):",
        "",
        "```text",
        output.rstrip() or "(no output)",
        "```",
        "",
        "## Expected",
        "",
        "`TRITONSERVER_ServerStop` returns promptly (well within the exit timeout) and every model instance's "
        "`finalize()` has run before it returns (the verdict `clean`)"
        + (
            ": what a client holds (a response object, or an array over an output it has not released) "
            "should not keep the model loaded past the stop, or the stop should say why"
            if cell["retain"] != "none"
            else ""
        )
        + ".",
        "",
        (
            f"The rig's word for this cell, what `repro.py` holds the run to: `{exp['lifecycle']}`, load "
            f"`{exp['load']}` ({exp['source']})."
        ),
        "",
        "## The model",
        "",
        (
            "The rig's template model (`models/<name>/1/model.py`, unchanged but for the evidence lines at its end), "
            "served with this configuration:"
        ),
        "",
    ]
    lines += _model_and_words(cell, models)
    return "\n".join(lines) + "\n"


def _environment(rt, manifest: dict) -> list[str]:
    """The README's environment: the machine, the Pythons, the Triton install (and how a built one
    differs from the NGC image)."""
    import numpy

    lines = [
        "## Environment",
        "",
        (
            f"- {platform.system()} {platform.release()} ({platform.machine()}), {os.cpu_count()} CPUs, "
            f"glibc {platform.libc_ver()[1] or '?'}"
        ),
        f"- Python {platform.python_version()} ({sys.executable}), numpy {numpy.__version__} in the client"
        + (
            f"; the backend stubs take numpy from `{rt.stub_site}` (numpy<2: this core's stubs are built "
            "against numpy 1)"
            if getattr(rt, "stub_site", None)
            else "; the backend stubs import the same numpy"
        ),
        f"- The Triton install: `{rt.server_dir}` (`lib/libtritonserver.so`, `backends/python/`)",
        f"- `LD_LIBRARY_PATH`: `{':'.join(rt.library_path)}` (the core's libraries; libpython for the stubs)",
    ]
    if rt.kind == "built" and manifest.get("differs_from_ngc"):
        lines += ["", "<details><summary>How this build differs from the NGC image</summary>", ""]
        lines += [f"- {d}" for d in manifest["differs_from_ngc"]]
        lines += ["", "</details>"]
    return lines


def _steps(cell: dict) -> list[str]:
    """Steps 2 to 6 of what ``repro.py`` does, in the README's words."""
    lines: list[str] = []
    if cell.get("workload"):
        w = cell["workload"]
        lines.append(
            f"2. sends requests from {w['users']} clients in a closed loop for {w['seconds']:g} s "
            "(`TRITONSERVER_ServerInferAsync`, each response deleted once read);"
        )
    else:
        at = f", {cell['in_flight']} at a time" if cell["in_flight"] > 1 else ", one at a time"
        lines.append(
            f"2. sends {cell['requests']} requests{at} (`TRITONSERVER_ServerInferAsync`; every response but the "
            "last deleted with `TRITONSERVER_InferenceResponseDelete` once read);"
        )
    kept = {
        "last-response": "keeps the last response object: it is not deleted until after the stop",
        "last-array": "keeps a numpy array over the last response's output buffer (zero copy): the response is "
        "deleted only when the array goes, after the stop",
    }.get(cell["retain"], "keeps nothing: the last response is deleted too")
    lines += [
        f"3. {kept};",
        "4. calls `TRITONSERVER_ServerStop` and times it;",
        "5. lets go of what it kept, waits for the finalizes, then calls `TRITONSERVER_ServerDelete`;",
        (
            "6. reads when each instance's `finalize()` ended (each model records its own `initialize` and "
            "`finalize` in a file: the lines appended to its `model.py`), prints the report and exits 0 where "
            "the expected verdict was reproduced, 1 where not."
        ),
    ]
    return lines


def _model_and_words(cell: dict, models: Path) -> list[str]:
    """The models' configs as served, and the verdicts' words."""
    lines: list[str] = []
    for cfg in sorted(models.glob("*/config.pbtxt")):
        lines += [f"`{cfg.relative_to(models.parent)}`:", "", "```text", cfg.read_text().strip(), "```", ""]
    lines += [
        "## Verdicts",
        "",
        "The rig's vocabulary, as `repro.py` prints it:",
        "",
    ]
    lines += [f"- `{k}`: {cell['meanings'][k]}" for k in _SAYS if k in cell["meanings"]]
    return lines


def run(args) -> int:
    s = scenario_of(args.scenario)
    out = Path(args.out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RigError(f"--out {out} exists and is not an empty folder: give a new one")
    exit_timeout = args.exit_timeout
    if exit_timeout is None:
        from rig.commands.matrix import SCENARIO_EXIT_TIMEOUT

        exit_timeout = SCENARIO_EXIT_TIMEOUT
    if exit_timeout < 0:
        raise RigError("--exit-timeout must be >= 0")
    cfg = cell_config(s, args.control, args.shape, exit_timeout, args.runtime)  # bad input first: one line
    rt = runtime_of(args.runtime, log=lambda m: print(m, flush=True))
    out.mkdir(parents=True, exist_ok=True)
    models = write_models(cfg, out / "models")
    cell = cell_of(s, cfg, rt, args.control, models)
    (out / "repro.py").write_text(script_text(cell))
    sh = out / "run.sh"
    sh.write_text(run_sh(rt, sys.executable))
    sh.chmod(sh.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    print(f"running {out}/run.sh once (with PATH and HOME alone) ...", flush=True)
    w = cell.get("workload") or {}
    limit = 120 + float(w.get("seconds", 0)) + 3 * exit_timeout + 2 * cfg.request_timeout + 120
    rc, output, result = run_once(out, limit, log=lambda m: print(m, flush=True))
    manifest = manifest_of(rt)
    (out / "README.md").write_text(readme(cell, rt, manifest, rc, output, result, out / "models"))
    print(
        f"wrote {out}: README.md, run.sh, repro.py, models/ ({', '.join(models)}); "
        f"observed {result.get('lifecycle', 'nothing')} (expected {cell['expected']['lifecycle']})"
    )
    if rc != 0:
        print(f"FAIL: the run did not reproduce the expected verdict (repro.py exit status {rc}): see {out}/README.md")
        return Exit.FAILED
    return Exit.OK

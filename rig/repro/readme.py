"""What a ``rig repro`` folder says: ``run.sh`` (the runtime's install, the Python and the stubs'
numpy, each from an environment variable whose default is what the folder was made with) and
``README.md``, an upstream bug report whose observed output is a run made here, its paths of this
machine written as the variables that name them."""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

_SAYS = {
    "exit_timeout": "TRITONSERVER_ServerStop waits out exit_timeout",
    "finalize_missing": "TRITONSERVER_ServerStop returns but finalize() has not run",
    "finalize_error": "the model's finalize() raises",
    "load_failed": "the server or the model does not become ready",
    "stop_error": "TRITONSERVER_ServerStop returns an error",
    "requests_lost": "requests in flight at TRITONSERVER_ServerStop get neither an answer nor an error",
    "stub_crashed": "a backend stub dies of a signal",
    "aborted_at_exit": "a backend stub dies of a signal as it exits, after a clean stop",
    "clean": "stop returns promptly, every finalize() before it",
}


# What the report of a scenario found here says beyond the rig's words, for the cell itself (its
# control's report has none of it): its title, where upstream's code goes wrong (the lines read, in
# the source branches named), and what should happen instead.
_FOUND_HERE: dict[str, dict[str, object]] = {
    "dlpack-versioned": {
        "title": (
            'pb_utils.Tensor.from_dlpack reads a DLPack 1.0 capsule ("dltensor_versioned") as an unversioned '
            "DLManagedTensor, and no output comes back"
        ),
        "cause": [
            "`pb_utils.Tensor.from_dlpack(name, capsule)` hands the capsule to `PbTensor::FromDLPackCapsule`",
            "(`src/pb_tensor.cc`; the same in python_backend's branches r24.10 to r26.07 and on main), which",
            "casts its pointer without looking at the capsule's name:",
            "",
            "```cpp",
            "DLManagedTensor* dl_managed_tensor =",
            "    static_cast<DLManagedTensor*>(dlpack_tensor.get_pointer());",
            "```",
            "",
            "A capsule named `dltensor_versioned` (DLPack 1.0: numpy 2's `__dlpack__(max_version=(1, 0))`,",
            "CuPy 14's `toDlpack()`, the model here) holds a `DLManagedTensorVersioned`, whose `DLTensor` begins",
            "32 bytes in, after `version`, `manager_ctx`, `deleter` and `flags`. Read as a `DLManagedTensor`, its",
            "`ndim` is the low half of the producer's deleter address and its `shape` the flags (0: NULL), and",
            "`std::vector<int64_t> dims(shape, shape + ndim)`:",
            "",
            "- where that half is a positive int32, copies `ndim` values from NULL: the stub dies of SIGSEGV; from",
            '  2.51.0 on the requests fail ("Stub process ... is not healthy"; from 2.47.0 to 2.50.0 they go',
            "  unanswered), the model stays loaded, `TRITONSERVER_ServerStop` waits out the exit timeout,",
            "  `finalize()` never runs and the stub's region is left in `/dev/shm` (before 2.47.0 the backend",
            "  restarts the stub, which draws again);",
            "- where it is negative, throws `std::length_error`, which reaches the model as `ValueError: cannot",
            "  create std::vector larger than max_size()`: every request fails, the stub lives.",
            "",
            "Which one, ASLR decides, once per stub process: the model prints its deleter's address and that",
            "half at `initialize` (the output above), and every producer's deleter lies somewhere else in each",
            "process. An object passed instead of a capsule (`from_dlpack(name, array)`) goes through",
            "`__dlpack__(stream=...)`, which asks for no `max_version`; a capsule is taken as it comes.",
            "The negative control (`rig repro --scenario dlpack-versioned --control`) returns the same array in",
            "an unversioned `dltensor` capsule: clean.",
        ],
        "expected": (
            "`from_dlpack` reads a `dltensor_versioned` capsule as the `DLManagedTensorVersioned` it holds (checking "
            "`version.major`), or refuses it with an error that names it, before it reads a field; the response "
            "carries the output, the stub lives, and `TRITONSERVER_ServerStop` returns promptly with every "
            "`finalize()` run before it returns (the verdict `clean`, load `ok`, as the control's unversioned "
            "capsule gives)"
        ),
    },
}


def home_relative(path: str) -> str:
    """``path`` under ``$HOME`` written from it (``$HOME/.cache/...``): the default holds on another machine's home."""
    home = os.environ.get("HOME")
    if home and home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "$HOME" + path[len(home.rstrip("/")) :]
    return path


def _default(path: str) -> str:
    """A default for run.sh: double-quoted, ``$HOME`` left to the shell."""
    text = home_relative(path)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'


def run_sh(rt, python: str) -> str:
    """``run.sh``: ``TRITON_HOME``, ``PYTHON`` and (a core whose stubs take numpy 1) ``REPRO_STUB_SITE``,
    each as set or else what the folder was made with, then ``python repro.py``; ``repro.py`` adds the
    folders the loader needs itself. Arguments go to the script (``./run.sh --triton DIR``)."""
    from rig.contract.runtime import stub_site_of

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub_site = stub_site_of(rt)
    lines = [
        "#!/bin/sh",
        f"# Runs repro.py against a Triton {rt.triton_version} install (made by triton-soak-rig's `rig repro`",
        f"# with its runtime {rt.name}). Arguments go to repro.py: ./run.sh --exit-timeout 10.",
        "# Set (each defaults to what this folder was made with; README.md, 'What to set'):",
        "#   TRITON_HOME      the Triton install: lib/libtritonserver.so and backends/python/",
        f"#   PYTHON           a Python {version} with numpy (the backend stub is built for {version})",
    ]
    if stub_site:
        lines.append("#   REPRO_STUB_SITE  a folder with numpy<2 for the stubs (pip install --target DIR 'numpy<2')")
    lines += [
        "# repro.py puts the folders the loader needs on LD_LIBRARY_PATH itself (TRITON_HOME/lib, the",
        "# core's own libraries, libpython for the stubs) and re-executes once.",
        "set -e",
        'here=$(cd "$(dirname "$0")" && pwd)',
        f': "${{TRITON_HOME:={_default(rt.server_dir)[1:-1]}}}"',
        'if [ -z "${PYTHON:-}" ]; then',
        f"  PYTHON={_default(python)}",
        f'  [ -x "$PYTHON" ] || PYTHON=python{version}',
        "fi",
    ]
    if stub_site:
        lines += [
            "# This core's stubs are built against numpy 1 (with numpy 2 their outputs come back empty).",
            f': "${{REPRO_STUB_SITE={_default(str(stub_site))[1:-1]}}}"',
            "export REPRO_STUB_SITE",
        ]
    else:
        lines += ["# The stubs import the numpy of $PYTHON.", "unset REPRO_STUB_SITE"]
    lines += [
        "export TRITON_HOME",
        "unset PYTHONPATH PYTHONHOME",
        'exec "$PYTHON" "$here/repro.py" "$@"',
        "",
    ]
    return "\n".join(lines)


def portable(text: str, rt, python: str, out: Path, work: str | None) -> str:
    """A run's output with this machine's paths written as what names them: the install
    ``$TRITON_HOME``, the Python ``$PYTHON``, the stubs' numpy ``$REPRO_STUB_SITE``, the work
    folder ``$WORK``, this folder ``.``, the home ``$HOME``."""
    from rig.contract.runtime import stub_site_of

    pairs = [(str(out.resolve()), "."), (rt.server_dir, "$TRITON_HOME"), (python, "$PYTHON")]
    pairs.append((str(Path(rt.server_dir).parent), "$TRITON_HOME/.."))
    if stub_site_of(rt):
        pairs.append((str(stub_site_of(rt)), "$REPRO_STUB_SITE"))
    if work:
        pairs.append((work, "$WORK"))
    for path, name in sorted(pairs, key=lambda p: -len(p[0])):
        text = re.sub(re.escape(path) + r"(?![\w.-])", name.replace("\\", "\\\\"), text)
    home = os.environ.get("HOME")
    if home and home != "/":
        text = re.sub(re.escape(home.rstrip("/")) + r"(?=/|\b)", "$HOME", text)
    return text


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
    return "the container's install"


def title_of(cell: dict, result: dict) -> str:
    verdict = result.get("lifecycle")
    said = _SAYS.get(str(verdict), f"the run gave {verdict or 'no verdict'}")
    fin = result.get("finalize") or {}
    if verdict == "exit_timeout" and fin.get("expected"):
        said += ", finalize() runs only after it returns" if not fin.get("never") else ", finalize() never runs"
    prefix = f"Negative control of {cell['scenario']}" if cell["control"] else "Python backend"
    what = cell["what"] if cell["control"] else _found_here(cell).get("title", cell["what"])
    return f"{prefix}: {what}: {said} (Triton {result.get('triton_version') or cell['triton_version']}, C API)"


def _found_here(cell: dict) -> dict:
    """What the report of a scenario found here adds for the cell (``_FOUND_HERE``); nothing for a control."""
    return {} if cell["control"] else _FOUND_HERE.get(cell["scenario"], {})


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
    """The bug report: the cell, what to set, the environment, the steps, the observed run
    (``output``, already ``portable``), the expected behaviour, the models and the verdicts' words."""
    from rig.common.version import __version__

    version = result.get("triton_version") or cell["triton_version"]
    fin = result.get("finalize") or {}
    stop = result.get("stop_seconds")
    observed = f"- **Observed here**: `{result.get('lifecycle', '?')}`"
    if stop:
        observed += f", `TRITONSERVER_ServerStop` took {stop:.2f} s with exit_timeout {result.get('exit_timeout')} s"
    if fin:
        observed += (
            f"; finalize: {fin.get('before', 0)} of {fin.get('expected', 0)} before stop returned, "
            f"{fin.get('after', 0)} after, {fin.get('never', 0)} never"
        )
    control = " --control" if cell["control"] else ""
    lines = [
        f"# {title_of(cell, result)}",
        "",
        (
            f"**Cell**: `{cell['scenario']}`{' (its negative control)' if cell['control'] else ''}, shape "
            f"`{cell['shape']}`: {cell['what']}."
        ),
        "",
        f"- **Triton**: {version} (the server's metadata), {runtime_words(rt, manifest)}",
        "- **API**: in-process, the C API (`tritonserver.h`) through ctypes; no HTTP or gRPC",
        f"- **Backend**: Python (`{'`, `'.join(cell['models'])}` in `models/`)",
        f"- **Upstream**: {', '.join(upstream_links(cell['upstream'])) or 'none (a check of the rig’s own)'}",
        observed,
        (
            f"- **Made by**: triton-soak-rig {__version__}, `rig repro --scenario {cell['scenario']}{control} --shape "
            f"{cell['shape']} --runtime {rt.name} --exit-timeout {cell['exit_timeout']}`"
        ),
        "",
    ]
    lines += _what_to_set(rt)
    lines += _environment(rt, manifest)
    lines += _steps(cell)
    lines += ["", "## Observed", "", f"`./run.sh` here (exit status {rc}; the paths of this machine written as"]
    lines += ["the variables above, `$WORK` the work folder, `.` this folder):", "", "```text"]
    lines += [output.rstrip() or "(no output)", "```", ""]
    cause = _found_here(cell).get("cause")
    if isinstance(cause, list):
        lines += ["## Where it goes wrong", "", *cause, ""]
    lines += _expected(cell)
    lines += _model_and_words(cell, models)
    return "\n".join(lines) + "\n"


def _what_to_set(rt) -> list[str]:
    """The variables ``run.sh`` reads, each with the default this folder was made with."""
    from rig.contract.runtime import stub_site_of

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    lines = [
        "## What to set",
        "",
        "`run.sh` reads these; each defaults to what this folder was made with (a path of the machine that made",
        "it: set the variable where yours differs). Nothing else is needed: `repro.py` puts the folders the",
        "loader needs on `LD_LIBRARY_PATH` itself (`$TRITON_HOME/lib`, the core's own libraries, libpython).",
        "",
        "| variable | what | made with |",
        "| --- | --- | --- |",
        (
            f"| `TRITON_HOME` | the Triton install, in perf_analyzer's layout (`lib/libtritonserver.so`, "
            f"`backends/python/` with a stub built for Python {version}); or `./run.sh --triton DIR` "
            f"| `{home_relative(rt.server_dir)}` |"
        ),
        f"| `PYTHON` | a Python {version} with numpy | `{home_relative(sys.executable)}`, else `python{version}` |",
    ]
    if stub_site_of(rt):
        lines.append(
            "| `REPRO_STUB_SITE` | a folder with numpy<2 for the backend stubs (this core's are built against "
            "numpy 1: with numpy 2 their outputs come back empty); `pip install --target DIR 'numpy<2'` makes one "
            f"| `{home_relative(str(stub_site_of(rt)))}` |"
        )
    return [*lines, ""]


def _environment(rt, manifest: dict) -> list[str]:
    """The README's environment: the machine, the Pythons, how a built core differs from the NGC image."""
    import numpy

    lines = [
        "## Environment",
        "",
        (
            f"- {platform.system()} {platform.release()} ({platform.machine()}), {os.cpu_count()} CPUs, "
            f"glibc {platform.libc_ver()[1] or '?'}"
        ),
        f"- Python {platform.python_version()}, numpy {numpy.__version__} in the client"
        + (
            "; the backend stubs take numpy<2 from `$REPRO_STUB_SITE` (this core's stubs are built against numpy 1)"
            if getattr(rt, "stub_site", None)
            else "; the backend stubs import the same numpy"
        ),
        "- No GPU needed: the models run on the CPU",
    ]
    if rt.kind == "built" and manifest.get("differs_from_ngc"):
        lines += ["", "<details><summary>How this build differs from the NGC image</summary>", ""]
        lines += [f"- {d}" for d in manifest["differs_from_ngc"]]
        lines += ["", "</details>"]
    return lines


def _steps(cell: dict) -> list[str]:
    """The steps to reproduce, and what ``repro.py`` does, in the README's words."""
    explicit = cell.get("client") in ("stop-while-loading", "load-missing")
    control = "EXPLICIT, every model loaded at start" if explicit else "NONE, so every model loads at start"
    lines = [
        "",
        "## Steps to reproduce",
        "",
        "```sh",
        "./run.sh      # or: TRITON_HOME=/path/to/tritonserver PYTHON=/path/to/python3 ./run.sh",
        "```",
        "",
        "`repro.py` imports the standard library, numpy and ctypes only. It:",
        "",
        (
            f"1. starts a server over `models/` (`TRITONSERVER_ServerNew`: model control mode {control}; strict "
            f"model config and readiness; exit timeout {cell['exit_timeout']} s; the backend directory `backends/` "
            "of the install) and waits until the server and every model say ready;"
        ),
    ]
    if cell.get("workload"):
        w = cell["workload"]
        lines.append(
            f"2. sends requests from {w['users']} clients in a closed loop for {w['seconds']:g} s "
            "(`TRITONSERVER_ServerInferAsync`, each response deleted once read);"
        )
    else:
        at = f", {cell['in_flight']} at a time" if cell["in_flight"] > 1 else ", one at a time"
        one_shot = (
            ", each to the stateful model in a sequence of its own (START and END; correlation ids from 2^40)"
            if cell.get("sequences")
            else ""
        )
        lines.append(
            f"2. sends {cell['requests']} requests{at} to the models in turn{one_shot} "
            "(`TRITONSERVER_ServerInferAsync`; every response but the last deleted with "
            "`TRITONSERVER_InferenceResponseDelete` once read);"
        )
    kept = {
        "last-response": "keeps the last response object: it is not deleted until after the stop",
        "last-array": "keeps a numpy array over the last response's output buffer (zero copy): the response is "
        "deleted only when the array goes, after the stop",
    }.get(cell["retain"], "keeps nothing: the last response is deleted too")
    lines += [
        f"3. {kept}{_scene_words(cell)};",
        "4. calls `TRITONSERVER_ServerStop` and times it;",
        "5. lets go of what it kept, waits for the finalizes, then calls `TRITONSERVER_ServerDelete`;",
        (
            "6. reads when each instance's `finalize()` ended (each model records its own `initialize` and `finalize` "
            "in a file: the lines appended to its `model.py`) and whether a stub died of a signal (`crash.c`, compiled "
            "with `cc` where there is one: a marker from the stub's signal handler), prints the report and exits 0 "
            "where the expected verdict was reproduced, 1 where not."
        ),
    ]
    return lines


def _scene_words(cell: dict) -> str:
    """What the client does just before the stop (step 3's second half)."""
    client = cell.get("client") or "none"
    seq = cell.get("sequences") or {}
    return {
        "stop-in-flight": f"; then submits {cell.get('in_flight_at_stop')} request(s) at once (to the models in "
        "turn: the ensembles alone where there are any) and calls the stop 0.1 s later, while the first executes: "
        "each must end answered or failed, none lost",
        "sequence-at-stop": f"; then opens {seq.get('n')} sequences on the stateful model whose `fault` parameter "
        f"is not `off` (correlation ids from {seq.get('first')}, `TRITONSERVER_InferenceRequestSetCorrelationId` "
        "and `...SetFlags`: a START request and one more each), half of them left idle "
        f"{seq.get('idle_s')} s (past the 1 s idle timeout) then each asked to go on (a request without START), the "
        "other half just before the stop; none ended (`fault` `off`: each ended with END at once); the model "
        "writes the states it still holds at its finalize into `$RIG_EVIDENCE_DIR`",
        "refused-request": f"; then sends {cell.get('refused')} requests per model with an input the model does "
        "not have (`RIG_NO_SUCH_INPUT`), each refused",
        "stop-while-loading": "; then unloads the models (`TRITONSERVER_ServerUnloadModel`), loads them again from "
        "a thread (`TRITONSERVER_ServerLoadModel`) and calls the stop once a load is under way (a model LOADING, "
        "its stub up)",
        "load-missing": "; then unloads the models, takes the `model.py` of each whose `fault` parameter is not "
        "`off` away (in a copy of `models/` in its work folder), loads them again (20 s at most) and unloads the "
        "ones that did not load",
        "stub-killed": "; then kills the stub of each model whose `fault` parameter is not `off` (SIGKILL) and "
        "asks the server and the models for 2 s whether they are ready",
    }.get(client, "")


def _expected(cell: dict) -> list[str]:
    exp = cell["expected"]
    text = (
        "`TRITONSERVER_ServerStop` returns promptly (well within the exit timeout) and every model instance's "
        "`finalize()` has run before it returns, no stub dies of a signal, and every request in flight at the stop "
        "ends with an answer or an error (the verdict `clean`)"
    )
    found = _found_here(cell).get("expected")
    if isinstance(found, str):
        text = found
    elif cell["retain"] != "none":
        text += (
            ": what a client holds (a response object, or an array over an output it has not released) should "
            "not keep the model loaded past the stop, or the stop should say why"
        )
    return [
        "## Expected",
        "",
        text + ".",
        "",
        (
            f"The rig's word for this cell, what `repro.py` holds the run to: `{exp['lifecycle']}`, load "
            f"`{exp['load']}` ({exp['source']})."
        ),
        "",
    ]


def _model_and_words(cell: dict, models: Path) -> list[str]:
    """The models' configs as served, and the verdicts' words."""
    lines = [
        "## The models",
        "",
        (
            "Each `models/<name>/1/model.py` is the rig's, unchanged but for the evidence lines at its end; served "
            "with these configurations:"
        ),
        "",
    ]
    for cfg in sorted(models.glob("*/config.pbtxt")):
        lines += [f"`{cfg.relative_to(models.parent)}`:", "", "```text", cfg.read_text().strip(), "```", ""]
    lines += ["## Verdicts", "", "The rig's vocabulary, as `repro.py` prints it:", ""]
    lines += [f"- `{k}`: {cell['meanings'][k]}" for k in _SAYS if k in cell["meanings"]]
    return lines

"""What is checked and set up before a run starts anything: the run's lock, a model path the
Python backend can take, a locustfile that loads, the evidence hook, CuPy, the host's facts."""

from __future__ import annotations

import json
import os
import platform
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rig.common import gpu, probes
from rig.common.errors import RigError
from rig.common.procs import python_m


def lock_run(work: Path, run_id: str):
    """One process per run: a second ``--resume`` of a run still running (or two at once) would
    run the same cycles and overwrite each other's rows. The lock goes with the process."""
    import fcntl

    f = open(work / ".lock", "a+")  # noqa: SIM115
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise RigError(
            f"run {run_id} is running in {holder}: wait for it to end (or stop it) before resuming it"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    return f


def running_holder(work: Path) -> str | None:
    """Who holds the run's lock now ("pid N"), None where nobody does or the run has no work folder:
    a probe that takes the lock for an instant and lets it go."""
    import fcntl

    try:
        f = open(work / ".lock")  # noqa: SIM115
    except OSError:
        return None
    with f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f.read().strip() or "another process"
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    return None


def without_spaces(repo: Path, run_id: str, log: Callable[[str], None]) -> Path:
    """The Python backend's stub cannot take a model path with white space in it (it aborts with
    ``std::invalid_argument: stol`` and the server never becomes ready): serve such a repository
    through a symbolic link from a path without any."""
    if not any(ch.isspace() for ch in str(repo)):
        return repo
    link = Path(tempfile.gettempdir()) / "triton-soak-rig" / run_id / "models"
    if any(ch.isspace() for ch in str(link)):
        raise RigError(
            f"the model repository's path has a space ({repo}), which the Python backend's "
            "stub cannot take, and so does the temporary folder: move the repository"
        )
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(repo, target_is_directory=True)
    log(f"the model repository's path has a space, which the Python backend's stub cannot take: served through {link}")
    return link


def check_workload(path: str) -> dict:
    """Load a locustfile in a child process, as the worker will (importing Locust patches the
    process it runs in, so not this one): its users and shape, or its fault as a ``RigError``."""
    try:
        proc = subprocess.run(
            [*python_m("rig.worker.load.check"), path], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        raise RigError(f"workload {path}: loading it took over 120 s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            info = json.loads(line)
            if "error" in info:
                raise RigError(info["error"])
            return info
    raise RigError(f"workload {path}: could not be loaded ({(proc.stderr.strip().splitlines() or ['no output'])[-1]})")


def hook_file() -> Path:
    return Path(__file__).resolve().parents[1] / "worker" / "hook" / "evidence.py"


def environment_owned() -> bool:
    """A virtualenv, or an environment the user declared the rig's own (RIG_OWNS_ENVIRONMENT=1,
    as the Dockerfile's single-purpose image does): the only places the rig adds its .pth."""
    return sys.prefix != sys.base_prefix or os.environ.get("RIG_OWNS_ENVIRONMENT") == "1"


def hook_file_problem(path: Path) -> str | None:
    """Why the hook file must not run in the stubs (None: it may)."""
    try:
        st = path.stat()
    except OSError as e:
        return f"cannot read it ({e.strerror})"
    if st.st_uid not in (0, os.getuid()):
        return f"it is owned by uid {st.st_uid}, neither root nor this user"
    if st.st_mode & 0o022:
        return f"it is group- or world-writable (mode {stat.filemode(st.st_mode)})"
    return None


def ensure_evidence_hook(log: Callable[[str], None]) -> str | None:
    """Backend stubs read the .pth files of this interpreter's site-packages (see rig/worker/hook).
    Returns the hook file the stubs may run, or None (finalize evidence will be missing)."""
    import sysconfig

    from rig.contract import hook as evidence

    missing = "finalize evidence will be missing (finalize_* columns empty)"
    path = hook_file()
    problem = hook_file_problem(path)
    if problem:
        log(
            f"warning: ignoring the evidence hook {path}: {problem}; {missing}. Reinstall the rig, "
            "or make the file yours and not writable by others (chmod go-w)"
        )
        return None
    site = sysconfig.get_paths()["purelib"]
    if evidence.pth_installed(site):
        return str(path)
    if not environment_owned():
        log(
            f"warning: not adding {evidence.PTH_NAME} to {site}, a system interpreter's site-packages, "
            f"by itself: {missing}. Run the rig from a virtualenv, or set RIG_OWNS_ENVIRONMENT=1 to let it"
        )
        return None
    if evidence.install_pth(site) is None:
        log(
            f"warning: cannot write {evidence.PTH_NAME} into {site}: {missing}; run the rig from a "
            "writable environment (a virtualenv)"
        )
        return None
    return str(path)


_CUPY_CHECKS: dict[tuple[str | None, ...], tuple[bool, str]] = {}
CUPY_CHECK_TIMEOUT_S = 300.0


def cupy_usable(timeout_s: float = CUPY_CHECK_TIMEOUT_S) -> tuple[bool, str]:
    """Whether CuPy can run the cupy model here: not a device count, but a kernel compiled (NVRTC)
    and a matmul run (cuBLAS), each read back (``rig.common.gpu.cupy_check``), with each failure
    named. Asked of a child under the worker's device order and visible devices, so that the
    parent holds no CUDA context (and no GPU memory) and a library that crashes costs only the
    child; once per process and devices. Returns (usable, one line)."""
    import importlib.util

    env = gpu.with_pci_order(dict(os.environ))
    key = tuple(env.get(v) for v in (*gpu.VISIBLE_VARS, gpu.ORDER_VAR))
    if key in _CUPY_CHECKS:
        return _CUPY_CHECKS[key]
    try:
        found = importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError) as e:
        found, why = False, f"CuPy cannot be looked up ({e})"
    else:
        why = "CuPy is not installed (No module named 'cupy')"
    if not found:
        return False, why
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds the rig package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run(
            python_m("rig.common.gpu"), capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return False, f"the CuPy check (a kernel compiled, a matmul run) took over {timeout_s:.0f} s"
    except OSError as e:
        return False, f"could not start the CuPy check: {e}"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                said = json.loads(line)
                out = bool(said["ok"]), str(said["why"])
            except (ValueError, KeyError, TypeError):
                continue
            _CUPY_CHECKS[key] = out
            return out
    tail = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    ended = (
        f"was killed by {signal.Signals(-proc.returncode).name}"
        if proc.returncode < 0 and -proc.returncode in signal.valid_signals()
        else f"ended with status {proc.returncode}"
    )
    return False, f"the CuPy check's process {ended}" + (f": {tail[-1]}" if tail else "")


def host_facts() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    # read under the worker's environment (its device order: rig.contract.runtime's worker_env), so
    # that these are the GPUs the worker's CUDA and its own probe will meet; each figure read once,
    # here, so the run row says which ones this host cannot give
    g = probes.Gpu(environ=gpu.with_pci_order(dict(os.environ)))
    notes = g.survey()
    return {
        "host": platform.node(),
        "cpu": f"{cpu} x{os.cpu_count()}",
        "gpu": getattr(g, "name", None) if g.available else None,
        "gpu_notes": json.dumps(notes, sort_keys=True) if notes else None,
    }


def check_inputs(repository: Path, models: list[str], input_data: str, shapes: str | tuple[str, ...] | None) -> dict:
    """The run's inputs (``--input-data``, ``--shape``) checked before anything starts, against
    what each model's config.pbtxt declares: a bad file or a shape that does not fit is one
    ``RigError`` line naming the input. Only where every model of the repository has a
    config.pbtxt this reader can take are the declared inputs what the server will report (the
    run is then strict; without one, Triton completes configs at load time): otherwise the worker
    checks them against the server's metadata, before its first request.
    Returns ``{"shapes", "optional", "metas", "entries"}``: the parsed shapes, each model's
    optional inputs, and (where checked here) each model's metadata and entries, else None."""
    from rig.contract import inputs
    from rig.parent import repository as repo_mod

    parsed = inputs.parse_shapes(shapes)
    out = {"shapes": parsed, "optional": {}, "metas": None, "entries": None}
    data = None if input_data in inputs.GENERATED else inputs.read_data(input_data)
    if input_data == "random" and not parsed:
        return out  # the default: nothing given to check
    repo = Path(repository)
    declared = {m: repo_mod.config_inputs(repo / m) for m in repo_mod.repository_models(repo)}
    if any(d is None for d in declared.values()) or any(m not in declared for m in models):
        return out
    metas = {m: declared[m].meta for m in models}
    out["optional"] = {m: sorted(declared[m].optional) for m in models if declared[m].optional}
    out["entries"] = inputs.build(metas, input_data, parsed, data, out["optional"])
    out["metas"] = metas
    return out

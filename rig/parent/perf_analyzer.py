"""perf_analyzer, NVIDIA's own load generator, as the reference the rig's numbers are held against.

perf_analyzer in C API mode (``--service-kind=triton_c_api``) hosts the same core the rig hosts,
in its own process, from a folder with ``lib/libtritonserver.so`` and ``backends/`` (a runtime's
``server_dir``). ``tritonclient==2.48.0`` on PyPI ships the binary in its wheel; it is unpacked
once into the rig's cache.

Traps this module handles (measured with 2.48 over the 2.51 core):

* ``--verbose-csv`` is needed for the ``Avg latency`` column; p50..p99 are always there.
* A point that does not stabilise leaves no CSV row: in concurrency mode perf_analyzer exits 2,
  in request-rate mode it may exit 0 with the row missing. Each point runs on its own, so one
  unstable point does not cost the others (``PerfAnalyzerError.points`` keeps them).
* A model that fails to load is retried by the server about three times a second for minutes
  before perf_analyzer gives up; the runner stops it at the second failure and says why.
* perf_analyzer loads every model in the repository; a broken neighbour fails the run.
* A killed run leaves the Python backend's shared-memory regions in ``/dev/shm``; the runner
  removes the ones its own stubs named.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import zipfile
from collections import deque
from collections.abc import Callable
from pathlib import Path

from rig.common import procs
from rig.common.errors import RigError
from rig.common.procs import python_m
from rig.contract import inputs
from rig.parent.perf_analyzer_output import (
    LOAD_FAILED,
    clean_line,
    is_server_line,
    last_line,
    meaningful,
    parse_csv,
    parse_profile,
    parse_server_summary,
)

TRITONCLIENT_VERSION = "2.48.0"
BINARY = "perf_analyzer"


class PerfAnalyzerError(RigError):
    """perf_analyzer failed at one point; ``points`` holds those measured before it."""

    def __init__(self, message: str, points: list[dict] | None = None):
        super().__init__(message)
        self.points = list(points or [])


# ---------------------------------------------------------------- finding the binary


def tools_dir() -> Path:
    from rig.parent.runtime import cache_dir

    return cache_dir().parent / "tools"


def _cached_binary() -> Path:
    return tools_dir() / f"perf_analyzer-{TRITONCLIENT_VERSION}" / BINARY


def _is_executable(path: str | os.PathLike) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def ensure_perf_analyzer(log: Callable[[str], None] = lambda msg: None) -> str:
    """Path of a perf_analyzer binary: ``$PERF_ANALYZER``, then ``PATH``, then the rig's cache; if
    none, ``tritonclient==2.48.0`` is downloaded with pip and its ``bin/perf_analyzer`` unpacked
    into the cache (atomically: temp folder, then rename)."""
    env = os.environ.get("PERF_ANALYZER")
    if env:
        if not _is_executable(env):
            raise RigError(f"PERF_ANALYZER={env} is not an executable file; fix it or unset it")
        return os.path.abspath(env)
    if shutil.which(BINARY):
        return shutil.which(BINARY)
    return str(_cached_binary() if _is_executable(_cached_binary()) else _download(log))


def _download(log: Callable[[str], None]) -> Path:
    final_dir = _cached_binary().parent
    tools = tools_dir()
    tools.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".dl-perf_analyzer-", dir=tools) as tmp:
        log(f"downloading tritonclient=={TRITONCLIENT_VERSION} for its perf_analyzer ...")
        cmd = [
            *python_m("pip"),
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--retries",
            "1",
            "--timeout",
            "20",
            "-q",
            "-d",
            tmp,
            f"tritonclient=={TRITONCLIENT_VERSION}",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        except subprocess.TimeoutExpired:
            raise RigError(
                f"downloading tritonclient=={TRITONCLIENT_VERSION} timed out; "
                "install perf_analyzer yourself and set PERF_ANALYZER=/path/to/it"
            ) from None
        wheels = sorted(Path(tmp).glob("tritonclient-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = last_line(proc.stderr + proc.stdout) or "no wheel downloaded"
            raise RigError(
                f"could not download tritonclient=={TRITONCLIENT_VERSION} ({last}); "
                "install perf_analyzer yourself and set PERF_ANALYZER=/path/to/it"
            )
        staging = Path(tempfile.mkdtemp(prefix=".perf_analyzer-", dir=tools))
        try:
            with zipfile.ZipFile(wheels[0]) as zf:
                member = next(
                    (n for n in zf.namelist() if re.fullmatch(r"[^/]+\.data/data/bin/perf_analyzer", n)), None
                )
                if member is None:
                    raise RigError(
                        f"{wheels[0].name} holds no bin/perf_analyzer (this platform's "
                        "wheel lacks it); set PERF_ANALYZER=/path/to/perf_analyzer"
                    )
                with zf.open(member) as src, open(staging / BINARY, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            os.chmod(staging / BINARY, 0o755)
            os.chmod(staging, 0o755)
            try:
                os.rename(staging, final_dir)
            except OSError:  # another process unpacked it first
                if not _is_executable(final_dir / BINARY):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    log(f"perf_analyzer unpacked to {final_dir / BINARY}")
    return final_dir / BINARY


# ---------------------------------------------------------------- running it


def _run_one(
    binary: str,
    args: list[str],
    env: dict,
    workdir: str,
    deadline: float,
    log: Callable[[str], None],
    server: list[str] | None = None,
) -> tuple[int, list[str], str | None]:
    """Run perf_analyzer once; return (exit status, last output lines, reason it was stopped).
    ``server`` gathers the lines of its server summary (``is_server_line``), wherever they fall."""
    lines: deque[str] = deque(maxlen=400)
    load_failures: list[str] = []
    proc = subprocess.Popen(
        [binary, *args],
        env=env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )

    def reader():
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            if server is not None and is_server_line(line):
                server.append(line)
            if LOAD_FAILED.search(line):
                load_failures.append(line)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    regions: set[str] = set()
    stopped = None
    try:
        while proc.poll() is None:
            regions |= procs.group_shm_regions(proc.pid)
            if len(load_failures) >= 2:
                stopped = clean_line(load_failures[0])
            elif time.monotonic() > deadline:
                stopped = "timed out"
            if stopped:
                log(f"stopping perf_analyzer ({stopped})")
                regions |= procs.group_shm_regions(proc.pid)
                procs.signal_group(proc.pid, signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=3)
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)
    finally:
        # Stubs left behind by a crash or a stop; everything in the group is ours.
        procs.kill_group(proc.pid, proc, regions)
        proc.wait()
        t.join(timeout=5)
    return proc.returncode, list(lines), stopped


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _load_points(concurrency: list[int] | None, rate: list[float] | None) -> tuple[str, list]:
    """(mode, values) of the points asked for: concurrency or rate, positive, concurrency whole."""
    if (concurrency is None) == (rate is None):
        raise RigError("give perf_analyzer either concurrency=[...] or rate=[...], not both")
    mode, values = ("concurrency", concurrency) if concurrency is not None else ("rate", rate)
    if not values:
        raise RigError(f"no {mode} values to measure")
    for v in values:
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise RigError(f"{mode} values must be positive numbers, got {v!r}")
        if mode == "concurrency" and int(v) != v:
            raise RigError(f"concurrency must be a whole number, got {v!r}")
    return mode, list(values)


def run_perf_analyzer(
    runtime,
    model_repository,
    model: str,
    concurrency: list[int] | None = None,
    rate: list[float] | None = None,
    shapes: dict[str, list[int]] | None = None,
    measurement_ms: int = 2000,
    stability_pct: float = 10,
    max_trials: int = 10,
    timeout_s: float = 600,
    input_data: str | None = None,
    log: Callable[[str], None] = lambda msg: None,
) -> list[dict]:
    """Measure ``model`` with perf_analyzer in C API mode over ``runtime``'s core, sending
    ``input_data`` (its ``--input-data``: zero, random or a JSON file; None: its default,
    random) with ``shapes`` (its ``--shape``) for variable dimensions.

    One perf_analyzer run per load point (each concurrency, or each request rate in infer/s);
    ``timeout_s`` bounds all of them together. Returns one dict per point: ``concurrency`` or
    ``rate``, ``throughput`` (infer/s), ``p50_us``, ``p90_us``, ``p95_us``, ``p99_us``,
    ``avg_us`` and the server-side split (``server_queue_us``, ``server_compute_input_us``,
    ``server_compute_infer_us``, ``server_compute_output_us``, ...), ``server``: its server summary
    (``parse_server_summary``: Triton's counts and per-request times, or None), and ``windows``: its
    measurement windows with their real request counts and lengths (``parse_profile``), whose
    sum is ``requests``. Raises ``PerfAnalyzerError``
    (a ``RigError``) with perf_analyzer's own reason; its ``points`` holds the points measured.
    """
    mode, values = _load_points(concurrency, rate)
    repo = str(model_repository)
    if "://" not in repo:
        repo = os.path.abspath(repo)
        if not os.path.isdir(os.path.join(repo, model)):
            raise RigError(f"model {model!r} is not in the repository {repo}; check both names")
    binary = ensure_perf_analyzer(log=log)
    env = runtime.worker_env()

    base = [
        "-m",
        model,
        "--service-kind=triton_c_api",
        f"--triton-server-directory={runtime.server_dir}",
        f"--model-repository={repo}",
        "-p",
        str(int(measurement_ms)),
        "-s",
        _fmt(stability_pct),
        "-r",
        str(int(max_trials)),
        "--verbose-csv",
    ]
    for name, dims in (shapes or {}).items():
        base += ["--shape", f"{name}:{','.join(str(int(d)) for d in dims)}"]
    if input_data is not None:
        base += ["--input-data", input_data if input_data in inputs.GENERATED else os.path.abspath(input_data)]

    deadline = time.monotonic() + timeout_s
    points: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rig-perf_analyzer-") as work:
        for i, v in enumerate(values):
            csv_path = os.path.join(work, f"point{i}.csv")
            profile = os.path.join(work, f"point{i}.json")
            flag = "--concurrency-range" if mode == "concurrency" else "--request-rate-range"
            args = [
                *base,
                flag,
                str(int(v)) if mode == "concurrency" else _fmt(v),
                "-f",
                csv_path,
                "--profile-export-file",
                profile,
            ]
            log(f"perf_analyzer {mode}={_fmt(v)} ...")
            server: list[str] = []
            rc, lines, stopped = _run_one(binary, args, env, work, deadline, log, server)
            where = f"perf_analyzer at {mode} {_fmt(v)}"
            if stopped == "timed out":
                raise PerfAnalyzerError(
                    f"{where} ran past timeout_s={timeout_s:g} s (last output: {meaningful(lines)})", points
                )
            if stopped:
                raise PerfAnalyzerError(
                    f"{where}: {stopped}; fix the model (perf_analyzer loads every model in the repository)", points
                )
            rows = parse_csv(Path(csv_path).read_text()) if os.path.exists(csv_path) else []
            if rc != 0 or not rows:
                why = meaningful(lines)
                hint = ""
                if re.search(r"stable", why, re.IGNORECASE) or (rc == 0 and not rows):
                    hint = "; lengthen measurement_ms, or raise stability_pct or max_trials"
                raise PerfAnalyzerError(f"{where} failed (exit {rc}): {why}{hint}", points)
            row = rows[0]
            row[mode] = int(v) if mode == "concurrency" else v
            if mode == "concurrency":
                row.pop("rate", None)
            row["windows"] = parse_profile(Path(profile).read_text()) if os.path.exists(profile) else []
            row["requests"] = sum(w["requests"] for w in row["windows"]) or None
            row["server"] = parse_server_summary(server)
            points.append(row)
            log(f"  {row.get('throughput')} infer/s, p50 {row.get('p50_us')} us, avg {row.get('avg_us')} us")
    return points

"""Running a build's commands: their output to the build log, ninja's count to the progress bar."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

from rig.common.errors import RigError
from rig.runtimes.from_source.cache import STEPS


class Log:
    """The build log: every command and every line it printed, kept after the build."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._f = open(path, "a", buffering=1)  # noqa: SIM115

    def __call__(self, line: str) -> None:
        self._f.write(line.rstrip("\n") + "\n")

    def close(self) -> None:
        self._f.close()


def run(args: list[str], log: Log, step=None, cwd: str | None = None) -> None:
    """Run one build command, its output to the log; ninja's [n/N] drives the step's bar."""
    log("$ " + " ".join(args))
    env = dict(os.environ, NINJA_STATUS="[%f/%t] ", LC_ALL="C")
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env, start_new_session=True
    )
    tail: list[str] = []
    try:
        for line in proc.stdout:
            log(line)
            tail = (tail + [line.rstrip()])[-40:]
            m = re.match(r"\[(\d+)/(\d+)\]", line)
            if m and step is not None:
                step(int(m.group(1)), int(m.group(2)))
        rc = proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
        raise
    if rc != 0:
        errors = [t for t in tail if "error" in t.lower() or "Error" in t] or tail[-3:] or ["no output"]
        raise RigError(
            f"{Path(args[0]).name} {' '.join(args[1:3])} ... failed (exit {rc}): "
            f"{errors[0].strip()[:240]}; the whole log: {log.path}"
        )


class Progress:
    """A bar over the build's steps; inside a step that compiles, ninja's own count."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._p = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            self._p = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                transient=False,
            )
            self._p.__enter__()
            self._overall = self._p.add_task("build", total=len(STEPS), detail="")
            self._step = None
        return self

    def __exit__(self, *exc):
        if self._p is not None:
            self._p.__exit__(*exc)

    def start(self, name: str) -> None:
        if self._p is None:
            print(f"  {name} ...", file=sys.stderr, flush=True)
            return
        self._p.update(self._overall, detail=name)
        if self._step is not None:
            self._p.remove_task(self._step)
        self._step = self._p.add_task(f"  {name}", total=None, detail="")

    def tick(self, done: int, total: int) -> None:
        if self._p is not None and self._step is not None:
            self._p.update(self._step, completed=done, total=total, detail="compiling")

    def finish(self) -> None:
        if self._p is not None:
            self._p.advance(self._overall)

"""`rig cell --spec FILE --result-fd N` (internal, listed nowhere): one cell of `rig matrix` in a
process of its own, so that a core that crashes or hangs takes only its cell down.

The spec is a ``rig.contract.cell.CellSpec``: the cell's whole configuration (TOML text), the
run id the matrix named, the verdicts that pass, a bench's settings. The cell calls the library
(``rig.workflows.soak.execute`` or ``rig.workflows.bench.run``) and hands its result back over the
fd as one typed message (``rig.contract.messages``): ``CellDone`` (exit status, run id, the
reasons a soak failed, the line of an error or a skip), or ``Fatal`` where an exception escaped
(exit status 3). Its printed lines are for people (the matrix shows them, or keeps them in the
cell's log) and are never read back. ``--result-fd -1`` writes the messages to stdout: a cell
re-run by hand (docs/dev/matrix-cells.md)."""

from __future__ import annotations

import dataclasses
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from rig.common.errors import Exit, RigError
from rig.contract.cell import BenchSettings, CellSpec
from rig.contract.messages import CellDone, Fatal, Message


def main(spec_path: str, result_fd: int, log: Callable[[str], None] = print) -> int:
    """Run the cell of ``spec_path`` and send what it came to over ``result_fd``; its exit status."""
    send = _sender(result_fd)
    spec: CellSpec | None = None
    try:
        try:
            spec = CellSpec.from_json(Path(spec_path).read_text())
        except ValueError as e:
            raise RigError(f"cell spec {spec_path}: {e}") from None
        done = run(spec, log)
    except RigError as e:
        done = CellDone(Exit.USAGE, error=_line(str(e)))
    except OSError as e:  # the machine failed the cell: a full disk, a folder gone, ...
        where = f" ({e.filename})" if e.filename else ""
        done = CellDone(Exit.MACHINE, run_id=spec.run_id if spec else None, error=f"{e.strerror or e}{where}")
    except Exception as e:  # noqa: BLE001 - a bug: the matrix records it as the cell's crash
        trace = traceback.format_exc()
        print(trace, file=sys.stderr, flush=True)
        send(Fatal(f"{type(e).__name__}: {e}", trace))
        return 3
    if done.error:
        word = "skipped" if done.exit == Exit.SKIPPED else "error"
        print(f"rig: {word}: {done.error}", file=sys.stderr, flush=True)
    send(done)
    return done.exit


def run(spec: CellSpec, log: Callable[[str], None] = print) -> CellDone:
    """The cell's soak or bench, as the library runs it; what it came to (errors raised)."""
    from rig.common import cpushare
    from rig.parent.config import from_toml_text

    cfg = from_toml_text(spec.config)
    if spec.results is not None:
        cfg = dataclasses.replace(cfg, results=spec.results)  # as given (the TOML text redacts a URI's credentials)
    cpushare.hold(spec.cpus)
    log(f"cell {spec.label or spec.run_id}: {spec.command}, run {spec.run_id}")
    if spec.command == "bench":
        from rig.workflows import bench

        status = bench.run(cfg, spec.bench or BenchSettings(), log=log, run_id=spec.run_id)
        return CellDone(int(status), spec.run_id, error="nothing was run" if status == Exit.SKIPPED else "")
    from rig.common.text import redact
    from rig.workflows import soak

    status, tally, run_id, reasons = soak.execute(cfg, "soak", allowed=tuple(spec.allowed), log=log, run_id=spec.run_id)
    print(soak.summary_table(tally), flush=True)
    for reason in reasons:
        print(f"FAIL: {reason}", flush=True)
    print(f"results: {redact(str(cfg.results))}/cycles (run_id {run_id})", flush=True)
    return CellDone(int(status), run_id, tuple(reasons), "nothing was run" if status == Exit.SKIPPED else "")


def _line(text: str) -> str:
    return text.strip().replace("\n", " ") or "error"


def _sender(fd: int) -> Callable[[Message], None]:
    """One JSON line a message, to ``fd`` (-1: stdout). The fd is kept from what the cell starts."""
    if fd >= 0:
        os.set_inheritable(fd, False)

    def send(msg: Message) -> None:
        data = (msg.encode() + "\n").encode()
        if fd < 0:
            sys.stdout.write(data.decode())
            sys.stdout.flush()
            return
        while data:
            data = data[os.write(fd, data) :]

    return send

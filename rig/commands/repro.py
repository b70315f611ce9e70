"""`rig repro --scenario NAME [--control] [--shape S] --runtime VERSION --out DIR`: a folder that
reproduces one conformance cell by itself, ready to file upstream.

It holds the model repository the rig serves for the cell (``models/``), ``repro.py`` (the standard
library, numpy and ctypes over ``libtritonserver.so``, no rig import), ``crash.c``, ``run.sh`` and
``README.md``, a bug report whose observed output is that of a run made here, once, with nothing
of the rig on the path. The library that writes it is ``rig.repro`` (``rig.repro.build.write``); it
covers the scenarios whose verdict a single run of the C API shows (``rig.repro.cell.refusal`` says
why another is not covered, and what to run instead).
"""

from __future__ import annotations

from pathlib import Path

from rig.common.errors import Exit
from rig.repro.cell import covered_names


def add_parser(sub) -> None:
    p = sub.add_parser(
        "repro",
        help="write a standalone reproducer of a scenario on one core (models, a ctypes script, run.sh, a report)",
        description="Write a folder that reproduces one conformance cell (a scenario, its control or not, a "
        "model shape, a runtime) with Triton's C API alone: models/, repro.py (standard library, numpy and "
        "ctypes; no rig), run.sh and README.md (an upstream bug report whose observed output is a run made "
        "here). Covers: " + ", ".join(covered_names()) + ".",
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


def run(args) -> int:
    from rig.repro.build import write
    from rig.workflows.matrix_plan import SCENARIO_EXIT_TIMEOUT

    exit_timeout = SCENARIO_EXIT_TIMEOUT if args.exit_timeout is None else args.exit_timeout
    made = write(
        args.scenario,
        args.control,
        args.shape,
        args.runtime,
        Path(args.out).expanduser(),
        exit_timeout,
        log=lambda m: print(m, flush=True),
    )
    print(
        f"wrote {made.out}: README.md, run.sh, repro.py, crash.c, models/ ({', '.join(made.models)}); "
        f"observed {made.result.get('lifecycle', 'nothing')} (expected {made.cell['expected']['lifecycle']})"
    )
    if made.rc != 0:
        print(
            f"FAIL: the run did not reproduce the expected verdict (repro.py exit status {made.rc}): "
            f"see {made.out}/README.md"
        )
        return Exit.FAILED
    return Exit.OK

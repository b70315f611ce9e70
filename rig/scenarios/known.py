"""The verdicts each lifecycle scenario is known to give, per core, API and model shape: data, not
code. ``rig/scenarios/known_verdicts.csv`` holds them, one row per scenario (or its control) x shape x
engine x Triton version, each written from a reviewed run (``rig scenarios --accept RESULTS``)
and naming the run it came from.

A cell of the conformance table is judged against the row for its scenario, control, shape,
engine and core: the same verdicts are as known, others are a finding. Where no row exists the
cell is unjudged (recorded, never failed) until someone reviews a run and accepts it.
A field may name alternatives, ``exit_timeout|clean``: an intermittent cell, where each cycle
gives one of them (``--accept RESULTS --intermittent`` records a cell whose cycles disagree so).
An official-API row also says which ``tritonserver`` bindings its cycles ran (``bindings``: ``own``,
the core's release's, or the version installed beside an older core, ``2.71.0``; empty with the C
API and in rows written before the column): one core may have a row for each, and a cell is held to
the row of the bindings it ran, its release's own where it does not say.
Pure reading and writing of that file; no Triton here.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import tempfile
from collections import Counter
from functools import lru_cache
from pathlib import Path

from rig.common.errors import RigError

ANY = "|"  # between a field's alternatives: an intermittent cell
FIELDS = ("scenario", "control", "shape", "engine", "triton_version", "lifecycle", "load", "growth", "cycles", "run_id")
OPTIONAL = ("bindings",)  # a file written before it reads as not saying (empty)
OWN = "own"  # the bindings of the core's own release


def default_path() -> Path:
    """``RIG_KNOWN_VERDICTS`` or the file shipped with the rig."""
    return Path(os.environ.get("RIG_KNOWN_VERDICTS") or Path(__file__).with_name("known_verdicts.csv"))


@dataclasses.dataclass(frozen=True)
class Known:
    lifecycle: str
    load: str
    growth: str
    cycles: int
    run_id: str
    bindings: str = ""  # the official API's bindings its cycles ran: OWN, a version, "" (not said)

    @property
    def verdicts(self) -> tuple[str, str]:
        return self.lifecycle, self.load


Key = tuple[str, bool, str, str, str]  # scenario, control, shape, engine, triton_version
Entry = tuple[str, bool, str, str, str, str]  # a Key and the bindings its row says


def _bool(text: str) -> bool:
    return str(text).strip().lower() in ("1", "true", "yes")


@lru_cache(maxsize=8)
def _read(path: str, mtime: float) -> dict[Entry, Known]:
    out: dict[Entry, Known] = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(line for line in f if not line.startswith("#"))
        missing = [k for k in FIELDS if k not in (reader.fieldnames or ())]
        if missing:
            raise RigError(
                f"{path}: not a known-verdicts file (it lacks the column(s) {', '.join(missing)}); "
                "write one with rig scenarios --accept RESULTS"
            )
        for r in reader:
            b = (r.get("bindings") or "").strip()
            key = (r["scenario"], _bool(r["control"]), r["shape"], r["engine"], r["triton_version"], b)
            out[key] = Known(r["lifecycle"], r["load"], r["growth"] or "ok", int(r["cycles"] or 0), r["run_id"], b)
    return out


def entries(path: str | Path | None = None) -> dict[Entry, Known]:
    """Every row of the file, keyed by its cell and the bindings it says."""
    p = Path(path) if path else default_path()
    if not p.exists():
        return {}
    return _read(str(p), p.stat().st_mtime)


def table(path: str | Path | None = None) -> dict[Key, Known]:
    """One row a cell: where a core has rows for several bindings, its release's own (what its
    users ran), else the row that does not say, else the first. Read once a file and change (do
    not change what it returns: copy it)."""
    p = Path(path) if path else default_path()
    if not p.exists():
        return {}
    return _preferred(str(p), p.stat().st_mtime)


@lru_cache(maxsize=8)
def _preferred(path: str, mtime: float) -> dict[Key, Known]:
    out: dict[Key, Known] = {}
    for key, k in sorted(_read(path, mtime).items(), key=lambda kv: _preference(kv[0][5])):
        out.setdefault(key[:5], k)
    return out


def _preference(bindings: str) -> int:
    return {OWN: 0, "": 1}.get(bindings, 2)


def pick(rows: dict[Entry, Known], preferred: dict[Key, Known], key: Key, bindings: str | None = None) -> Known | None:
    """The row ``key`` is held to among ``rows`` (``entries``): that of ``bindings`` (``OWN``, a
    version; a row that does not say stands for any), else, where ``bindings`` is None or empty, the
    release's own as ``table`` picks (``preferred``: its answer for the same file). A cell that ran
    other bindings than any row says is unjudged."""
    if bindings:
        return rows.get((*key, bindings)) or rows.get((*key, ""))
    return preferred.get(key)


def bindings_label(row: dict) -> str:
    """What a stored cycle says of its bindings, as a row of the file says it: ``own``, the version
    of other bindings (``2.71.0``), empty with the C API or where the cycle does not record them."""
    if str(row.get("engine")) != "tritonserver":
        return ""
    own, version = row.get("bindings_own"), row.get("tritonserver_version")
    if own is not None and own == own and own != "":
        return OWN if bool(own) else (str(version) if version is not None and version == version else "")
    return ""


def lookup(
    scenario: str,
    control: bool,
    shape: str,
    engine: str,
    triton_version: str,
    path: str | Path | None = None,
    bindings: str | None = None,
) -> Known | None:
    """The verdicts known for this cell (through ``bindings``, as ``pick`` reads them); None where
    none is (unjudged)."""
    key = (scenario, bool(control), shape, engine, str(triton_version))
    return pick(entries(path), table(path), key, bindings)


def expected(
    scenario,
    control: bool,
    shape: str,
    engine: str,
    triton_version: str,
    path: str | Path | None = None,
    bindings: str | None = None,
) -> Known | None:
    """What a cell is held to: the verdicts known for it, else, for a control (and the template,
    every template scenario's control), its contract: clean, ok, ok; None where neither (unjudged).
    ``scenario``: a ``rig.scenarios.catalog.Scenario``. A shape it does not run in (its ``shapes`` are
    those that can move its verdict) is held to the nearest it runs in (``rig.scenarios.shapes.nearest``:
    ``batched-delayed`` to ``batched``), else to its default shape's: a user's batched model under
    ``ready-stub-dead`` to the unbatched cell. ``bindings``: the official API's, as ``pick`` reads them."""
    from rig.scenarios.shapes import nearest

    shape = nearest(shape, scenario.shapes)
    k = lookup(scenario.name, control, shape, engine, triton_version, path, bindings)
    return contract(scenario, control) if k is None else k


def contract(scenario, control: bool) -> Known | None:
    """A control's contract (the template's too: it is every template scenario's control): clean,
    ok, ok; None for a scenario itself."""
    if control or scenario.name == "template":
        return Known(*(scenario.control if control else ("clean", "ok")), "ok", 0, "contract")
    return None


def cores(path: str | Path | None = None) -> set[tuple[str, str]]:
    """The (engine, Triton version) pairs some verdict is known for."""
    return {(k[3], k[4]) for k in table(path)}


def admits(known: str | None, got: str | None) -> bool:
    """Whether the verdict ``got`` is one the known field names (one of its alternatives)."""
    return got is not None and known is not None and got in str(known).split(ANY)


def holds(got, want) -> bool:
    """Whether a cycle's (lifecycle, load) verdicts hold against those known (``Known.verdicts``):
    each is the one known, or one of its alternatives where the cell is intermittent."""
    return len(got) >= 2 and len(want) >= 2 and admits(want[0], got[0]) and admits(want[1], got[1])


def intermittent(fields) -> bool:
    """Whether known verdicts (``Known.verdicts``, or any fields of a row) name alternatives."""
    return any(ANY in str(f) for f in fields or ())


def _alternatives(values) -> str:
    """A field's alternatives, the most often seen first."""
    return ANY.join(v for v, _ in Counter(values).most_common())


def majority(verdicts: list[tuple[str, str, str]]) -> tuple[tuple[str, str, str], int] | None:
    """The verdicts most cycles gave, and how many gave them."""
    if not verdicts:
        return None
    ((top, n),) = Counter(verdicts).most_common(1)
    return top, n


def accept(
    cycles, path: str | Path | None = None, require_unanimous: bool = True, intermittent_ok: bool = False
) -> tuple[int, list[str]]:
    """Write the verdicts of every scenario cell in ``cycles`` (a frame or records of the stored
    cycles) into the known-verdicts file: one row per scenario, control, shape, engine and core,
    replacing the row there. A cell whose cycles disagree is left out unless
    ``require_unanimous`` is false (then the most common verdicts stand) or ``intermittent_ok``
    (then each field names every verdict its cycles gave: ``exit_timeout|clean``); the reasons
    come back. Returns (rows written, cells left out with why)."""
    rows_in = (
        cycles.to_dict("records")
        if hasattr(cycles, "to_dict")
        else [r if isinstance(r, dict) else dataclasses.asdict(r) for r in cycles]
    )
    cells: dict[Entry, list] = {}
    for r in rows_in:
        r = {k: (None if v != v else v) for k, v in r.items()}  # NaN, as pandas reads a missing figure: None
        if not r.get("scenario") or r.get("scenario") == "baseline" or not r.get("triton_version"):
            continue
        key = (
            str(r["scenario"]),
            bool(r.get("control")),
            str(r.get("shape") or "unbatched"),
            str(r["engine"]),
            str(r["triton_version"]),
            bindings_label(r),
        )
        cells.setdefault(key, []).append(r)
    current = dict(entries(path))
    left_out, written = [], 0
    for key, rows in sorted(cells.items()):
        verdicts = [
            (str(r["outcome"]), str(r.get("load_outcome") or "not_measured"), str(r.get("growth_outcome") or "ok"))
            for r in rows
        ]
        top, n = majority(verdicts)
        if n < len(verdicts) and intermittent_ok:
            top = tuple(_alternatives(v[i] for v in verdicts) for i in range(3))
        elif n < len(verdicts) and require_unanimous:
            left_out.append(
                f"{key[0]}{' (control)' if key[1] else ''} {key[2]} {key[3]} {key[4]}: its cycles "
                f"disagree ({', '.join(str(c) + 'x ' + ' / '.join(v) for v, c in Counter(verdicts).items())})"
            )
            continue
        run_ids = sorted({str(r["run_id"]) for r in rows})
        per_run = Counter(str(r["run_id"]) for r in rows)
        if key[5] and (*key[:5], "") in current:  # the row that did not say is now said
            current[key] = current.pop((*key[:5], ""))
        elif not key[5]:  # cycles that do not say their bindings: the row a lookup would read
            key = next((e for e in sorted(current, key=lambda e: _preference(e[5])) if e[:5] == key[:5]), key)
        current[key] = _still_racing(current.get(key), top, per_run) or Known(
            top[0], top[1], top[2], cycles=len(verdicts), run_id=",".join(run_ids), bindings=key[5]
        )
        written += 1
    write(current, path)
    return written, left_out


def _still_racing(old: Known | None, top: tuple[str, str, str], per_run: Counter) -> Known | None:
    """A cell known to race (intermittent) stays known so when a new run's cycles fell within its
    alternatives, or named more of them: three cycles on one side of a race do not narrow it. The
    record then holds both runs' alternatives, cycles and run ids; a run it already names adds no
    cycles (the same results accepted again). ``per_run``: the cell's cycles per run id. None: the
    new run replaces it (the cell was not racing, or gave a verdict its alternatives never named: it
    changed)."""
    fields = (old.lifecycle, old.load, old.growth) if old else ()
    if old is None or not intermittent(fields) or not admits(fields[0], top[0].split(ANY)[0]):
        return None
    merged = [ANY.join(dict.fromkeys(str(f).split(ANY) + str(t).split(ANY))) for f, t in zip(fields, top)]
    seen = old.run_id.split(",")
    ids = ",".join(dict.fromkeys(seen + sorted(per_run)))
    added = sum(n for run_id, n in per_run.items() if run_id not in seen)
    lifecycle, load, growth = merged
    return Known(lifecycle, load, growth, cycles=old.cycles + added, run_id=ids, bindings=old.bindings)


def reread(cycles, path: str | Path | None = None) -> tuple[int, int]:
    """Every known ``stub_crashed`` re-read under today's rule (``rig.contract.verdicts.reread``: a
    stub that aborted only at exit, after every finalize it owed, no longer hides what the stop did),
    from the cycles behind it: ``cycles`` (a frame or records, as the store reads them, so already
    re-read). In each row that names ``stub_crashed``, that alternative gives way to the lifecycle
    verdicts its cell's cycles now read where none of them still reads ``stub_crashed`` and some
    read a verdict the row did not name. A row with no such cycles in ``cycles`` stays as it is.
    Returns (rows re-read, rows naming stub_crashed left)."""
    rows_in = cycles.to_dict("records") if hasattr(cycles, "to_dict") else list(cycles)
    now: dict[Entry, set] = {}
    for r in rows_in:
        if not r.get("scenario") or not r.get("triton_version") or not r.get("outcome"):
            continue
        key = (
            str(r["scenario"]),
            bool(r.get("control")) if r.get("control") == r.get("control") else False,
            str(r.get("shape") or "unbatched"),
            str(r["engine"]),
            str(r["triton_version"]),
            bindings_label(r),
        )
        now.setdefault(key, set()).add(str(r["outcome"]))
    current = dict(entries(path))
    changed = left = 0
    for key, k in current.items():
        alts = k.lifecycle.split(ANY)
        if "stub_crashed" not in alts:
            continue
        got = now.get(key) or (now.get((*key[:5], "")) if key[5] else None)
        if not got or "stub_crashed" in got or got <= set(alts):  # no cycle behind it read stub_crashed
            left += 1
            continue
        merged = list(dict.fromkeys(v for a in alts for v in ([a] if a != "stub_crashed" else sorted(got - set(alts)))))
        current[key] = dataclasses.replace(k, lifecycle=ANY.join(merged))
        changed += 1
    write(current, path)
    return changed, left


def write(rows: dict[Key, Known] | dict[Entry, Known], path: str | Path | None = None) -> Path:
    """The file, sorted, written whole and atomically (a half-written file is never read). ``rows``
    keyed as ``entries`` or as ``table`` (then each row's bindings are its ``Known.bindings``)."""
    p = Path(path) if path else default_path()
    buf = io.StringIO()
    buf.write(
        "# The verdicts each lifecycle scenario is known to give per core, API and model shape "
        "(rig/scenarios/known.py).\n"
        "# Written by `rig scenarios --accept RESULTS` from a reviewed run; run_id names the run.\n"
    )
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((*FIELDS, *OPTIONAL))
    said = {(*key[:5], key[5] if len(key) > 5 else k.bindings): k for key, k in rows.items()}  # type: ignore[misc]
    for key in sorted(said, key=lambda k: (k[0], k[1], k[2], k[3], _version_key(k[4]), _preference(k[5]), k[5])):
        k = said[key]
        w.writerow(
            [key[0], int(key[1]), key[2], key[3], key[4], k.lifecycle, k.load, k.growth, k.cycles, k.run_id, key[5]]
        )
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(buf.getvalue())
    os.replace(tmp, p)
    _read.cache_clear()
    _preferred.cache_clear()
    return p


def _version_key(v: str):
    return tuple(int(x) if x.isdigit() else 0 for x in v.replace("-", ".").split("."))

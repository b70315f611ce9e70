"""`rig gate`: does a candidate (a Triton version or a run) regress from a baseline? Prints
both sides and the reasons; exit 0 pass, 1 regression, 2 bad input."""

from __future__ import annotations

import argparse

from rig.errors import RigError

EXIT_PASS, EXIT_REGRESSION = 0, 1

DESCRIPTION = """\
Compare a candidate with a baseline from one results folder. A and B are each a Triton
version (the triton_version partition, e.g. 2.51.0) or a run id (exact, or a unique prefix).

A regression fails the gate only when it exceeds its threshold AND is significant (p <= 0.05,
one-sided), so noise between runs of one configuration rarely fails it:
  finalize success  drop > --max-finalize-drop (default 0.05, absolute), Fisher's exact test
                    over cycles (or Wilson intervals apart)
  stop latency      p95 ratio > --max-stop-regression (default 1.5), Mann-Whitney U over cycles
  throughput        drop > --max-throughput-drop (default 0.10, relative) at a point both sides
                    measured, Mann-Whitney U over windows (warm-up windows left out)
  outcomes          any outcome but clean the candidate has and the baseline never had
Exit status: 0 pass, 1 regression, 2 bad input."""


def add_parser(sub) -> None:
    p = sub.add_parser("gate", help="fail when a candidate version or run regresses from a baseline",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="RESULTS", help="the results folder (as given to --results)")
    p.add_argument("--baseline", "-a", required=True, metavar="A", help="Triton version or run id")
    p.add_argument("--candidate", "-b", required=True, metavar="B", help="Triton version or run id")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep only cycles whose column KEY equals VALUE (e.g. retain=none); repeatable")
    p.add_argument("--max-finalize-drop", type=float, default=0.05, metavar="F",
                   help="largest allowed drop of finalize success, absolute (default 0.05)")
    p.add_argument("--max-stop-regression", type=float, default=1.5, metavar="X",
                   help="largest allowed ratio of stop latency p95, candidate/baseline (default 1.5)")
    p.add_argument("--max-throughput-drop", type=float, default=0.10, metavar="P",
                   help="largest allowed relative throughput drop at a point (default 0.10)")
    p.set_defaults(func=run)


def _shorten(names, n: int = 5) -> str:
    names = sorted(names)
    return ", ".join(names[:n]) + (f", ... ({len(names)} in all)" if len(names) > n else "")


def load(results: str):
    """The cycles and windows of a results folder; RigError for a missing, empty or foreign one."""
    import pyarrow as pa

    from rig.store import Store

    if "://" not in results:
        from pathlib import Path

        root = Path(results)
        if not root.exists():
            raise RigError(f"no results folder {results}: give the folder a soak or bench wrote (--results)")
        if not root.is_dir():
            raise RigError(f"{results} is not a folder: give the results folder a soak or bench wrote")
        if not any(root.iterdir()):
            raise RigError(f"{results} is empty: no runs stored there yet")
        if not (root / "cycles").is_dir():
            raise RigError(f"{results} is not a results folder (no cycles/ table in it): "
                           "give the folder a soak or bench wrote (--results)")
    store = Store(results)
    try:
        cycles, windows = store.read("cycles"), store.read("windows")
    except (pa.ArrowException, OSError, ValueError) as e:
        raise RigError(f"{results} cannot be read as a results folder ({str(e).splitlines()[0][:120]})") from e
    if not len(cycles):
        raise RigError(f"{results} holds no cycles: no soak or bench stored there yet")
    return cycles, windows


def where(cycles, windows, filters: list[str]):
    """Cycles (and their windows) whose columns equal the ``--where KEY=VALUE`` filters."""
    for f in filters:
        key, eq, value = f.partition("=")
        key = key.strip()
        if not eq or not key:
            raise RigError(f"--where {f!r}: write KEY=VALUE, e.g. --where retain=none")
        if key not in cycles.columns:
            raise RigError(f"--where {key}: no such column; columns: {_shorten(cycles.columns, 50)}")
        kept = cycles[cycles[key].astype(str) == value.strip()]
        if not len(kept):
            seen = {str(v) for v in cycles[key].dropna().unique()}
            raise RigError(f"--where {key}={value}: no cycle matches; {key} is one of {_shorten(seen)}")
        cycles = kept
    if filters and len(windows):
        keys = cycles[["run_id", "cycle"]].drop_duplicates()
        windows = windows.merge(keys, on=["run_id", "cycle"], how="inner")
    return cycles, windows


def select(cycles, windows, name: str, role: str, filtered: bool = False):
    """One side: a Triton version, else a run id (exact or a unique prefix)."""
    versions = set(cycles["triton_version"].dropna().astype(str))
    runs = set(cycles["run_id"].astype(str))
    if name in versions:
        mask = cycles["triton_version"] == name
        label = f"Triton {name}"
    else:
        matches = [r for r in runs if r == name] or [r for r in runs if r.startswith(name)]
        if len(matches) > 1:
            raise RigError(f"--{role} {name}: matches {len(matches)} runs ({_shorten(matches)}); give more of the id")
        if not matches:
            among = " among the cycles --where keeps" if filtered else ""
            raise RigError(f"--{role} {name}: no such Triton version or run id{among}; versions: "
                           f"{_shorten(versions)}; runs: {_shorten(runs)}")
        mask = cycles["run_id"] == matches[0]
        label = f"run {matches[0]}"
    c = cycles[mask]
    w = windows[windows["run_id"].isin(set(c["run_id"]))] if len(windows) else windows
    return label, c, w


def side_lines(label: str, cycles, windows) -> dict[str, str]:
    """The figures printed for one side, by row name."""
    from rig.analysis import frames, verdict

    rows = verdict.records(cycles)
    out = {"": label, "runs": str(cycles["run_id"].nunique()), "cycles": str(len(cycles))}
    counts = cycles["outcome"].value_counts()
    out["outcomes"] = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    ok, n = frames.finalize_counts(cycles)
    out["finalize"] = f"{ok}/{n} cycles ({ok / n:.0%})" if n else "-"
    lat = [r["stop_latency_s"] for r in rows if r.get("stop_latency_s") is not None]
    if lat:
        import numpy as np

        out["stop p50/p95"] = f"{np.percentile(lat, 50):.3f} / {np.percentile(lat, 95):.3f} s"
    if len(windows):
        perf = frames.performance(windows, by=[])
        for r in perf.itertuples():
            name = f"{r.point}" + ("" if r.tool == "rig" else f" ({r.tool})")
            p99 = f", p99 {r.p99_us:,.0f} us" if r.p99_us is not None and r.p99_us == r.p99_us else ""
            out[name] = f"{r.throughput:,.0f} infer/s{p99}"
    return out


def table(a: dict[str, str], b: dict[str, str]) -> str:
    names = list(dict.fromkeys([*a, *b]))
    w0 = max(len(n) for n in names)
    w1 = max(len(a.get(n, "-")) for n in names)
    return "\n".join(f"{n:<{w0}}  {a.get(n, '-'):<{w1}}  {b.get(n, '-')}".rstrip() for n in names)


def run(args) -> int:
    from rig.analysis import verdict

    if args.baseline == args.candidate:
        raise RigError(f"--baseline and --candidate are both {args.baseline}: compare two different sides")
    for name in ("max_finalize_drop", "max_throughput_drop"):
        if not 0 <= getattr(args, name) <= 1:
            raise RigError(f"--{name.replace('_', '-')} is a fraction between 0 and 1")
    if args.max_stop_regression < 1:
        raise RigError("--max-stop-regression is a ratio of at least 1 (1.5: 50 % slower)")
    cycles, windows = load(args.results)
    cycles, windows = where(cycles, windows, args.where)
    la, ca, wa = select(cycles, windows, args.baseline, "baseline", bool(args.where))
    lb, cb, wb = select(cycles, windows, args.candidate, "candidate", bool(args.where))
    if set(ca["run_id"]) == set(cb["run_id"]):
        raise RigError(f"--baseline {args.baseline} and --candidate {args.candidate} select the same "
                       "runs: compare two different sides")
    print(table(side_lines("baseline: " + la, ca, wa), side_lines("candidate: " + lb, cb, wb)))
    for label, c in (("baseline", ca), ("candidate", cb)):
        mixed = [f"{k}={','.join(sorted(map(str, c[k].dropna().unique())))}"
                 for k in ("engine", "model", "retain", "stop_strategy", "restart") if c[k].nunique() > 1]
        if mixed:
            print(f"note: the {label} mixes {'; '.join(mixed)} (pin one with --where)")
    reasons = verdict.gate(ca, wa, cb, wb, max_finalize_drop=args.max_finalize_drop,
                           max_stop_regression=args.max_stop_regression,
                           max_throughput_drop=args.max_throughput_drop)
    for r in reasons:
        print(f"FAIL: {r}")
    if not reasons:
        print("PASS: no significant regression beyond the thresholds")
    return EXIT_REGRESSION if reasons else EXIT_PASS

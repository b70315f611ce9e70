"""A bench sweep as `rig capacity` reads it: the rig's measured windows of each group (version,
engine, model, node share, neighbour, instances), one row per repeat (a run's cycle at a load), and the
repeats as arrays (``Sweep``) that a bootstrap resamples: whole runs first, where the group was
swept by more than one run (runs taken at different times differ by more than their repeats do),
then each run's repeats at each load.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rig.common import hdr

GROUP = ["triton_version", "engine", "model", "cpu_share", "neighbour", "instances"]
NODE = GROUP[:5]  # what a node is: version, engine, model, its share of a machine and what ran beside it


def norm_key(key) -> tuple:
    """A group's key with pandas' NaN for a missing tag made None again (so that keys compare)."""
    return tuple(None if isinstance(v, float) and math.isnan(v) else v for v in key)


def _point(w: pd.DataFrame) -> pd.Series:
    return w["concurrency"].where(w["mode"] == "closed", w["rate"]).astype(float)


def measured_windows(windows: pd.DataFrame) -> pd.DataFrame:
    """The rig's windows that count: per (run, cycle) its last 3 windows, the first dropped as
    warm-up when there are more than 3 (as ``rig.analysis.sweeps.summarize``)."""
    w = windows[windows["tool"] == "rig"].copy()
    if w.empty:
        return w
    w["point"] = _point(w)
    w = w[w["point"].notna()]
    for col in ("instances", "cpu_share", "neighbour"):
        if col not in w:
            w[col] = None
        w[col] = w[col].astype(object).where(w[col].notna(), None)
    w = w.sort_values(["run_id", "cycle", "window"])
    per = w.groupby(["run_id", "cycle"])["window"]
    n, rank = per.transform("size"), per.cumcount()
    first_dropped = (n > 3) & (rank == 0)
    from_end = n - rank  # 1 for the last window
    return w[~first_dropped & (from_end <= 3)].reset_index(drop=True)


def _hist_counts(hists: list) -> tuple[dict[int, int], object] | None:
    """A repeat's windows' histograms merged, as {bucket index: count}, with the histogram."""
    if not hists:
        return None
    h = hdr.merge(hists)
    if h is None or not h.get_total_count():
        return None
    counts = np.ctypeslib.as_array(h.counts)
    idx = np.flatnonzero(counts)
    return dict(zip(idx.tolist(), counts[idx].tolist())), h


def repeats(windows: pd.DataFrame) -> pd.DataFrame:
    """One row per group, point and repeat (run, cycle), over its measured windows:
    ``requests``, ``seconds``, ``errors``, ``throughput``, ``p99_us`` (its windows' histograms
    merged; else the median of their p99), ``counts`` ({bucket: count}, None without histograms)
    and ``hist`` (an HdrHistogram of them, for the buckets' values)."""
    w = measured_windows(windows)
    cols = GROUP + [
        "point",
        "run_id",
        "cycle",
        "cpus",
        "requests",
        "seconds",
        "errors",
        "throughput",
        "p99_us",
        "counts",
        "hist",
    ]
    if w.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for key, g in w.groupby(GROUP + ["point", "run_id", "cycle"], dropna=False, sort=True):
        seconds = float(g["length_s"].sum())
        hists = [h for h in g.get("histogram", pd.Series(dtype=object)) if isinstance(h, str) and h]
        got = _hist_counts(hists) if len(hists) == len(g) else None
        p99 = (
            float(got[1].get_value_at_percentile(99))
            if got
            else (float(g["p99_us"].median()) if g["p99_us"].notna().any() else None)
        )
        out.append(
            dict(
                zip(GROUP + ["point", "run_id", "cycle"], norm_key(key)),
                cpus=g["cpus"].iloc[0] if "cpus" in g else None,
                requests=int(g["requests"].sum()),
                seconds=seconds,
                errors=int(g["errors"].sum()),
                throughput=g["requests"].sum() / seconds if seconds > 0 else None,
                p99_us=p99,
                counts=got[0] if got else None,
                hist=got[1] if got else None,
            )
        )
    return pd.DataFrame(out, columns=cols)


def _rel_range(x: np.ndarray) -> float:
    med = float(np.median(x))
    return float((x.max() - x.min()) / med) if med > 0 else 0.0


class Sweep:
    """One group's repeats as arrays: what a bootstrap resample recomputes from."""

    def __init__(self, g: pd.DataFrame):
        g = g[g["throughput"].notna()].sort_values(["point", "run_id", "cycle"]).reset_index(drop=True)
        self.load = g["point"].to_numpy(float)
        self.loads = np.unique(self.load)
        self.members = [np.flatnonzero(self.load == n) for n in self.loads]
        self.requests = g["requests"].to_numpy(float)
        self.seconds = g["seconds"].to_numpy(float)
        self.errors = g["errors"].to_numpy(float)
        self.p99 = g["p99_us"].to_numpy(float)
        self.throughput = g["throughput"].to_numpy(float)
        self.run = g["run_id"].astype(str).to_numpy()
        self.runs = sorted(set(self.run.tolist()))
        self.counts = self.values = None
        if len(g) and all(c is not None for c in g["counts"]):
            buckets = sorted(set().union(*g["counts"]))
            col = {b: i for i, b in enumerate(buckets)}
            m = np.zeros((len(g), len(buckets)))
            for r, c in enumerate(g["counts"]):
                for b, k in c.items():
                    m[r, col[b]] = k
            h = g["hist"].iloc[0]
            self.counts = m
            self.values = np.array(
                [h.get_highest_equivalent_value(h.get_value_from_index(b)) for b in buckets], dtype=float
            )

    def resample(self, rng) -> list:
        """One bootstrap draw of each load's repeats (row indices). Where more than one run swept
        the group, whole runs are drawn first (with replacement: runs taken at different times
        differ by more than one run's repeats do), then each drawn run's repeats at each load; a load
        none of the drawn runs measured draws from every run that did. With one run, its repeats."""
        if len(self.runs) < 2:
            return [rng.choice(m, len(m)) for m in self.members]
        drawn = rng.choice(len(self.runs), len(self.runs))
        pick = []
        for m in self.members:
            by_run = [m[self.run[m] == self.runs[i]] for i in drawn]
            by_run = [r for r in by_run if r.size] or [m[self.run[m] == r] for r in self.runs]
            by_run = [r for r in by_run if r.size]
            if len(by_run) < len(self.runs):  # the load's own runs, drawn again to the runs' number
                by_run = [by_run[j] for j in rng.choice(len(by_run), len(self.runs))]
            pick.append(np.concatenate([rng.choice(r, r.size) for r in by_run]))
        return pick

    def spread(self) -> dict:
        """How much the sweep moved: per load, each run's pooled throughput, and the largest
        relative range across runs (``between_runs``: (max - min) / median, over the loads two runs
        or more measured) and across one run's repeats (``within_runs``: the same over each run's
        repeats at a load, its largest); None where there is nothing to compare."""
        between, within = [], []
        for m in self.members:
            per_run = []
            for r in self.runs:
                rows = m[self.run[m] == r]
                if rows.size:
                    per_run.append(self.requests[rows].sum() / self.seconds[rows].sum())
                    if rows.size > 1:
                        within.append(_rel_range(self.throughput[rows]))
            if len(per_run) > 1:
                between.append(_rel_range(np.array(per_run)))
        return {
            "runs": len(self.runs),
            "between_runs": max(between) if between else None,
            "within_runs": max(within) if within else None,
        }

    def deviations(self) -> dict:
        """How far one repeat (one measurement, taken at one time) lands from its load's pooled
        figure, as log ratios over every load with 2 repeats or more: ``throughput`` (the repeat's
        against the load's pooled throughput) and ``p99`` (the repeat's against the load's merged
        p99). Each load's are scaled by sqrt(n / (n - 1)), since n repeats sit closer to their own
        pool than a new measurement does; ``throughput_load`` and ``p99_load`` say each one's load.
        What a prediction interval for one fleet run draws from (``rig.analysis.capacity.law``: those
        of the loads nearest the fleet's); empty arrays where no load has 2 repeats."""
        pooled = self.figures(self.members)
        out: dict[str, list] = {"throughput": [], "p99": [], "throughput_load": [], "p99_load": []}
        for j, rows in enumerate(self.members):
            n = rows.size
            if n < 2:
                continue
            scale = math.sqrt(n / (n - 1))
            for name, each, pool in (
                ("throughput", self.throughput[rows], pooled["throughput"][j]),
                ("p99", self.p99[rows], pooled["p99"][j]),
            ):
                ok = np.isfinite(each) & (each > 0)
                if np.isfinite(pool) and pool > 0 and ok.sum() >= 2:
                    out[name].extend((scale * np.log(each[ok] / pool)).tolist())
                    out[f"{name}_load"].extend([float(self.loads[j])] * int(ok.sum()))
        return {k: np.array(v, dtype=float) for k, v in out.items()}

    def latencies(self) -> list:
        """Per load, its repeats' latencies merged: (values in us, counts), None without histograms."""
        if self.counts is None or self.values is None:
            return [None] * len(self.loads)
        out = []
        for m in self.members:
            c = self.counts[m].sum(axis=0)
            keep = c > 0
            out.append((self.values[keep], c[keep]) if keep.any() else None)
        return out

    def law_without(self, keep: list):
        """The USL fitted on the repeats of the loads at indices ``keep`` only."""
        from rig.analysis import usl

        rows = np.concatenate([self.members[j] for j in keep])
        return usl.fit(self.load[rows], self.throughput[rows])

    def figures(self, pick: list) -> dict:
        """Per load (``pick``: each load's repeats, as row indices, possibly repeated): the pooled
        throughput, the merged p99 (inf where a request failed: such a load never meets a bound),
        and every picked repeat's (load, throughput) for the fit."""
        tput, p99 = [], []
        for rows in pick:
            sec = self.seconds[rows].sum()
            tput.append(self.requests[rows].sum() / sec if sec > 0 else np.nan)
            if self.errors[rows].sum() > 0:
                p99.append(np.inf)
            elif self.counts is not None:
                c = np.cumsum(self.counts[rows].sum(axis=0))
                need = max(int(0.99 * c[-1] + 0.5), 1)
                p99.append(float(self.values[np.searchsorted(c, need)]))
            else:
                p99.append(float(np.nanmedian(self.p99[rows])) if np.isfinite(self.p99[rows]).any() else np.inf)
        every = np.concatenate(pick)
        return {"throughput": np.array(tput), "p99": np.array(p99), "n": self.load[every], "x": self.throughput[every]}

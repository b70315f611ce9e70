"""What a capacity node is, as the runs recorded it: its share of the machine (``--cpus``), what ran
beside it (``--neighbour``) and whether its CPUs were held awake (``--cpu-idle``), read onto its
windows (``with_shares``) and said in a group's title (``node_title``)."""

from __future__ import annotations

import math

import pandas as pd


def share_text(share, cpus=None) -> str:
    """A node's share of its machine: ``1 CPU (0)``; ``share not recorded`` before schema 13."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "share not recorded"
    return f"{share:g} CPU{'' if share == 1 else 's'}" + (f" ({cpus})" if cpus else "")


def node_title(version, engine, model, share, cpus=None, neighbour=None) -> str:
    text = f"Triton {version}, engine {engine}, model {model}"
    text = text if share is None else f"{text}, node share {share_text(share, cpus)}"
    return text if neighbour is None else f"{text}, neighbour {neighbour}"


RUN_TAGS = ("cpu_share", "cpus", "neighbour", "cpu_idle")  # the runs' columns a node's windows carry
HELD = ("pm_qos", "poll")  # runs.cpu_idle of a bench that held the CPUs out of idle (rig.common.cpuidle)
HELD_TEXT = "CPUs held awake"


def with_shares(windows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``windows`` with their run's share of the machine (``cpu_share``, ``cpus``: ``runs``'
    columns, schema 13; None for runs stored before) and the conditions around it (``neighbour``:
    what ran beside it, schema 18, ``none`` for runs stored before, which ran none; with ", CPUs
    held awake" where the bench held the CPUs out of idle, ``runs.cpu_idle``, since a node serves
    up to half as much again so held as with its CPUs left to halt: a sweep of each is a group of
    its own, and a fleet's nodes, which never hold, are checked against each, labelled)."""
    w = windows.copy()
    cols = [c for c in RUN_TAGS if c in runs.columns]
    w = w.drop(columns=[c for c in RUN_TAGS if c in w.columns])
    if cols and len(runs):
        w = w.merge(runs[["run_id", *cols]].drop_duplicates("run_id"), on="run_id", how="left")
    for c in RUN_TAGS:
        if c not in w.columns:
            w[c] = None
        w[c] = w[c].astype(object).where(w[c].notna(), "none" if c == "neighbour" else None)
    held = w["cpu_idle"].isin(HELD)
    w.loc[held, "neighbour"] = w.loc[held, "neighbour"].astype(str) + f", {HELD_TEXT}"
    return w.drop(columns=["cpu_idle"])

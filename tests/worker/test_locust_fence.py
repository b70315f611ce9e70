"""Locust behind a fence: every use of Locust's internals is in rig/worker/load/locust_api.py, and
the installed Locust still has each of them (``locust_api.check()``, which ``rig doctor`` runs
too). A new Locust that changes one fails here, naming what changed and the rig feature that
depends on it; docs/dev/testing.md says how to check a new version."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from helpers import ROOT

FENCE = ROOT / "rig" / "worker" / "load" / "locust_api.py"
# Locust's internal modules and names that only the fence may use (its public API, User,
# LoadTestShape, Environment, events, task, constant, stays where it is needed). A runner's
# ``.clients`` is Locust's; ``rig.worker.clients`` (a scenario's client) is the rig's own package.
INTERNAL = re.compile(r"locust\.(runners|stats|util|argument_parser|rpc|event)\b|\._send_stats\b|"
                      r"_cache_response_times|STATE_MISSING|CONNECT_RETRY_COUNT|\.start_worker\b|"
                      r"spawning_complete|default_args_dict|StatsCSVFileWriter|bucket_response_time|"
                      r"send_stop_to_client|(?<!rig\.worker)\.clients\b")


def _in_child(code: str) -> dict:
    """Run ``code`` in a child (importing Locust monkey-patches the process for gevent); the JSON
    line it prints last."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_no_module_outside_the_fence_touches_locusts_internals():
    hits = []
    for path in sorted((ROOT / "rig").rglob("*.py")):
        if path == FENCE:
            continue
        for k, line in enumerate(path.read_text().splitlines(), 1):
            if INTERNAL.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{k}: {line.strip()}")
    assert not hits, "Locust's internals outside rig/worker/load/locust_api.py:\n" + "\n".join(hits)


@pytest.mark.slow
def test_the_installed_locust_has_everything_the_rig_relies_on():
    out = _in_child("import json, locust; from rig.worker.load import locust_api\n"
                    "print(json.dumps({'version': locust.__version__, 'problems': locust_api.check()}))")
    assert not out["problems"], (f"Locust {out['version']} changed what the rig relies on (see "
                                 "docs/dev/testing.md, Locust):\n" + "\n".join(out["problems"]))


@pytest.mark.slow
def test_a_change_is_named_with_the_feature_that_depends_on_it():
    """The check itself: two internals taken away, each named with its feature (a probe that
    needs one of them fails too)."""
    out = _in_child("import json, locust.runners, locust.stats; from rig.worker.load import locust_api\n"
                    "del locust.runners.CONNECT_RETRY_COUNT\n"
                    "del locust.stats.StatsEntry._cache_response_times\n"
                    "print(json.dumps(locust_api.check()))")
    named = lambda *words: any(all(w in line for w in words) for line in out)  # noqa: E731
    assert named("CONNECT_RETRY_COUNT", "changed or is gone", "--locust-master"), out
    assert named("_cache_response_times", "Locust's stats"), out

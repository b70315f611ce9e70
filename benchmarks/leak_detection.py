"""The smallest leak per request that a cycle flags as ``leaking``: the template model keeping N
bytes per request (its ``leak_bytes`` parameter), soaked under a config (default the nightly's:
5 s of load at 2 users), C cycles per size; prints, per size, the cycles flagged and the stub's
measured growth per request against what the model keeps.

    .venv/bin/python benchmarks/leak_detection.py [--sizes 128,256,384,512,1024] [--cycles 3]
        [--config workloads/nightly.toml] [--engine capi]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from rig.parent.repository import ModelSpec, render


def repository(leak: int, where: Path) -> Path:
    repo = where / f"leak-{leak}"
    cfg = render(ModelSpec(fault="leaks-memory"), repo) / "config.pbtxt"
    cfg.write_text(re.sub(r'(key:\s*"leak_bytes"\s*,?\s*value:\s*\{\s*string_value:\s*)"\d+"', rf'\1"{leak}"',
                          cfg.read_text()))
    assert f'"{leak}"' in cfg.read_text(), "leak_bytes not set"
    return repo


def main() -> int:
    a = argparse.ArgumentParser()
    a.add_argument("--sizes", default="128,256,384,512,1024")
    a.add_argument("--cycles", type=int, default=3)
    a.add_argument("--config", default="workloads/nightly.toml")
    a.add_argument("--engine", default="capi")
    args = a.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for leak in [int(x) for x in args.sizes.split(",")]:
            results = Path(tmp) / f"results-{leak}"
            subprocess.run([sys.executable, "-m", "rig", "soak", "--config", args.config, "--engine", args.engine,
                            "--model-repository", str(repository(leak, Path(tmp))), "--cycles", str(args.cycles),
                            "--results", str(results), "--allow-outcomes", "leaking"],
                           check=False, stdout=subprocess.DEVNULL)
            c = pd.read_parquet(results / "cycles")
            per_req = c.stub_growth_per_1k_b / 1000
            rows.append({"leak B/request": leak, "cycles": len(c),
                         "leaking": int((c.growth_outcome == "leaking").sum()),
                         "measured B/request (median)": round(float(per_req.median()), 1),
                         "error %": round(100 * (float(per_req.median()) - leak) / leak, 1),
                         "requests read (median)": int(c.growth_requests.median())})
            print(rows[-1], flush=True)
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

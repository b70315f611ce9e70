"""``python -m rig.worker.load.check FILE``: load a locustfile as the worker will, and print one JSON
line: its users and shape, or ``{"error": ...}``. The orchestrator runs it in a child process
(importing Locust patches the process it runs in)."""

import json
import sys

from rig.common.errors import RigError
from rig.worker.load.users import load_workload

if __name__ == "__main__":
    try:
        print(json.dumps(load_workload(sys.argv[1]).describe()))
    except RigError as e:
        print(json.dumps({"error": str(e)}))

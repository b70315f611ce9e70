"""``python -m rig.worker.load.check FILE``: load a locustfile as the worker will, and print one JSON
line: its users and shape, or ``{"error": ...}``. ``python -m rig.worker.load.check --locust``: the
installed Locust's version and the internals the rig relies on that changed (``locust_api.check``),
``{"version": ..., "problems": [...]}``. The parent runs both in a child process (importing Locust
patches the process it runs in)."""

import json
import sys

from rig.common.errors import RigError
from rig.worker.load.users import load_workload

if __name__ == "__main__":
    if sys.argv[1:] == ["--locust"]:
        import locust

        from rig.worker.load import locust_api

        print(json.dumps({"version": locust.__version__, "problems": locust_api.check()}))
        sys.exit(0)
    try:
        print(json.dumps(load_workload(sys.argv[1]).describe()))
    except RigError as e:
        print(json.dumps({"error": str(e)}))

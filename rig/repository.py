"""The rig's models rendered into a model repository for each run. The templates are the
project's ``models/`` folder, in Triton's layout (``<kind>/config.pbtxt.tmpl``,
``<kind>/1/model.py``), installed with the rig as ``rig/_models``."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from rig.errors import RigError

KINDS = ("numpy", "cupy")

# Fault presets for positive controls: each maps to parameters of the template model.
FAULTS = {
    "none": {},
    "finalize-raises": {"finalize": "raise"},
    "finalize-sleeps": {"finalize": "sleep", "finalize_sleep_s": "3600"},
    "stub-exits": {"exit_after": "3"},
    "execute-raises": {"raise_every": "3"},
    "load-fails": {"fail_load": "1"},
    "load-hangs": {"load_sleep_s": "3600"},
    "leaks-memory": {"leak_bytes": str(1 << 20)},
}


def templates_dir() -> Path:
    """``models/`` of a checkout, or the same files installed with the rig."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "models", here / "_models"):
        if (candidate / "numpy" / "config.pbtxt.tmpl").exists():
            return candidate
    raise RigError("the rig's model templates are missing; reinstall the rig (pip install .)")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    kind: str = "numpy"               # numpy (KIND_CPU) | cupy (KIND_GPU)
    name: str | None = None           # defaults to the kind
    size: int = 4                     # INPUT [size] @ W[size, size]
    instances: int = 1
    max_batch_size: int = 0
    dynamic_batching: bool = False
    fault: str = "none"               # one of FAULTS
    execute_delay_ms: float = 0.0     # a slow model on purpose (positive control of latency)

    @property
    def model_name(self) -> str:
        return self.name or self.kind


def render(spec: ModelSpec, repository: Path) -> Path:
    """Write ``repository/<name>/{config.pbtxt,1/model.py}``; returns the model's folder."""
    if spec.kind not in KINDS:
        raise RigError(f"unknown model {spec.kind!r}: choose one of {', '.join(KINDS)}")
    if spec.fault not in FAULTS:
        raise RigError(f"unknown fault {spec.fault!r}: choose one of {', '.join(FAULTS)}")
    if spec.size < 1 or spec.instances < 1 or spec.max_batch_size < 0:
        raise RigError("model size and instances must be >= 1 and max_batch_size >= 0")
    tdir = templates_dir()
    params = {"size": str(spec.size), **FAULTS[spec.fault]}
    if spec.execute_delay_ms:
        params["execute_delay_ms"] = str(spec.execute_delay_ms)
    if spec.kind == "cupy":
        params["FORCE_CPU_ONLY_INPUT_TENSORS"] = "no"
    template = "".join(line for line in (tdir / spec.kind / "config.pbtxt.tmpl").read_text().splitlines(True)
                       if not line.startswith("#"))  # the template's own notes
    config = template.format(
        name=spec.model_name, max_batch_size=spec.max_batch_size, size=spec.size, instances=spec.instances,
        dynamic_batching="dynamic_batching { }" if spec.dynamic_batching and spec.max_batch_size > 0 else "",
        parameters=",\n".join(f'  {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items()))
    mdir = Path(repository) / spec.model_name
    (mdir / "1").mkdir(parents=True, exist_ok=True)
    (mdir / "config.pbtxt").write_text(config)
    shutil.copyfile(tdir / spec.kind / "1" / "model.py", mdir / "1" / "model.py")
    return mdir


def repository_models(repository: Path) -> list[str]:
    repo = Path(repository)
    if not repo.is_dir():
        raise RigError(f"model repository {repo} does not exist: pass --model-repository PATH to a folder of models")
    names = [p.name for p in sorted(repo.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not names:
        raise RigError(f"model repository {repo} holds no model folders")
    return names

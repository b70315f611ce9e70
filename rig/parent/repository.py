"""The rig's models rendered into a model repository for each run. The templates are the
project's ``models/`` folder, in Triton's layout (``<kind>/config.pbtxt.tmpl``,
``<kind>/1/model.py``), installed with the rig as ``rig/_models``."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from rig.common.errors import RigError
from rig.contract.spec import LEAK_PREFIX, repository_models  # noqa: F401 - shared with the worker
from rig.scenarios.models_dir import templates_dir

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
    "leaks-per-load": {"leak_per_load_bytes": str(1 << 20)},
    "slow-execute": {"execute_delay_ms": "125"},
    # each execute sleeps 100 us more than the last (a model that scores every query against all earlier ones)
    "slows-down": {"slowdown_us": "100"},
    # initialize sleeps past the exit timeout: 5 s more than it (``load_slow_s``), 35 s for the default 30
    "load-slow": {"load_sleep_s": "35"},
}


def load_slow_s(exit_timeout: float) -> float:
    """How long ``load-slow``'s initialize sleeps: past the exit timeout, so a stop cannot wait it out."""
    return exit_timeout + 5


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    kind: str = "numpy"  # numpy (KIND_CPU) | cupy (KIND_GPU)
    name: str | None = None  # defaults to the kind
    size: int = 4  # INPUT [size] @ W[size, size]
    instances: int = 1
    max_batch_size: int = 0
    dynamic_batching: bool = False
    queue_delay_us: int = 0  # the dynamic batcher's max_queue_delay_microseconds
    decoupled: bool = False  # responses through each request's sender (model_transaction_policy)
    fault: str = "none"  # one of FAULTS
    execute_delay_ms: float = 0.0  # a slow model on purpose (positive control of latency)
    load_sleep_s: float | None = None  # overrides the fault's initialize sleep (load-slow: load_slow_s)
    # the CUDA device (an index among the visible ones) the cupy model's instances run on: named in
    # its instance_group, so a node with several GPUs does not start them on every one while the
    # rig's inputs sit on this one
    gpu: int = 0

    @property
    def model_name(self) -> str:
        return self.name or self.kind


def _batcher(spec: ModelSpec) -> str:
    """The config's ``dynamic_batching`` block (none without a batch dimension)."""
    if not (spec.dynamic_batching and spec.max_batch_size > 0):
        return ""
    delay = f" max_queue_delay_microseconds: {spec.queue_delay_us} " if spec.queue_delay_us > 0 else " "
    return f"dynamic_batching {{{delay}}}"


def render(spec: ModelSpec, repository: Path) -> Path:
    """Write ``repository/<name>/{config.pbtxt,1/model.py}``; returns the model's folder."""
    if spec.kind not in KINDS:
        raise RigError(f"unknown model {spec.kind!r}: choose one of {', '.join(KINDS)}")
    if spec.fault not in FAULTS:
        raise RigError(f"unknown fault {spec.fault!r}: choose one of {', '.join(FAULTS)}")
    if spec.size < 1 or spec.instances < 1 or spec.max_batch_size < 0 or spec.queue_delay_us < 0 or spec.gpu < 0:
        raise RigError("model size and instances must be >= 1, max_batch_size and the queue delay and the GPU >= 0")
    tdir = templates_dir()
    params = {"size": str(spec.size), **FAULTS[spec.fault]}
    if spec.decoupled:
        params["decoupled"] = "1"
    if spec.execute_delay_ms:
        params["execute_delay_ms"] = str(spec.execute_delay_ms)
    if spec.load_sleep_s is not None and "load_sleep_s" in params:
        params["load_sleep_s"] = str(spec.load_sleep_s)
    if spec.kind == "cupy":
        params["FORCE_CPU_ONLY_INPUT_TENSORS"] = "no"
    template = "".join(
        line
        for line in (tdir / spec.kind / "config.pbtxt.tmpl").read_text().splitlines(True)
        if not line.startswith("#")
    )  # the template's own notes
    config = template.format(
        name=spec.model_name,
        max_batch_size=spec.max_batch_size,
        size=spec.size,
        instances=spec.instances,
        gpu=spec.gpu,
        dynamic_batching=_batcher(spec),
        policy="model_transaction_policy { decoupled: true }" if spec.decoupled else "",
        parameters=",\n".join(f'  {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items()),
    )
    mdir = Path(repository) / spec.model_name
    (mdir / "1").mkdir(parents=True, exist_ok=True)
    (mdir / "config.pbtxt").write_text(config)
    shutil.copyfile(tdir / spec.kind / "1" / "model.py", mdir / "1" / "model.py")
    return mdir


# ---------------------------------------------------------------- config.pbtxt, read

# Triton's config datatypes by their metadata names (``TYPE_STRING`` is BYTES on the wire).
_CONFIG_TYPES = {
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_UINT16": "UINT16",
    "TYPE_UINT32": "UINT32",
    "TYPE_UINT64": "UINT64",
    "TYPE_INT8": "INT8",
    "TYPE_INT16": "INT16",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_FP16": "FP16",
    "TYPE_FP32": "FP32",
    "TYPE_FP64": "FP64",
    "TYPE_STRING": "BYTES",
    "TYPE_BF16": "BF16",
}

_TOKEN = re.compile(
    r"""\s+|\#[^\n]*|(?P<p>[{}\[\]<>:,;])|(?P<s>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<n>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fF]?)"""
    r"""|(?P<i>[A-Za-z_][A-Za-z0-9_.]*)"""
)


def _number(raw: str) -> int | float:
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", raw):
        return int(raw, 16)
    if re.fullmatch(r"[-+]?\d+", raw):
        return int(raw, 10)
    return float(raw.rstrip("fF"))


def _tokens(text: str) -> list[tuple[str, object]]:
    """Protobuf text format's tokens: punctuation, strings (adjacent ones joined), numbers,
    identifiers; ``#`` comments dropped. A character it cannot place raises ValueError."""
    import ast

    out: list[tuple[str, object]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"unexpected {text[pos : pos + 10]!r}")
        pos = m.end()
        if m.group("p"):
            out.append(("p", m.group("p")))
        elif m.group("s"):
            # The escapes of protobuf's strings are C's, which Python's literals read alike.
            value = ast.literal_eval(m.group("s"))
            if out and out[-1][0] == "s":
                out[-1] = ("s", out[-1][1] + value)
            else:
                out.append(("s", value))
        elif m.group("n"):
            out.append(("n", _number(m.group("n"))))
        elif m.group("i"):
            out.append(("i", m.group("i")))
    return out


def parse_pbtxt(text: str) -> dict:
    """A protobuf text message as ``{field: [values]}`` (every field a list: the format does not
    say which are repeated); a nested message is such a dict, an enum its name. Written for
    config.pbtxt's inputs (``google.protobuf`` is not a dependency of the rig, and Triton's
    ``ModelConfig`` schema is not at hand); raises ValueError where the text is not the format."""
    toks = _tokens(text)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else (None, None)

    def take(kind=None, value=None):
        nonlocal pos
        tok = peek()
        if tok[0] is None or (kind and tok[0] != kind) or (value and tok[1] != value):
            raise ValueError(f"expected {value or kind} at token {pos}, got {tok[1]!r}")
        pos += 1
        return tok

    def message(end):
        fields: dict = {}
        while peek() != ("p", end) and peek()[0] is not None:
            name = take("i")[1]
            colon = peek() == ("p", ":")
            if colon:
                take()
            if peek() == ("p", "["):
                take()
                while peek() != ("p", "]"):
                    fields.setdefault(name, []).append(value())
                    if peek() == ("p", ","):
                        take()
                take("p", "]")
            else:
                if not colon and peek() not in (("p", "{"), ("p", "<")):
                    raise ValueError(f"field {name}: expected ':' or a message")
                fields.setdefault(name, []).append(value())
            if peek() in (("p", ","), ("p", ";")):
                take()
        if end is not None:
            take("p", end)
        return fields

    def value():
        kind, v = peek()
        if (kind, v) in (("p", "{"), ("p", "<")):
            take()
            return message("}" if v == "{" else ">")
        if kind in ("s", "n", "i"):
            take()
            return v
        raise ValueError(f"expected a value at token {pos}, got {v!r}")

    out = message(None)
    if pos != len(toks):
        raise ValueError(f"unexpected {toks[pos][1]!r} at token {pos}")
    return out


@dataclasses.dataclass(frozen=True)
class ConfigInputs:
    """What a model's config.pbtxt says of its inputs: the metadata Triton will report for them
    (the batch dimension first, as -1, where the model batches) and which are optional."""

    meta: object  # rig.contract.engines.ModelMetadata
    optional: frozenset


def config_inputs(model_dir: Path) -> ConfigInputs | None:
    """The inputs that ``model_dir/config.pbtxt`` declares, or None where it cannot say: no
    file, text this reader cannot parse, an input without a name, dims or a known datatype, or
    no inputs at all (a backend that completes its own config fills them in at load time)."""
    from rig.contract.engines import ModelMetadata, TensorSpec

    path = Path(model_dir) / "config.pbtxt"
    try:
        cfg = parse_pbtxt(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, SyntaxError):
        return None
    try:
        mbs = int((cfg.get("max_batch_size") or [0])[0])
        specs, optional = [], set()
        for item in cfg.get("input", []):
            if not isinstance(item, dict):
                return None
            name = (item.get("name") or [None])[0]
            dtype = _CONFIG_TYPES.get((item.get("data_type") or [None])[0])
            dims = [int(d) for d in item.get("dims", [])]
            if not isinstance(name, str) or dtype is None:
                return None
            if (item.get("optional") or [False])[0] in (True, "true", "True", 1):
                optional.add(name)
            specs.append(TensorSpec(name, dtype, tuple([-1, *dims] if mbs > 0 else dims)))
    except (TypeError, ValueError):
        return None
    if not specs:
        return None
    return ConfigInputs(
        ModelMetadata(
            name=Path(model_dir).name, versions=(), platform="", inputs=tuple(specs), outputs=(), max_batch_size=mbs
        ),
        frozenset(optional),
    )

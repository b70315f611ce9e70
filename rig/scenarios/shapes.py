"""Model shapes: how a model is served (batched or not, how many instances, decoupled or not),
the axis along which one class of lifecycle bug can give another verdict.

A shape is a name: ``unbatched`` (``max_batch_size: 0``, one instance), ``batched`` (a
``max_batch_size`` with dynamic batching: the rig's template uses 8; a model of any batch size
with the dynamic batcher is ``batched``), ``batched-delayed`` (the same with a queue delay:
``max_queue_delay_microseconds`` above 0, as most real configs have; the template's ``QUEUE_DELAY_US``:
it moves ``execute-raises``' race, docs/guide/scenarios.md), ``max-batch`` (a batch dimension, no dynamic batcher:
one request an execute), ``instances-N`` (N instances), ``decoupled``
(``model_transaction_policy { decoupled: true }``: responses through the request's sender);
joined with ``,`` where several apply (``decoupled,instances-2``). A scenario says which shapes
apply to it (``rig.scenarios.catalog.Scenario.shapes``); every cycle records the one it ran in
(``cycles.shape``). Pure: no Triton here.
"""

from __future__ import annotations

import dataclasses
import re

from rig.common.errors import RigError

BATCH = 8  # the batched shape's max_batch_size
# A batched shape's fixed count of requests goes this many at a time (``--requests-in-flight``):
# one at a time, the dynamic batcher never has two requests to put in one execute.
GROUP = 4
# The batched-delayed shape's ``max_queue_delay_microseconds``: what the held-out batched scorer that
# stopped clean where execute-raises batched held the stop was configured with (2.51.0, capi).
QUEUE_DELAY_US = 200


@dataclasses.dataclass(frozen=True)
class Shape:
    max_batch_size: int = 0
    dynamic_batching: bool = False
    instances: int = 1
    decoupled: bool = False
    queue_delay_us: int = 0  # the dynamic batcher's max_queue_delay_microseconds

    @property
    def name(self) -> str:
        parts = []
        if self.decoupled:
            parts.append("decoupled")
        if self.max_batch_size > 0:
            # any max_batch_size: the dynamic batcher is what puts several requests in one execute
            parts.append(
                ("batched-delayed" if self.queue_delay_us > 0 else "batched") if self.dynamic_batching else "max-batch"
            )
        if self.instances > 1:
            parts.append(f"instances-{self.instances}")
        return ",".join(parts) or "unbatched"

    @property
    def in_flight(self) -> int:
        """Requests a fixed count keeps in flight in this shape (``--requests-in-flight``): enough
        for the dynamic batcher to form batches above one (``GROUP``) and for every instance to
        run; one for an unbatched model of one instance."""
        return max(GROUP if self.dynamic_batching else 1, self.instances)

    def settings(self) -> dict:
        """The ``RunConfig`` fields that serve the rig's template model in this shape."""
        return dict(
            instances=self.instances,
            max_batch_size=self.max_batch_size,
            dynamic_batching=self.dynamic_batching,
            decoupled=self.decoupled,
            queue_delay_us=self.queue_delay_us if self.dynamic_batching else 0,
        )


def settings_of(x) -> tuple:
    """The shape settings a ``Shape`` or a ``RunConfig`` holds (what ``Shape.settings`` gives), to compare
    a config with a shape."""
    return (
        x.instances,
        x.max_batch_size,
        x.dynamic_batching,
        x.decoupled,
        x.queue_delay_us if x.dynamic_batching else 0,
    )


DEFAULTS = settings_of(Shape())  # the template's own: unbatched, one instance


def parse(name: str) -> Shape:
    """The shape a name stands for (the inverse of ``Shape.name``); unknown words: one line."""
    fields: dict = {}
    for part in (p.strip() for p in name.split(",")):
        if part == "unbatched":
            continue
        if part == "decoupled":
            fields["decoupled"] = True
        elif part == "batched":
            fields.update(max_batch_size=BATCH, dynamic_batching=True)
        elif part == "batched-delayed":
            fields.update(max_batch_size=BATCH, dynamic_batching=True, queue_delay_us=QUEUE_DELAY_US)
        elif part == "max-batch":
            fields.update(max_batch_size=BATCH, dynamic_batching=False)
        elif m := re.fullmatch(r"instances-(\d+)", part):
            fields["instances"] = int(m.group(1))
        else:
            raise RigError(
                f"unknown model shape {name!r}: a shape is unbatched, batched, batched-delayed, "
                "max-batch, instances-N or decoupled "
                "(joined with commas: decoupled,instances-2)"
            )
    return Shape(**fields)


def of_config(config: dict) -> str:
    """The shape of a model from its configuration (a parsed ``config.pbtxt``, as
    ``rig.parent.repository.read_config`` gives it, or the core's JSON)."""

    def first(v, default):
        return (v[0] if isinstance(v, list) and v else v) if v not in (None, []) else default

    groups = config.get("instance_group") or []
    if isinstance(groups, dict):
        groups = [groups]
    instances = sum(int(first(g.get("count"), 1)) for g in groups) if groups else 1
    policy = first(config.get("model_transaction_policy"), {}) or {}
    batcher = config.get("dynamic_batching")
    delay = first((first(batcher, {}) or {}).get("max_queue_delay_microseconds"), 0) if batcher is not None else 0
    return Shape(
        max_batch_size=int(first(config.get("max_batch_size"), 0)),
        dynamic_batching=batcher is not None,
        queue_delay_us=int(delay or 0),
        instances=instances,
        decoupled=str(first(policy.get("decoupled"), "")).lower() == "true"
        or first(policy.get("decoupled"), False) is True,
    ).name


def _parsed(name) -> Shape | None:
    try:
        return parse(str(name or "unbatched"))
    except RigError:
        return None


def takes_batches(name) -> bool:
    """Whether a shape's model has a batch dimension (``batched``, ``batched-delayed``,
    ``max-batch``, alone or joined with others); an unknown name: no."""
    s = _parsed(name)
    return s is not None and s.max_batch_size > 0


def dynamic(name) -> bool:
    """Whether a shape's model has the dynamic batcher (``batched``, ``batched-delayed``)."""
    s = _parsed(name)
    return s is not None and s.dynamic_batching


def nearest(shape: str, among: tuple[str, ...]) -> str:
    """The shape of ``among`` a cell in ``shape`` is held to: itself, else the same without what
    ``among`` has no row for: its queue delay (``batched-delayed`` to ``batched``), then each of its
    parts alone, batching first (``batched-delayed,instances-2`` to ``batched-delayed``, ``batched``,
    then ``instances-2``), else the first (a scenario's default)."""
    if shape in among or (s := _parsed(shape)) is None:
        return shape if shape in among else among[0]
    batching = Shape(
        max_batch_size=s.max_batch_size, dynamic_batching=s.dynamic_batching, queue_delay_us=s.queue_delay_us
    )
    for c in (s, batching, Shape(decoupled=s.decoupled), Shape(instances=s.instances)):
        for name in dict.fromkeys((c.name, dataclasses.replace(c, queue_delay_us=0).name)):
            if name in among and c != Shape():
                return name
    return among[0]


def with_instances(config_text: str, count: int) -> str:
    """A ``config.pbtxt``'s text with every instance group's ``count`` set to ``count`` (a group
    added where it has none)."""
    if re.search(r"\binstance_group\b", config_text):
        return re.sub(r"(\binstance_group\s*:?\s*\[[^\]]*?\bcount\s*:\s*)\d+", rf"\g<1>{count}", config_text)
    return config_text.rstrip("\n") + f"\ninstance_group [ {{ count: {count} kind: KIND_CPU }} ]\n"

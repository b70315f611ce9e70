"""steady: every user from the start, for the whole run. Each keeps ``--in-flight`` requests in
flight through the engine's fast path (a TritonUser without tasks of its own)."""

from rig.worker.load import RigShape, TritonUser


class Steady(TritonUser):
    pass


class SteadyShape(RigShape):
    pass  # all users, from start to end

"""soak: the steady load, meant for long runs (the nightly soak's workload)."""

from rig.worker.load import RigShape, TritonUser


class Soak(TritonUser):
    pass


class SoakShape(RigShape):
    pass  # all users, from start to end

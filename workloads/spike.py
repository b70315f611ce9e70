"""spike: a quarter of ``--users``, with all of them in the middle fifth of the run."""

from rig.worker.load import RigShape, TritonUser


class Spike(TritonUser):
    pass


class SpikeShape(RigShape):
    def users_at(self, t):
        return self.users if 0.4 * self.seconds <= t < 0.6 * self.seconds else self.users // 4

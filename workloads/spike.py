"""spike: a quarter of ``--users``, with all of them in the middle fifth of the run."""

from rig.load import RigShape, TritonUser


class Spike(TritonUser):
    pass


class SpikeShape(RigShape):
    def tick(self):
        t = self.get_run_time()
        if t >= self.seconds:
            return None
        base = max(1, self.users // 4)
        return (self.users if 0.4 * self.seconds <= t < 0.6 * self.seconds else base, 100)

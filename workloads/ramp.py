"""ramp: from one user to ``--users``, linearly over the first 80 % of the run, then hold."""

from rig.load import RigShape, TritonUser


class Ramp(TritonUser):
    pass


class RampShape(RigShape):
    def tick(self):
        t = self.get_run_time()
        if t >= self.seconds:
            return None
        frac = min(1.0, t / (0.8 * self.seconds))
        return (max(1, round(1 + frac * (self.users - 1))), 100)

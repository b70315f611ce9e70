"""ramp: from one user to ``--users``, linearly over the first 80 % of the run, then hold."""

from rig.worker.load import RigShape, TritonUser


class Ramp(TritonUser):
    pass


class RampShape(RigShape):
    def users_at(self, t):
        return 1 + min(1.0, t / (0.8 * self.seconds)) * (self.users - 1)

"""step: four equal steps up to ``--users``."""

from rig.worker.load import RigShape, TritonUser


class Step(TritonUser):
    pass


class StepShape(RigShape):
    def users_at(self, t):
        return self.users * (min(3, int(4 * t / self.seconds)) + 1) / 4

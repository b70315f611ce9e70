"""step: four equal steps up to ``--users``."""

from rig.load import RigShape, TritonUser


class Step(TritonUser):
    pass


class StepShape(RigShape):
    def tick(self):
        t = self.get_run_time()
        if t >= self.seconds:
            return None
        step = min(3, int(4 * t / self.seconds))
        return (max(1, round(self.users * (step + 1) / 4)), 100)

"""steady: every user from the start, for the whole run. Each keeps ``--in-flight`` requests in
flight through the engine's fast path (a TritonUser without tasks of its own)."""

from rig.load import RigShape, TritonUser


class Steady(TritonUser):
    pass


class SteadyShape(RigShape):
    def tick(self):
        return (self.users, self.users * 100) if self.get_run_time() < self.seconds else None

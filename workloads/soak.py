"""soak: the steady load, meant for long runs (the nightly soak's workload)."""

from rig.load import RigShape, TritonUser


class Soak(TritonUser):
    pass


class SoakShape(RigShape):
    def tick(self):
        return (self.users, self.users * 100) if self.get_run_time() < self.seconds else None

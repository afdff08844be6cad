"""Elasticity in Python: a running elastic job grows to its maximum when
enough GPUs are free, at a fixed cost; a job that loses a node keeps running
on what it has left."""

import tessel


class GrowWhenFree:
    def __init__(self, cost_seconds: float = 60.0):
        self.cost_seconds = cost_seconds

    def resize(self, view):
        free = view.cluster().free_gpus()
        proposals = []
        for job in view.active():
            grow = job.spec.max_gpus - job.allocation.gpu_count()
            if job.running() and job.spec.elastic() and 0 < grow <= free:
                free -= grow
                proposals.append(tessel.ResizeProposal(job.spec.id, job.spec.max_gpus,
                                                       reason=f"{grow} more GPUs are free"))
        return proposals

    def reconfiguration_seconds(self, view, job, from_, to):
        return self.cost_seconds

    def keep_after_loss(self, view, job, remaining):
        return True

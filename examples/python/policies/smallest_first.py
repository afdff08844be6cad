"""Smallest GPU demand first: an allocation policy written in Python.

Waiting jobs run in order of how many GPUs they ask for, the smallest first,
ties by arrival. With preemptive = true a running job is ranked like the
others, so a queue of smaller jobs can preempt it; otherwise running jobs
keep their GPUs and rank first.
"""

from typing import Annotated

import tessel


class SmallestFirst:
    def __init__(self, preemptive: Annotated[bool, "rank running jobs with the rest, so they may be preempted"] = False):
        self.preemptive = preemptive

    def time_sensitive(self):
        return False  # the order depends only on the jobs, not on the time

    def allocate(self, view):
        jobs = list(view.active())
        if self.preemptive:
            order = sorted(jobs, key=lambda job: job.spec.gpus)  # stable: arrival order among ties
        else:
            order = [job for job in jobs if job.running()]
            order += sorted((job for job in jobs if not job.running()), key=lambda job: job.spec.gpus)
        # Grant(job): what it holds if it runs, else what it asks for.
        return tessel.AllocationPlan(
            [tessel.Grant(job, reason=f"asks for {job.spec.gpus} GPUs; the smallest demand runs first") for job in order])

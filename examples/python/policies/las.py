"""Least attained service first, in Python: the C++ `las` plugin's rule.

Every active job is ranked by the service it has had (GPU-seconds or
seconds, as [scheduler] attained_service says), the least first, ties by
arrival. A waiting job that does not fit preempts lower-ranked running jobs.

A round's plan is provisional: the queue alone, which stands while it fits
on free GPUs. Only in a round where a waiting job would preempt does the
core ask allocate_whole for every job's rank, so most rounds cost what the
queue costs, not what every running job costs.
"""

import tessel


class Las:
    def reads_progress(self):
        # It ranks by view.attained_service(job), current whether or not
        # rounds account running jobs, so they need not.
        return False

    def allocate(self, view):
        return tessel.AllocationPlan(self.ranked(view, view.waiting()), provisional=True,
                                     keep_running="running; the least attained service runs first")

    def allocate_whole(self, view):
        return tessel.AllocationPlan(self.ranked(view, view.active()))

    @staticmethod
    def ranked(view, jobs):
        order = sorted(jobs, key=view.attained_service)  # stable: arrival among ties
        return [tessel.Grant(job, reason="the least attained service runs first") for job in order]

"""Least attained service first, in Python: the C++ `las` plugin's rule.

Every active job is ranked by the service it has had (GPU-seconds or
seconds, as [scheduler] attained_service says), the least first, ties by
arrival. A waiting job that does not fit preempts lower-ranked running jobs.
"""

import tessel


class Las:
    def reads_progress(self):
        # It ranks by view.attained_service(job), current whether or not
        # rounds account running jobs, so they need not.
        return False

    def allocate(self, view):
        order = sorted(view.active(), key=view.attained_service)  # stable: arrival among ties
        return tessel.AllocationPlan([tessel.Grant(job, reason="the least attained service runs first")
                                      for job in order])

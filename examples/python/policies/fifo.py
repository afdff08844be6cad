"""First in, first out, in Python: the C++ `fifo` plugin's rule (without
its GPU-type choice), as a first Python policy to read.

Running jobs keep their GPUs; waiting jobs follow in arrival order. Without
backfill the queue stops at the first job that does not fit.
"""

import tessel


class Fifo:
    def __init__(self, backfill: bool = False):
        self.backfill = backfill

    def time_sensitive(self):
        return False  # the order changes only when jobs come and go

    def allocate(self, view):
        # The queue alone, view.waiting(), in arrival order; the running jobs
        # keep their GPUs unlisted (keep_running), ranked ahead of it, as if
        # listed. A round then costs what the queue costs, not what every
        # running job costs. Grant(job): what it asks for.
        return tessel.AllocationPlan([tessel.Grant(job, reason="served in arrival order") for job in view.waiting()],
                                     stop_at_first_unplaced=not self.backfill,
                                     keep_running="running; FIFO never preempts")

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
        active = view.active()  # in arrival order
        # Grant(job): what it holds if it runs, else what it asks for.
        ranked = [tessel.Grant(job, reason="running; FIFO never preempts") for job in active if job.running()]
        ranked += [tessel.Grant(job, reason="served in arrival order") for job in active if job.waiting()]
        return tessel.AllocationPlan(ranked, stop_at_first_unplaced=not self.backfill)

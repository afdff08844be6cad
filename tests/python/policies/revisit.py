"""An allocation policy that asks to be revisited `period` seconds after
each round, up to `until`: with [simulation] rounds = "events" the simulator
holds a round exactly then. Its reasons carry the round's time, so that each
round's grant is recorded."""

import tessel


class EveryPeriod:
    def __init__(self, period: float = 250.0, until: float = 1000.0):
        self.period = period
        self.until = until

    def time_sensitive(self):
        return True

    def allocate(self, view):
        now = view.now()
        ranked = [tessel.Grant(job, reason=f"round at {now:g}") for job in view.active()]
        revisit = now + self.period if now + self.period <= self.until else float("inf")
        return tessel.AllocationPlan(ranked, revisit_at=revisit)

"""What a Python policy returns: the C++ SDK's decisions (tessel/stages.hpp),
field for field, each with its reason.

They are plain Python objects: a policy makes one per job per round, and a
Python object is made several times faster than a C++ one. The bridge reads
them once, when the stage call returns, and checks them as it does a C++
plugin's.
"""

__all__ = ["AdmissionDecision", "AllocationPlan", "Grant", "PlacementChoice", "ResizeProposal"]


class AdmissionDecision:
    """Admit, hold or reject a pending job (verdict: tessel.AdmissionVerdict)."""

    __slots__ = ("job", "verdict", "reason")

    def __init__(self, job, verdict, reason=""):
        self.job = job  # a JobState, or a job id
        self.verdict = verdict
        self.reason = reason


class Grant:
    """A job the policy wants running, with what it should get. Without
    `resources`, what the job holds if it runs, else its request
    (current_or_requested in C++)."""

    __slots__ = ("job", "resources", "reason")

    def __init__(self, job, resources=None, reason=""):
        self.job = job  # a JobState, or a job id (then resources are needed)
        self.resources = resources  # a tessel.Resources, or None
        self.reason = reason


class AllocationPlan:
    """Grants, highest priority first. With stop_at_first_unplaced, no job
    after the first that cannot be placed starts (FIFO without backfill)."""

    __slots__ = ("ranked", "stop_at_first_unplaced", "revisit_at", "keep_running", "provisional")

    def __init__(
        self, ranked=(), stop_at_first_unplaced=False, revisit_at=float("inf"), keep_running=None, provisional=False
    ):
        self.ranked = list(ranked)
        self.stop_at_first_unplaced = stop_at_first_unplaced
        # When the plan may change with no event (read with [simulation] rounds = "events").
        self.revisit_at = revisit_at
        # An incremental plan: a reason (str) with which every running job
        # that `ranked` leaves out keeps what it holds, ranked first in
        # arrival order; `ranked` then lists only view.waiting(), say.
        self.keep_running = keep_running
        # With keep_running: the plan stands while every job it lists fits on
        # free GPUs; otherwise the core calls the policy's allocate_whole(view)
        # for the plan that ranks the running jobs too (LAS: the queue alone
        # here, every job a waiting one outranks there).
        self.provisional = provisional


class PlacementChoice:
    """The GPUs chosen (ids), or none: the job does not fit now."""

    __slots__ = ("gpus", "reason")

    def __init__(self, gpus, reason=""):
        self.gpus = list(gpus)
        self.reason = reason

    def placed(self):
        return bool(self.gpus)


class ResizeProposal:
    """A new size for a running elastic job, and how to use it (a
    tessel.JobLayout; None: as the elasticity policy's arrange() says)."""

    __slots__ = ("job", "gpus", "layout", "reason")

    def __init__(self, job, gpus, layout=None, reason=""):
        self.job = job  # a JobState, or a job id
        self.gpus = gpus
        self.layout = layout
        self.reason = reason

"""Admission in Python: jobs of at most `max_gpus` GPUs enter, larger ones
are rejected."""

import tessel


class AtMost:
    def __init__(self, max_gpus: int = 1_000_000):
        if max_gpus < 1:
            raise tessel.ArgumentError("max_gpus", "must be at least 1")
        self.max_gpus = max_gpus

    def time_sensitive(self):
        return False

    def admit(self, view):
        return [tessel.AdmissionDecision(job.spec.id, tessel.AdmissionVerdict.admit, f"asks for {job.spec.gpus} GPUs")
                if job.spec.gpus <= self.max_gpus else
                tessel.AdmissionDecision(job.spec.id, tessel.AdmissionVerdict.reject,
                                         f"asks for {job.spec.gpus} GPUs, more than {self.max_gpus}")
                for job in view.pending()]

"""view.waiting() in Python: the queue the core keeps, the active jobs that
wait in arrival order (issue 17's incremental plans)."""

import tessel
from conftest import python_stage, small_cluster

POLICY = '''
import tessel


class QueueFifo:
    """FIFO that reads the queue from view.waiting() and checks it."""

    def time_sensitive(self):
        return False

    def allocate(self, view):
        active = list(view.active())
        waiting = list(view.waiting())
        assert [j.spec.id for j in waiting] == [j.spec.id for j in active if j.waiting()]
        ranked = [tessel.Grant(job) for job in active if job.running()]
        ranked += [tessel.Grant(job) for job in waiting]
        return tessel.AllocationPlan(ranked, stop_at_first_unplaced=True)


class IncrementalFifo:
    """FIFO as an incremental plan: the queue alone; the core keeps the rest running."""

    def time_sensitive(self):
        return False

    def allocate(self, view):
        return tessel.AllocationPlan([tessel.Grant(job) for job in view.waiting()], stop_at_first_unplaced=True,
                                     keep_running="running; FIFO never preempts")
'''


def per_job(res):
    jobs = res.jobs.sort_values(["run_id", "job_id"])
    return list(zip(jobs["job_id"], jobs["first_start"], jobs["finish"]))


def test_python_fifo_over_view_waiting_equals_the_cpp_fifo(tmp_path, write):
    module = write("queue_fifo.py", POLICY)
    extra = '\n[failures]\njob_failure_probability = 0.1\nmax_retries = 1000\n'  # crashed jobs wait again
    native = tessel.run(write("cpp.toml", small_cluster(extra=extra)), db=tmp_path / "cpp.db")
    python = tessel.run(write("py.toml", small_cluster(allocation=python_stage(module, "QueueFifo"), extra=extra)),
                        db=tmp_path / "py.db")
    assert per_job(python) == per_job(native)
    assert (native.jobs["attempts"] > 1).any()


def test_a_python_plan_of_the_queue_alone_keeps_the_running_jobs(tmp_path, write):
    module = write("queue_fifo.py", POLICY)
    extra = '\n[failures]\njob_failure_probability = 0.1\nmax_retries = 1000\n'
    native = tessel.run(write("cpp.toml", small_cluster(extra=extra)), db=tmp_path / "cpp.db")
    python = tessel.run(write("py.toml", small_cluster(allocation=python_stage(module, "IncrementalFifo"), extra=extra)),
                        db=tmp_path / "py.db")
    assert per_job(python) == per_job(native)

"""view.waiting() in Python: the queue the core keeps, the active jobs that
wait in arrival order (issue 17's incremental plans)."""

import tessel
from conftest import cli, python_stage, small_cluster

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


WATCHING = '''
import tessel


class WatchingFifo:
    """FIFO that notes, each round, the progress it sees of the running jobs."""

    def __init__(self, declare: str = "absent"):
        self.declare = declare
        self.seen = []

    def reads_progress(self):
        if self.declare == "absent":
            return True  # as if not defined: the default
        return {"no": False, "bad": "no"}[self.declare]

    def time_sensitive(self):
        return False

    def allocate(self, view):
        for job in view.active():
            if job.running():
                self.seen.append(job.executed_work)
        with open("seen.txt", "a") as out:
            out.write(f"{max(self.seen, default=0)}\\n")
        return tessel.AllocationPlan([tessel.Grant(job) for job in view.waiting()], stop_at_first_unplaced=True,
                                     keep_running="running; FIFO never preempts")
'''


def test_a_python_policy_may_declare_it_reads_no_progress(tmp_path, write, monkeypatch):
    """reads_progress() False lets rounds leave running jobs' progress alone (issue 17's lazy accounting):
    the same jobs as the C++ fifo, and the policy sees no running job's progress move."""
    module = write("watching.py", WATCHING)
    monkeypatch.chdir(tmp_path)
    native = tessel.run(write("cpp.toml", small_cluster()), db=tmp_path / "cpp.db")
    seen_max = {}
    for declare in ("absent", "no"):
        (tmp_path / "seen.txt").unlink(missing_ok=True)
        run = tessel.run(write(f"{declare}.toml", small_cluster(allocation=python_stage(module, "WatchingFifo",
                                                                                        declare=declare))),
                         db=tmp_path / f"{declare}.db")
        assert per_job(run) == per_job(native)
        seen_max[declare] = max(float(line) for line in (tmp_path / "seen.txt").read_text().split())
    assert seen_max["absent"] > 0   # accounted every round
    assert seen_max["no"] == 0      # FIFO never preempts, so a running job is settled only when it ends


def test_a_python_reads_progress_that_is_not_a_bool_is_refused_with_its_class_line(tmp_path, write):
    module = write("watching.py", WATCHING)
    config = write("bad.toml", small_cluster(allocation=python_stage(module, "WatchingFifo", declare="bad")))
    result = cli("run", config, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "watching.py:" in result.stderr
    assert "WatchingFifo.reads_progress() returned" in result.stderr
    assert "not True or False" in result.stderr


SERVICE = '''
import json

import tessel


class ServiceFifo:
    """FIFO that writes, each round, each running job's service: the stored
    field when rounds account progress, view.attained_service() when not."""

    def __init__(self, lazy: bool = False):
        self.lazy = lazy

    def reads_progress(self):
        return not self.lazy

    def time_sensitive(self):
        return False

    def allocate(self, view):
        running = [j for j in view.active() if j.running()]
        seen = {j.spec.id: [view.attained_service(j) if self.lazy else j.attained_service,
                            view.gpu_seconds(j) if self.lazy else j.gpu_seconds] for j in running}
        if not self.lazy:  # accounted every round: the view adds nothing
            assert all(seen[j.spec.id] == [view.attained_service(j), view.gpu_seconds(j)] for j in running)
        elif any(j.attained_service != view.attained_service(j) for j in running):
            open("stale.txt", "w").close()  # the stored field lags: rounds really skipped accounting
        with open(f"service-{self.lazy}.jsonl", "a") as out:
            out.write(json.dumps([view.now(), sorted(seen.items())]) + "\\n")
        return tessel.AllocationPlan([tessel.Grant(job) for job in view.waiting()], stop_at_first_unplaced=True,
                                     keep_running="running; FIFO never preempts")
'''


def test_a_python_policy_reading_no_progress_reads_current_service_from_the_view(tmp_path, write, monkeypatch):
    """view.attained_service(job) and view.gpu_seconds(job) give, in rounds that
    skip per-job accounting, what the accounted fields give when rounds keep them."""
    import json
    module = write("service.py", SERVICE)
    monkeypatch.chdir(tmp_path)
    rounds = {}
    for lazy in (False, True):
        tessel.run(write(f"{lazy}.toml", small_cluster(allocation=python_stage(module, "ServiceFifo", lazy=lazy))),
                   db=tmp_path / f"{lazy}.db")
        rounds[lazy] = [json.loads(line) for line in (tmp_path / f"service-{lazy}.jsonl").read_text().split("\n")
                        if line]
    assert any(seen for _, seen in rounds[False])  # jobs ran while rounds were held
    assert (tmp_path / "stale.txt").exists()
    assert len(rounds[True]) == len(rounds[False])
    for (now, lazy_seen), (_, accounted) in zip(rounds[True], rounds[False]):
        assert [job for job, _ in lazy_seen] == [job for job, _ in accounted], now
        for (_, (service, gpu_seconds)), (_, (want_service, want_gpu_seconds)) in zip(lazy_seen, accounted):
            assert abs(service - want_service) <= 1e-6 * max(1.0, want_service), now
            assert abs(gpu_seconds - want_gpu_seconds) <= 1e-6 * max(1.0, want_gpu_seconds), now


FORGETFUL = '''
import tessel


class ForgetfulLas:
    """Provisional plans, and no allocate_whole to give the whole one."""

    def allocate(self, view):
        return tessel.AllocationPlan([tessel.Grant(job) for job in view.waiting()], keep_running="kept",
                                     provisional=True)
'''


def test_a_python_provisional_plan_without_allocate_whole_is_refused_with_its_class_line(tmp_path, write):
    """The examples' las.py makes provisional plans (test_policies checks it against the C++ las);
    a class that makes them without allocate_whole is the user's error, at its first preemption."""
    module = write("forgetful.py", FORGETFUL)
    config = write("forgetful.toml", small_cluster(allocation=python_stage(module, "ForgetfulLas")))
    result = cli("run", config, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "forgetful.py:" in result.stderr
    assert "ForgetfulLas.allocate() returned a provisional plan, and the class defines no allocate_whole(view)" \
        in result.stderr

"""Policies written in Python, one per stage, run by the core as plugins:
the same decisions as the C++ plugins they mirror, the same arguments
checking, at any -j."""

import re

import pytest
import tessel
from conftest import EXAMPLES, POLICIES, cli, python_stage, query, small_cluster


def per_job(res):
    """(job id, first start, finish) of every job, in id order."""
    jobs = res.jobs.sort_values(["run_id", "job_id"])
    return list(zip(jobs["job_id"], jobs["first_start"], jobs["finish"]))


@pytest.mark.parametrize("cpp, module, cls", [("fifo", "fifo.py", "Fifo"), ("las", "las.py", "Las")])
@pytest.mark.parametrize("completion", ["exact", "round"])
def test_python_fifo_and_las_equal_the_cpp_plugins_job_by_job(tmp_path, write, cpp, module, cls, completion):
    extra = f'\n[simulation]\ncompletion = "{completion}"\n'
    native = tessel.run(write("cpp.toml", small_cluster(allocation=f'{{ plugin = "{cpp}" }}', extra=extra)),
                        db=tmp_path / "cpp.db")
    python = tessel.run(write("py.toml", small_cluster(allocation=python_stage(EXAMPLES / module, cls), extra=extra)),
                        db=tmp_path / "py.db")
    assert per_job(python) == per_job(native)
    assert python.report()["preemptions"][0] == native.report()["preemptions"][0]
    if cpp == "las":
        assert native.report()["preemptions"][0] > 0  # the workload makes LAS preempt


def test_python_admission_rejects_what_it_says(tmp_path, write):
    admission = python_stage(POLICIES / "admission.py", "AtMost", max_gpus=2)
    text = small_cluster(jobs=60).replace('allocation = { plugin = "fifo" }',
                                          f'allocation = {{ plugin = "fifo" }}\nadmission = {admission}')
    res = tessel.run(write("a.toml", text), db=tmp_path / "a.db")
    jobs = res.jobs
    assert set(jobs.loc[jobs["gpus"] > 2, "status"]) == {"rejected"}
    assert set(jobs.loc[jobs["gpus"] <= 2, "status"]) == {"finished"}


def test_python_placement_takes_the_tightest_node(tmp_path, write):
    # Nodes of 4 and 8 GPUs. A 2-GPU job goes to the 4-GPU node, the tightest
    # that fits it, so a 6-GPU job arriving next starts at once.
    write("trace.csv", "arrival,gpus,duration\n0,2,3600\n10,6,3600\n")
    placement = python_stage(EXAMPLES / "tightest_fit.py", "TightestFit")
    experiment = write("p.toml", f"""
        [cluster]
        groups = [{{ count = 1, gpus_per_node = 4 }}, {{ count = 1, gpus_per_node = 8 }}]
        [workload]
        kind = "csv"
        path = "trace.csv"
        [scheduler]
        round_seconds = 10
        allocation = {{ plugin = "fifo" }}
        placement = {placement}
        [output]
        database = "p.db"
        decisions = true
        """)
    res = tessel.run(experiment, db=tmp_path / "p.db")
    jobs = res.jobs.set_index("job_id")
    assert jobs.loc[1, "queueing_s"] == 0
    placed = res.decisions
    placed = placed[(placed["job_id"] == 0) & (placed["stage"] == "placement")]
    assert "node n0 has 4 GPUs that fit it" in placed["reason"].iloc[0]


def test_python_elasticity_grows_jobs_at_its_own_cost(tmp_path, write):
    # A rigid 3-GPU job leaves at 600 s; the elastic job then grows from 1 GPU to 4.
    write("trace.csv", "arrival,gpus,duration,name,tenant,vc,model,min_gpus,max_gpus\n"
                       "0,3,600,r,u,v,m,3,3\n0,1,36000,e,u,v,m,1,4\n")
    elasticity = python_stage(POLICIES / "elasticity.py", "GrowWhenFree", cost_seconds=120.0)
    experiment = write("e.toml", f"""
        [cluster]
        nodes = 1
        gpus_per_node = 4
        [workload]
        kind = "csv"
        path = "trace.csv"
        [scheduler]
        round_seconds = 300
        allocation = {{ plugin = "fifo" }}
        placement = {{ plugin = "consolidated" }}
        elasticity = {elasticity}
        [output]
        database = "e.db"
        """)
    res = tessel.run(experiment, db=tmp_path / "e.db")
    resizes = res.resizes
    assert list(zip(resizes["from_gpus"], resizes["to_gpus"], resizes["cost_seconds"])) == [(1, 4, 120.0)]
    # 600 s on 1 GPU, 120 s lost to the resize, the remaining 35,400 GPU-s on 4 GPUs.
    assert res.jobs["jct_s"][1] == pytest.approx(600 + 120 + 35400 / 4)


def test_a_sweep_of_python_policies_gives_the_same_results_at_any_parallelism(tmp_path, write):
    text = small_cluster(jobs=60, allocation=python_stage(EXAMPLES / "las.py", "Las"),
                         placement=python_stage(EXAMPLES / "tightest_fit.py", "TightestFit"), extra="""
        [sweep]
        "workload.jobs_per_hour" = [6, 12]
        seeds = [1, 2]
        """)
    experiment = write("s.toml", text)
    one = tessel.run(experiment, db=tmp_path / "one.db", jobs=1)
    many = tessel.run(experiment, db=tmp_path / "many.db", jobs=4)

    def by_point(res):
        runs = res.runs.set_index("id")
        jobs = res.jobs
        return sorted((runs.loc[r, "axes"], job, start, finish)
                      for r, job, start, finish in zip(jobs["run_id"], jobs["job_id"], jobs["first_start"], jobs["finish"]))

    assert by_point(one) == by_point(many)


def test_the_cli_runs_python_policies_and_explains_their_decisions(tmp_path, write):
    allocation = python_stage(EXAMPLES / "smallest_first.py", "SmallestFirst", preemptive=True)
    experiment = write("cli.toml", small_cluster(jobs=40, allocation=allocation, extra="decisions = true\n"))
    run = cli("run", experiment, "--db", tmp_path / "cli.db", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "python" in run.stderr
    explained = cli("explain", tmp_path / "cli.db", "3")
    assert "smallest demand runs first" in explained.stdout


def test_declared_arguments_are_checked_like_a_cpp_plugins(tmp_path, write):
    def run_with(**arguments):
        stage = python_stage(EXAMPLES / "smallest_first.py", "SmallestFirst", **arguments)
        return cli("run", write("args.toml", small_cluster(jobs=10, allocation=stage)), "--db", tmp_path / "a.db")

    unknown = run_with(preemptve=True)
    assert unknown.returncode == 2
    assert re.search(r"args\.toml:13:\d+: unknown argument 'preemptve' for allocation plugin 'python' "
                     r"\(valid: module, class, preemptive\)", unknown.stderr)
    wrong_type = run_with(preemptive=3)
    assert wrong_type.returncode == 2
    assert "argument 'preemptive' of allocation plugin 'python' expects boolean, got an integer" in wrong_type.stderr

    stage = python_stage(POLICIES / "admission.py", "AtMost", max_gpus=0)
    text = small_cluster(jobs=10).replace('allocation = { plugin = "fifo" }',
                                          f'allocation = {{ plugin = "fifo" }}\nadmission = {stage}')
    refused = cli("run", write("refused.toml", text), "--db", tmp_path / "r.db")
    assert refused.returncode == 2
    assert "refused.toml:14:" in refused.stderr and "argument 'max_gpus'" in refused.stderr
    assert "must be at least 1" in refused.stderr


def test_plugins_lists_a_python_classes_arguments(tmp_path):
    listed = cli("plugins", "-v", "--kind", "allocation", "--python", EXAMPLES / "smallest_first.py")
    assert listed.returncode == 0, listed.stderr
    assert "SmallestFirst" in listed.stdout
    assert "preemptive (boolean, default false): rank running jobs with the rest" in listed.stdout


def test_every_argument_type_a_class_can_declare(tmp_path, write):
    write("policies/typed.py", """\
        from typing import Annotated, Literal
        import tessel

        class Typed:
            def __init__(self, thresholds: list[float] = [3600.0], names: list[str] = [],
                         weights: dict[str, float] = {}, mode: Literal["fast", "slow"] = "fast",
                         rounds: Annotated[int, "how many rounds"] = 1, scale: float = 1.0, on: bool = True,
                         label: str = "x"):
                self.seen = (thresholds, names, weights, mode, rounds, scale, on, label)
                assert self.seen == ([60.0, 120.0], ["a"], {"vc": 0.5}, "slow", 3, 2.0, False, "y"), self.seen

            def allocate(self, view):
                return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
        """)
    stage = python_stage("policies/typed.py", "Typed", thresholds=[60, 120], names=["a"], weights={"vc": 0.5},
                         mode="slow", rounds=3, scale=2, on=False, label="y")
    run = cli("run", write("typed.toml", small_cluster(jobs=5, allocation=stage)), "--db", tmp_path / "t.db")
    assert run.returncode == 0, run.stderr
    listed = cli("plugins", "-v", "--kind", "allocation", "--python", tmp_path / "policies" / "typed.py")
    assert "thresholds (list of numbers, default [3600.0])" in listed.stdout
    assert "mode (string, default \"fast\", one of fast|slow)" in listed.stdout
    assert "rounds (integer, default 1): how many rounds" in listed.stdout

    stage = python_stage("policies/typed.py", "Typed", mode="medium")
    wrong = cli("run", write("wrong.toml", small_cluster(jobs=5, allocation=stage)), "--db", tmp_path / "w.db")
    assert wrong.returncode == 2
    assert "unknown value 'medium' (valid: fast, slow)" in wrong.stderr


def test_a_policy_that_draws_numbers_gets_the_runs_seed_and_repeats_at_any_parallelism(tmp_path, write):
    write("policies/shuffled.py", """\
        import random
        import tessel

        class Shuffled:
            def __init__(self, seed):
                self.rng = random.Random(seed)  # its own generator: no other run shares it

            def allocate(self, view):
                jobs = list(view.active())
                self.rng.shuffle(jobs)
                return tessel.AllocationPlan([tessel.Grant(job) for job in jobs])
        """)
    experiment = write("s.toml", small_cluster(jobs=40, allocation=python_stage("policies/shuffled.py", "Shuffled"),
                                               extra="[sweep]\nseeds = [1, 2, 3, 4]\n"))
    one = tessel.run(experiment, db=tmp_path / "one.db", jobs=1).jobs
    many = tessel.run(experiment, db=tmp_path / "many.db", jobs=4).jobs
    one_by_seed = one.merge(tessel.open(tmp_path / "one.db").runs[["id", "seed"]], left_on="run_id", right_on="id")
    many_by_seed = many.merge(tessel.open(tmp_path / "many.db").runs[["id", "seed"]], left_on="run_id", right_on="id")
    columns = ["seed", "job_id", "first_start", "finish"]
    assert (one_by_seed[columns].sort_values(["seed", "job_id"]).values.tolist()
            == many_by_seed[columns].sort_values(["seed", "job_id"]).values.tolist())
    assert len(set(one.groupby("run_id")["finish"].sum())) > 1  # the seeds make different runs


def test_left_out_stop_stops_a_running_job_the_plan_leaves_out(tmp_path, write):
    # [scheduler] left_out: the policy grants both jobs at 0, then only job 0.
    # "keep": job 1 runs on (its GPU is needed by nobody) and ends at 600.
    # "stop": job 1 stops at the round of 300 with 300 s done, waits until
    # job 0 ends (1000; next round 1200) and ends at 1500.
    write("policies/oldest.py", """\
        import tessel

        class OldestAfterStart:
            def allocate(self, view):
                jobs = list(view.active())
                return tessel.AllocationPlan([tessel.Grant(job) for job in (jobs if view.now() == 0 else jobs[:1])])
        """)
    write("trace.csv", "arrival,gpus,duration\n0,1,1000\n0,1,600\n")
    stage = python_stage("policies/oldest.py", "OldestAfterStart")
    finish = {}
    for rule in ("keep", "stop"):
        experiment = write(f"{rule}.toml", f"""\
            [cluster]
            nodes = 1
            gpus_per_node = 4

            [workload]
            kind = "csv"
            path = "trace.csv"

            [scheduler]
            round_seconds = 300
            left_out = "{rule}"
            allocation = {stage}
            placement = {{ plugin = "first_fit" }}
            """)
        jobs = tessel.run(experiment, db=tmp_path / f"{rule}.db").jobs.sort_values("job_id")
        finish[rule] = jobs["finish"].tolist()
    assert finish["keep"] == [1000, 600]
    assert finish["stop"] == [1000, 1500]


def _revisit_experiment(write, period, rounds):
    write("trace.csv", "arrival,gpus,duration\n0,1,2000\n")
    allocation = python_stage(POLICIES / "revisit.py", "EveryPeriod", period=period, until=1000.0)
    return write("r.toml", f"""
        [cluster]
        nodes = 1
        gpus_per_node = 4
        [workload]
        kind = "csv"
        path = "trace.csv"
        [scheduler]
        round_seconds = 300
        allocation = {allocation}
        placement = {{ plugin = "first_fit" }}
        [simulation]
        rounds = "{rounds}"
        [output]
        decisions = true
        """)


def test_rounds_at_events_are_held_when_the_plan_asks_to_be_revisited(tmp_path, write):
    # One job, 0-2000 s. At events: the arrival's round at 0, then one every
    # 250 s the plan asks for, up to 1000. On the clock: every 300 s, the
    # plan's revisit_at unread.
    res = tessel.run(_revisit_experiment(write, 250.0, "events"), db=tmp_path / "e.db")
    grants = res.decisions[(res.decisions["stage"] == "allocation") & (res.decisions["code"] == "grant")]
    assert list(grants["time"]) == [0, 250, 500, 750, 1000]
    res = tessel.run(_revisit_experiment(write, 250.0, "clock"), db=tmp_path / "c.db")
    grants = res.decisions[(res.decisions["stage"] == "allocation") & (res.decisions["code"] == "grant")]
    assert list(grants["time"])[:4] == [0, 300, 600, 900]


def test_a_plan_that_asks_to_be_revisited_now_stops_the_run(tmp_path, write):
    with pytest.raises(Exception, match=r"asked to be revisited at 0\.0+, not after the round at 0\.0+"):
        tessel.run(_revisit_experiment(write, 0.0, "events"), db=tmp_path / "n.db")


def test_jobs_the_admission_policy_never_admitted_are_noted_as_such(tmp_path, write):
    # They were noted as jobs "the scheduler could not place".
    write("policies/hold.py", """\
        import tessel
        class HoldLate:
            def admit(self, view):
                return [tessel.AdmissionDecision(job, tessel.AdmissionVerdict.hold if job.spec.id >= 3
                                                 else tessel.AdmissionVerdict.admit, "held") for job in view.pending()]
        """)
    experiment = write("hold.toml", small_cluster(jobs=5))
    run = cli("run", experiment, "--db", tmp_path / "h.db", "--set",
              'scheduler.admission={ plugin = "python", module = "policies/hold.py", class = "HoldLate" }')
    assert run.returncode == 0, run.stderr
    assert query(tmp_path / "h.db", "SELECT note FROM runs") == [
        ("2 jobs never finished: the admission policy never admitted them",)]

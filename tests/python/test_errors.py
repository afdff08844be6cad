"""Every mistake in a Python policy is the user's to fix: exit code 2, one
message that names the plugin, the Python file and line, and what went
wrong; the run is marked failed and keeps no half-written rows."""

import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest
import tessel
from conftest import BUILD, EXAMPLES, cli, ctrl_c, python_stage, query, small_cluster, wait_for_file

GOOD = """\
import tessel


class Policy:
    def allocate(self, view):
        return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
"""

# (policy source, class, what stderr must say)
MISTAKES = {
    "raises": ("""\
        class Policy:
            def allocate(self, view):
                jobs = list(view.active())
                return len(jobs) / 0
        """, "Policy", r"bad\.py:4: ZeroDivisionError: division by zero"),
    "wrong return type": ("""\
        class Policy:
            def allocate(self, view):
                return []
        """, "Policy", r"bad\.py:2: Policy\.allocate\(\) returned a list, not a tessel\.AllocationPlan"),
    "reason not text": ("""\
        import tessel
        class Policy:
            def allocate(self, view):
                return tessel.AllocationPlan([tessel.Grant(job, reason=3) for job in view.active()])
        """, "Policy", r"bad\.py:3: Policy\.allocate\(\) returned a decision whose reason is an int, not a str"),
    "keep_running not text": ("""\
        import tessel
        class Policy:
            def allocate(self, view):
                return tessel.AllocationPlan([tessel.Grant(job) for job in view.waiting()], keep_running=1)
        """, "Policy", r"bad\.py:3: Policy\.allocate\(\) returned a decision whose keep_running is an int, not a str"),
    "wrong element type": ("""\
        import tessel
        class Policy:
            def allocate(self, view):
                return tessel.AllocationPlan([j.spec.id for j in view.active()])
        """, "Policy", r"bad\.py:3: Policy\.allocate\(\) returned a list holding an int, not only tessel\.Grant"),
    "contract broken": ("""\
        import tessel
        class Policy:
            def allocate(self, view):
                job = view.active()[0]
                return tessel.AllocationPlan([tessel.Grant(job)] * 2)
        """, "Policy", r"allocation plugin 'python' \(.*bad\.py:2, class Policy\) broke its contract: ranked job 0 twice"),
    "grant of negative CPUs": ("""\
        import tessel
        class Policy:
            def allocate(self, view):
                return tessel.AllocationPlan([tessel.Grant(job, tessel.Resources(job.spec.gpus, 1000, -1.0, 0.0, -1))
                                              for job in view.active()])
        """, "Policy", r"broke its contract: granted job 0 -1\.000000 CPUs and 0\.000000 GB; each is finite and >= 0"),
    "reason not Unicode": ("""\
        import tessel
        class Policy:
            def allocate(self, view):
                return tessel.AllocationPlan([tessel.Grant(job, reason="bad \\udcff") for job in view.active()])
        """, "Policy", r"bad\.py:3: Policy\.allocate\(\) returned a decision whose reason is a str that is not "
                       r"valid Unicode"),
    "exception that cannot be printed": ("""\
        class Unprintable(Exception):
            def __str__(self):
                raise RuntimeError("no words")
        class Policy:
            def allocate(self, view):
                raise Unprintable()
        """, "Policy", r"bad\.py:6: Unprintable: \(its message could not be made: RuntimeError: no words\)"),
    "failed import": ("""\
        import no_such_module
        class Policy:
            def allocate(self, view):
                pass
        """, "Policy", r"bad\.py:1: ModuleNotFoundError: No module named 'no_such_module'"),
    "syntax error": ("""\
        class Policy:
            def allocate(self, view)
                pass
        """, "Policy", r"bad\.py:2: SyntaxError: expected ':'"),
    "missing class": (GOOD, "Polcy", r"bad\.py: defines no class 'Polcy' \(classes: Policy\)"),
    "missing method": ("""\
        class Policy:
            def allocat(self, view):
                pass
        """, "Policy", r"bad\.py:1: class Policy has no method allocate\(view\), which an allocation policy needs"),
    "constructor raises": ("""\
        class Policy:
            def __init__(self):
                raise RuntimeError("no GPUs today")
            def allocate(self, view):
                pass
        """, "Policy", r"bad\.py:3: RuntimeError: no GPUs today"),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_python_mistake_exits_2_naming_the_file_and_line(tmp_path, write, mistake):
    source, cls, says = MISTAKES[mistake]
    write("policies/bad.py", source)
    experiment = write("exp.toml", small_cluster(jobs=20, allocation=python_stage("policies/bad.py", cls)))
    run = cli("run", experiment, "--db", tmp_path / "r.db")
    assert run.returncode == 2, run.stderr
    assert "allocation plugin 'python'" in run.stderr
    said = [line for line in run.stderr.splitlines() if line and "simulating" not in line]
    assert len(said) == 1, run.stderr  # one message
    assert re.search(says, run.stderr), run.stderr
    if os.path.exists(tmp_path / "r.db"):  # a mistake found while running: the run failed, with no rows
        for status, run_id in query(tmp_path / "r.db", "SELECT status, id FROM runs"):
            assert status == "failed"
            assert query(tmp_path / "r.db", "SELECT COUNT(*) FROM jobs WHERE run_id = ?", run_id) == [(0,)]


def test_a_missing_module_file(tmp_path, write):
    experiment = write("exp.toml", small_cluster(jobs=20, allocation=python_stage("policies/nope.py", "Policy")))
    run = cli("run", experiment, "--db", tmp_path / "r.db")
    assert run.returncode == 2
    assert "exp.toml:13:" in run.stderr and "policies/nope.py: no such file" in run.stderr


def test_from_python_a_policy_error_raises_and_the_run_is_failed(tmp_path, write):
    write("policies/bad.py", MISTAKES["raises"][0])
    experiment = write("exp.toml", small_cluster(jobs=20, allocation=python_stage("policies/bad.py", "Policy")))
    with pytest.raises(tessel.PolicyError, match=r"failed at t=0 s: .*bad\.py:4: ZeroDivisionError"):
        tessel.run(experiment, db=tmp_path / "r.db")
    assert query(tmp_path / "r.db", "SELECT status FROM runs") == [("failed",)]


def test_a_view_kept_past_its_call_refuses_to_be_read(tmp_path, write):
    write("policies/keeper.py", """\
        import tessel
        class Keeper:
            kept = None
            def allocate(self, view):
                if Keeper.kept is not None:
                    Keeper.kept.active()
                Keeper.kept = view
                return tessel.AllocationPlan([])
        """)
    experiment = write("exp.toml", small_cluster(jobs=20, allocation=python_stage("policies/keeper.py", "Keeper")))
    run = cli("run", experiment, "--db", tmp_path / "r.db")
    assert run.returncode == 2
    assert "keeper.py:6: RuntimeError: this view belonged to a stage call that has returned" in run.stderr


def test_a_job_kept_past_its_run_refuses_to_be_read(tmp_path, write, monkeypatch):
    # Jobs live as long as the policy; kept longer (here in a module that
    # outlives it), they once read freed memory: garbage, then a segfault.
    write("lib/jobcache.py", "SEEN = {}\n")
    write("policies/remember.py", """\
        import jobcache
        import tessel
        class Remember:
            def allocate(self, view):
                for job in view.active():
                    kept = jobcache.SEEN.setdefault(job.spec.id, job)
                    kept.status  # a job of an earlier run raises here
                return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
        """)
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    import jobcache
    experiment = write("exp.toml", small_cluster(jobs=20, allocation=python_stage("policies/remember.py", "Remember")))
    tessel.run(experiment, db=tmp_path / "r.db")
    job = jobcache.SEEN[0]
    ended = "this job belonged to a run that has ended"
    for read in (lambda: job.status, lambda: job.finish, lambda: job.running(), lambda: job.held(),
                 lambda: repr(job), lambda: job.allocation, lambda: job.spec.id, lambda: job.spec.request()):
        with pytest.raises(RuntimeError, match=ended):
            read()
    with pytest.raises(tessel.PolicyError, match=r"remember\.py:7: RuntimeError: " + ended):
        tessel.run(experiment, db=tmp_path / "r.db")
    assert query(tmp_path / "r.db", "SELECT status FROM runs ORDER BY id") == [("complete",), ("failed",)]


def test_the_cluster_and_model_kept_past_their_call_refuse_to_be_read(tmp_path, write, monkeypatch):
    # Once references into the run's scheduler: kept past the call they read
    # a cluster that had changed since, and past the run freed memory.
    write("lib/keptviews.py", "KEPT = []\n")
    write("policies/keepviews.py", """\
        import keptviews
        import tessel
        class KeepViews:
            def allocate(self, view):
                if keptviews.KEPT:
                    cluster, model = keptviews.KEPT[0]
                    cluster.free_gpus()  # a cluster of an earlier call raises here
                keptviews.KEPT.append((view.cluster(), view.throughput()))
                return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
        """)
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    import keptviews
    experiment = write("exp.toml", small_cluster(jobs=5, allocation=python_stage("policies/keepviews.py", "KeepViews")))
    with pytest.raises(tessel.PolicyError, match=r"keepviews\.py:7: RuntimeError: this view belonged to a stage call"):
        tessel.run(experiment, db=tmp_path / "r.db")
    cluster, model = keptviews.KEPT[0]
    returned = "this view belonged to a stage call that has returned"
    for read in (cluster.nodes, cluster.free_gpus, cluster.gpu_types, lambda: cluster.node(0), model.name):
        with pytest.raises(RuntimeError, match=returned):
            read()


def test_settings_kept_past_the_run_still_read_true(tmp_path, write, monkeypatch):
    # Once a reference into the run's scheduler: read after it, another
    # run's values or garbage (6.9e-310).
    write("lib/kept.py", "SETTINGS = []\n")
    write("policies/keep.py", """\
        import kept
        import tessel
        class Keep:
            def allocate(self, view):
                kept.SETTINGS.append(view.settings())
                return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
        """)
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    import kept
    experiment = write("exp.toml", small_cluster(jobs=5, allocation=python_stage("policies/keep.py", "Keep")))
    tessel.run(experiment, db=tmp_path / "r.db")
    first = len(kept.SETTINGS)
    tessel.run(experiment.parent / "exp.toml", db=tmp_path / "r.db", set={"scheduler.round_seconds": 60})
    assert first > 0 and all(settings.round_seconds == 300 for settings in kept.SETTINGS[:first])
    assert all(settings.round_seconds == 60 for settings in kept.SETTINGS[first:])


def wait_until_running(database, seconds=60, runs=1):
    """Returns once `database` holds `runs` runs under way (or after `seconds`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if query(database, "SELECT COUNT(*) FROM runs WHERE status = 'running'")[0][0] >= runs:
                return
        except sqlite3.OperationalError:  # not created yet
            pass
        time.sleep(0.05)


def test_ctrl_c_in_python_raises_keyboardinterrupt_and_leaves_no_run_half_written(tmp_path, write):
    experiment = write("long.toml", small_cluster(jobs=20000, jobs_per_hour=200,
                                                  allocation=python_stage(EXAMPLES / "las.py", "Las"), extra="""
        [sweep]
        seeds = [1, 2, 3, 4]
        """))
    database = tmp_path / "long.db"
    script = f"import tessel; tessel.run({str(experiment)!r}, db={str(database)!r}, jobs=2)"
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True)
    wait_until_running(database)
    stderr, _ = ctrl_c(child)
    assert child.returncode != 0
    assert "KeyboardInterrupt" in stderr
    statuses = query(database, "SELECT id, status FROM runs")
    assert statuses and all(status in ("interrupted", "complete") for _, status in statuses)
    assert any(status == "interrupted" for _, status in statuses)
    for run_id, status in statuses:
        if status == "interrupted":
            assert query(database, "SELECT COUNT(*) FROM jobs WHERE run_id = ?", run_id) == [(0,)]


def test_ctrl_c_stops_a_slow_policy_within_a_call_or_two(tmp_path, write):
    # The stop was looked at every 1,024 events: at 0.2 s a call, minutes.
    write("policies/slow.py", """\
        import time
        import tessel
        class Slow:
            def allocate(self, view):
                time.sleep(0.2)
                return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
        """)
    experiment = write("slow.toml", small_cluster(jobs=2000, allocation=python_stage("policies/slow.py", "Slow")))
    database = tmp_path / "slow.db"
    child = subprocess.Popen([str(BUILD / "runners/cli/tessel"), "run", str(experiment), "--db", str(database), "-q"],
                             stderr=subprocess.PIPE, text=True)
    wait_until_running(database)
    time.sleep(0.5)
    _, took = ctrl_c(child)
    assert took < 5
    assert child.returncode == 130
    assert query(database, "SELECT status FROM runs") == [("interrupted",)]


STUCK_POLICY = """\
    import tessel
    class Stuck:
        def allocate(self, view):
            if view.now() > 0:
                while True:  # never returns: the core cannot stop it between events
                    try:
                        pass
                    except Exception:  # what a policy may catch, KeyboardInterrupt is not
                        pass
            return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
    """


@pytest.mark.parametrize("host", ["cli", "python"])
def test_ctrl_c_stops_a_policy_stuck_in_a_loop(tmp_path, write, host):
    # The stop was read only between events: a policy that never returned
    # hung the run for good, a second Ctrl-C included.
    write("policies/stuck.py", STUCK_POLICY)
    experiment = write("stuck.toml", small_cluster(jobs=50, allocation=python_stage("policies/stuck.py", "Stuck")))
    database = tmp_path / "stuck.db"
    if host == "cli":
        command = [str(BUILD / "runners/cli/tessel"), "run", str(experiment), "--db", str(database), "-q"]
    else:
        command = [sys.executable, "-c", f"import tessel; tessel.run({str(experiment)!r}, db={str(database)!r})"]
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    wait_until_running(database)
    time.sleep(0.5)
    stderr, took = ctrl_c(child)
    assert took < 5
    assert child.returncode == 130 if host == "cli" else child.returncode != 0, stderr
    assert ("KeyboardInterrupt" in stderr) == (host == "python")
    # Where the policy was: its plugin, the time and its loop's line.
    assert re.search(r"allocation plugin 'python' \(.*\) interrupted at t=\S+ s \(in .*policies/stuck\.py:[5-8]\); "
                     r"the run is marked 'interrupted'", stderr), stderr
    assert query(database, "SELECT status, note FROM runs") == [("interrupted", "stopped by the user")]
    assert query(database, "SELECT COUNT(*) FROM jobs") == [(0,)]


def test_a_policy_that_raises_keyboardinterrupt_interrupts_the_experiment(tmp_path, write):
    # It failed the run as a policy error ("KeyboardInterrupt"), and the
    # sweep's other points ran on.
    write("policies/quits.py", """\
        import tessel
        class Quits:
            def allocate(self, view):
                if view.now() > 0:
                    raise KeyboardInterrupt
                return tessel.AllocationPlan([tessel.Grant(job) for job in view.active()])
        """)
    experiment = write("quits.toml", small_cluster(jobs=20, allocation=python_stage("policies/quits.py", "Quits"),
                                                    extra="""
        [sweep]
        seeds = [1, 2, 3]
        """))
    with pytest.raises(KeyboardInterrupt):
        tessel.run(experiment, db=tmp_path / "q.db", jobs=1)
    assert query(tmp_path / "q.db", "SELECT status FROM runs") == [("interrupted",)]
    result = subprocess.run([str(BUILD / "runners/cli/tessel"), "run", str(experiment), "--db",
                             str(tmp_path / "c.db"), "-q", "-j", "1"], capture_output=True, text=True)
    assert result.returncode == 130, result.stderr
    assert query(tmp_path / "c.db", "SELECT status FROM runs") == [("interrupted",)]


def test_ctrl_c_in_a_sweep_counts_the_runs_it_marks(tmp_path, write):
    write("policies/stuck.py", STUCK_POLICY)
    experiment = write("stuck.toml", small_cluster(jobs=50, allocation=python_stage("policies/stuck.py", "Stuck"),
                                                   extra="[sweep]\nseeds = [1, 2]"))
    database = tmp_path / "stuck.db"
    child = subprocess.Popen([str(BUILD / "runners/cli/tessel"), "run", str(experiment), "--db", str(database), "-q",
                              "-j", "2"], stderr=subprocess.PIPE, text=True)
    wait_until_running(database, runs=2)
    time.sleep(0.5)  # both runs stuck
    stderr, _ = ctrl_c(child)
    assert child.returncode == 130, stderr
    assert re.search(r"interrupted at t=\S+ s \(in .*policies/stuck\.py:[5-8]\); 2 runs are marked 'interrupted'$",
                     stderr.strip()), stderr
    assert query(database, "SELECT status FROM runs") == [("interrupted",), ("interrupted",)]


# Where a policy's code can loop before any run exists: as its module is
# imported (to read the class's arguments, then to compose), and in its
# constructor, which a sweep runs for every point before the first run.
# Each touches the file MARKER first, so that the test knows it is stuck.
STUCK_WHILE_LOADING = {
    "module": """\
        import tessel
        open(MARKER, "w").close()
        while True:
            pass
        class Loading:
            def allocate(self, view):
                return tessel.AllocationPlan([])
        """,
    "constructor": """\
        import tessel
        class Loading:
            def __init__(self):
                open(MARKER, "w").close()
                while True:
                    pass
            def allocate(self, view):
                return tessel.AllocationPlan([])
        """,
}


@pytest.mark.parametrize("where,command",
                         [(where, command) for where in STUCK_WHILE_LOADING
                          for command in ("run", "sweep", "validate", "python")]
                         + [("module", "plugins")])  # `plugins --python` imports, and constructs nothing
def test_ctrl_c_stops_a_policy_stuck_while_it_loads(tmp_path, write, where, command):
    # Only a running simulation's policy calls could be interrupted: Ctrl-C
    # as the module was imported or the class constructed hung, and an
    # interrupted import was reported as the module failing to load (exit 2).
    marker = tmp_path / "stuck"
    write("policies/loading.py", STUCK_WHILE_LOADING[where].replace("MARKER", repr(str(marker))))
    sweep = "[sweep]\nseeds = [1, 2]" if command == "sweep" else ""
    experiment = write("loading.toml", small_cluster(jobs=10, allocation=python_stage("policies/loading.py", "Loading"),
                                                     extra=sweep))
    database = tmp_path / "loading.db"
    tessel_cli = str(BUILD / "runners/cli/tessel")
    command_line = {
        "run": [tessel_cli, "run", str(experiment), "--db", str(database), "-q"],
        "sweep": [tessel_cli, "run", str(experiment), "--db", str(database), "-q", "-j", "2"],
        "validate": [tessel_cli, "validate", str(experiment)],
        "plugins": [tessel_cli, "plugins", "-v", "--python", str(tmp_path / "policies/loading.py")],
        "python": [sys.executable, "-c", f"import tessel; tessel.run({str(experiment)!r}, db={str(database)!r})"],
    }[command]
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    child = subprocess.Popen(command_line, env=env, stderr=subprocess.PIPE, text=True)
    wait_for_file(marker, child)
    time.sleep(0.2)
    stderr, took = ctrl_c(child)
    assert took < 5, stderr
    if command == "python":
        assert child.returncode != 0 and "KeyboardInterrupt" in stderr, stderr
    else:
        assert child.returncode == 130, stderr
    line = 3 if where == "module" else 5
    stage = "admission" if command == "plugins" else "allocation"  # `plugins` tries each stage in order
    assert f"interrupted while {stage} plugin 'python' loaded (in {tmp_path}/policies/loading.py:{line})" in stderr, \
        stderr
    # No run began. Whether the database was created yet depends on when the
    # store, opening on a thread of its own, got to it.
    assert command not in ("validate", "plugins") or not database.exists()
    assert not database.exists() or query(database, "SELECT COUNT(*) FROM runs") == [(0,)]


def test_validate_says_nothing_is_ok_once_interrupted(tmp_path, write):
    # A policy that caught the KeyboardInterrupt and went on let `validate`
    # finish and print "ok", exit code 0, with Ctrl-C ignored.
    marker = tmp_path / "stuck"
    write("policies/catches.py", """\
        import tessel
        class Catches:
            def __init__(self):
                open(MARKER, "w").close()
                try:
                    while True:
                        pass
                except KeyboardInterrupt:
                    pass
            def allocate(self, view):
                return tessel.AllocationPlan([])
        """.replace("MARKER", repr(str(marker))))
    experiment = write("catches.toml", small_cluster(jobs=10, allocation=python_stage("policies/catches.py", "Catches")))
    with open(tmp_path / "validate.out", "w") as out:
        child = subprocess.Popen([str(BUILD / "runners/cli/tessel"), "validate", str(experiment)],
                                 env=dict(os.environ, PYTHONPATH=str(BUILD / "python")), stdout=out,
                                 stderr=subprocess.PIPE, text=True)
        wait_for_file(marker, child)
        time.sleep(0.2)
        stderr, _ = ctrl_c(child)
    assert child.returncode == 130, stderr
    assert f"interrupted; {experiment} was not checked whole" in stderr
    assert (tmp_path / "validate.out").read_text() == ""


# An elasticity answer the run cannot use: an endless cost never ended the
# run (its memory growing), NaN failed in SQLite, and the rest were stored.
ELASTICITY_MISTAKES = {
    "endless cost": ("float('inf')", "None", r"priced the reconfiguration of job \d+ at inf s; a cost is finite and >= 0"),
    "negative cost": ("-1.0", "None", r"priced the reconfiguration of job \d+ at -1\.000000 s"),
    "negative layout": ("1.0", "tessel.JobLayout(-5, -1, -3)",
                        r"laid out job \d+ on \d+ GPUs as batch -5, tensor parallel -1, pipeline parallel -3"),
    "layout past the GPUs": ("1.0", "tessel.JobLayout(0, 1000, 1000)",
                             r"laid out job \d+ on \d+ GPUs as batch 0, tensor parallel 1000, pipeline parallel 1000; "
                             r"sizes are >= 0"),
}


@pytest.mark.parametrize("mistake", list(ELASTICITY_MISTAKES))
def test_an_elasticity_answer_the_run_cannot_use_is_a_broken_contract(tmp_path, write, mistake):
    cost, layout, says = ELASTICITY_MISTAKES[mistake]
    write("policies/grow.py", f"""\
        import tessel
        class Grow:
            def resize(self, view):
                free = view.cluster().free_gpus()
                out = []
                for job in view.active():
                    more = job.spec.max_gpus - job.allocation.gpu_count()
                    if job.running() and job.spec.elastic() and 0 < more <= free:
                        free -= more
                        out.append(tessel.ResizeProposal(job, job.spec.max_gpus, layout={layout} or tessel.JobLayout()))
                return out
            def reconfiguration_seconds(self, view, job, before, after):
                return {cost}
        """)
    experiment = small_cluster(jobs=30, allocation='{ plugin = "fifo" }')
    experiment = experiment.replace("seed = 1\n", "seed = 1\nelastic_min_gpus = 1\nelastic_max_gpus = 8\n")
    experiment = experiment.replace('allocation = { plugin = "fifo" }\n',
                                    'allocation = { plugin = "fifo" }\nelasticity = '
                                    + python_stage("policies/grow.py", "Grow") + "\n")
    path = write("exp.toml", experiment)
    run = cli("run", path, "--db", tmp_path / "r.db")
    assert run.returncode == 2, run.stderr
    assert re.search(r"elasticity plugin 'python' \(.*grow\.py:2, class Grow\) broke its contract: " + says,
                     run.stderr), run.stderr
    assert query(tmp_path / "r.db", "SELECT status FROM runs") == [("failed",)]
    assert query(tmp_path / "r.db", "SELECT COUNT(*) FROM resizes") == [(0,)]


@pytest.mark.parametrize("gpus, shown", [
    ('["x"]', r"gpus hold 'x' \(a str\), not only GPU ids"),
    ("[1.5]", r"gpus hold 1\.5 \(a float\), not only GPU ids"),
    ("[-3]", r"gpus hold -3 \(an int\), not only GPU ids"),
    ("[10**20]", r"gpus hold 100000000000000000000 \(an int\), not only GPU ids"),
    ("[True]", r"gpus hold True \(a bool\), not only GPU ids"),
    ("5", r"gpus is an int, not a list of GPU ids"),
])
def test_a_placement_of_what_is_no_gpu_id_is_refused_naming_it(tmp_path, write, gpus, shown):
    # Each was "returned a decision whose gpus is a list" (True: one GPU too few).
    write("policies/bad.py", f"""\
        import tessel
        class Bad:
            def place(self, view, job, want):
                choice = tessel.PlacementChoice([0], "bad")
                choice.gpus = {gpus}
                return choice
        """)
    experiment = write("bad.toml", small_cluster(jobs=5, placement=python_stage("policies/bad.py", "Bad")))
    with pytest.raises(tessel.PolicyError, match=r"bad\.py:3: Bad\.place\(\) returned a decision whose " + shown):
        tessel.run(experiment, db=tmp_path / "b.db")


def test_a_revisit_past_the_simulated_clocks_end_is_no_revisit(tmp_path, write):
    # Past 1e12 s a time is refused as a mistake in the experiment; a
    # revisit that far off (1e300 for "never") is no round, not that error.
    write("policies/far.py", """\
        import tessel
        class Far:
            def allocate(self, view):
                ranked = [tessel.Grant(job) for job in view.active()] if view.now() > 1e299 else []
                return tessel.AllocationPlan(ranked, revisit_at=1e300)
        """)
    experiment = write("far.toml", small_cluster(jobs=20, allocation=python_stage("policies/far.py", "Far"),
                                                  extra="""
        [simulation]
        rounds = "events"
        """))
    results = tessel.run(experiment, db=tmp_path / "f.db")
    assert list(results.runs["note"]) == ["20 jobs never finished: the scheduler could not place them"]


def test_a_placement_of_numpy_gpu_ids_is_taken(tmp_path, write):
    # Numpy's integers are GPU ids too, as they were before the ids were checked one by one.
    write("policies/numpy_fit.py", """\
        import numpy as np
        import tessel
        class NumpyFit:
            def place(self, view, job, want):
                free = [i for i, gpu in enumerate(view.cluster().gpus()) if gpu.used_milli == 0]
                if len(free) < want.gpus:
                    return tessel.PlacementChoice([], "no room")
                return tessel.PlacementChoice(np.array(free[:want.gpus], dtype=np.int64), "numpy ids")
        """)
    experiment = write("numpy.toml", small_cluster(jobs=20, placement=python_stage("policies/numpy_fit.py", "NumpyFit")))
    results = tessel.run(experiment, db=tmp_path / "n.db")
    assert (results.jobs["status"] == "finished").all()

"""`tessel serve` with [serve] executor = "slurm": the policy decides, Slurm
runs each launch as a job (sbatch), stops it (scancel), and reports its end
(scontrol show job). Against a real Slurm: the tests need a controller that
answers sinfo (see need_slurm in conftest.py), and nodes with GPUs as GRES
(scripts/slurm-local.sh gives one node with 4). Jobs are examples/jobs/train,
short, so that the whole file runs in about a minute on a loaded machine.
"""

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from contextlib import closing

import pytest

from conftest import BUILD, TESSEL, listening_address, need_slurm

TRAIN = BUILD / "examples" / "jobs" / "train"


def config(tmp_path, extra="", round_seconds=0.5, node_timeout=30):
    secret = tmp_path / "secret"
    secret.write_text("a secret shared by the daemon and its clients\n")
    secret.chmod(0o600)
    path = tmp_path / "cluster.toml"
    path.write_text(f"""\
[scheduler]
round_seconds = {round_seconds}
allocation = {{ plugin = "las" }}
placement = {{ plugin = "consolidated" }}

[serve]
listen = "127.0.0.1:0"
executor = "slurm"
heartbeat_seconds = 0.5
node_timeout_seconds = {node_timeout}
grace_seconds = 3
retry_seconds = 0.5
{extra}
[output]
database = "cluster.db"
""")
    return path, dict(os.environ, TESSEL_SECRET_FILE=str(secret))


class Serve:
    """A `tessel serve` in tmp_path, with the commands that talk to it."""

    def __init__(self, tmp_path, config_path, env):
        self.tmp_path, self.env = tmp_path, dict(env)
        self.err = open(tmp_path / "serve.err", "a")
        self.process = subprocess.Popen([TESSEL, "serve", str(config_path)], cwd=tmp_path, env=self.env,
                                        stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.env["TESSEL_SCHEDULER"] = listening_address(self.process, log=tmp_path / "serve.err")

    def run(self, *args):
        return subprocess.run([TESSEL, *map(str, args)], cwd=self.tmp_path, env=self.env, capture_output=True,
                              text=True, timeout=60)

    def submit(self, gpus, iterations, name, sleep_ms=100):
        done = self.run("submit", "--gpus", gpus, "--iterations", iterations, "--", TRAIN, "--iterations",
                        iterations, "--sleep-ms", sleep_ms, "--checkpoint-every", 5, "--checkpoint",
                        self.tmp_path / f"{name}.checkpoint")
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    def jobs(self):
        listed = self.run("jobs", "--format", "json")
        assert listed.returncode == 0, listed.stderr
        return json.loads(listed.stdout)

    def wait(self, until, seconds, what):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            jobs = self.jobs()
            if until(jobs):
                return jobs
            time.sleep(0.3)
        pytest.fail(f"{what} within {seconds} s: {jobs}\n{self.log()}")

    def log(self):
        return (self.tmp_path / "serve.err").read_text()

    def end(self, how=signal.SIGTERM):
        self.process.send_signal(how)
        self.process.wait(timeout=60)
        self.err.close()


def slurm_jobs(prefix="tessel-"):
    """This machine's Slurm jobs named tessel-*: {name: (id, state)}."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %j %T"], capture_output=True, text=True,
                         timeout=30).stdout
    jobs = {}
    for line in out.splitlines():
        job_id, name, state = line.split()
        if name.startswith(prefix):
            jobs[name] = (job_id, state)
    return jobs


def launches(database):
    with closing(sqlite3.connect(database)) as connection:
        return connection.execute("SELECT job_id, outcome FROM cluster_launches ORDER BY launch_id").fetchall()


@pytest.fixture
def serve(tmp_path):
    need_slurm()
    started = []

    def start(extra="", round_seconds=0.5, node_timeout=30, path_first=None):
        path, env = config(tmp_path, extra, round_seconds, node_timeout)
        if path_first is not None:
            env["PATH"] = f"{path_first}:{env['PATH']}"
        started.append(Serve(tmp_path, path, env))
        return started[-1]

    yield start
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.end()
    # What a test left in Slurm goes, each of its jobs by id.
    log = (tmp_path / "serve.err").read_text() if (tmp_path / "serve.err").exists() else ""
    mine = set(re.findall(r"is Slurm job (\d+)", log))
    for job_id, state in slurm_jobs().values():
        if job_id in mine and state in ("PENDING", "RUNNING"):
            subprocess.run(["scancel", job_id], timeout=30)


def test_las_runs_ten_jobs_through_slurm_preempting_some(tmp_path, serve):
    # Rounds of 2 s: LAS swaps jobs of equal attained service every round,
    # and each swap here is a Slurm job stopped and another submitted.
    daemon = serve(round_seconds=2)
    ids = []
    # Arrivals spread out: each newcomer has attained nothing, so LAS gives
    # it GPUs that jobs already running hold, and those are preempted.
    for i in range(10):
        ids.append(daemon.submit(1 + i % 4, 20, f"job{i}"))
        time.sleep(0.4)
    jobs = daemon.wait(lambda jobs: len(jobs) == 10 and all(job["status"] in ("finished", "failed") for job in jobs),
                       150, "all ten jobs did not end")
    assert [job["status"] for job in jobs] == ["finished"] * 10, daemon.log()
    assert all(job["iteration"] == 20 for job in jobs)
    assert sum(job["preemptions"] for job in jobs) > 0, daemon.log()
    outcomes = [outcome for _, outcome in launches(tmp_path / "cluster.db")]
    assert "preempted" in outcomes and outcomes.count("finished") == 10, outcomes
    # A preempted rank heard SIGTERM from scancel and checkpointed; its next
    # launch resumed from there (TESSEL_RESUME=1).
    logs = [path.read_text() for path in (tmp_path / "cluster.db.slurm" / "run-1").glob("job-*/rank-0.log")]
    assert any("SIGTERM at iteration" in log for log in logs)
    assert any(", resumed" in log and re.search(r"resuming from iteration [1-9]", log) for log in logs)
    # Every launch was a Slurm job, all ended now.
    mine = set(re.findall(r"is Slurm job (\d+)", daemon.log()))
    assert len(mine) == len(outcomes)
    assert all(state not in ("PENDING", "RUNNING") for job_id, state in slurm_jobs().values() if job_id in mine)
    daemon.end()


def wait_running_in_slurm(daemon, launch_count, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = re.findall(r"launch (\d+) of job \d+ is Slurm job (\d+)", daemon.log())
        states = {job_id: state for name, (job_id, state) in slurm_jobs().items()}
        running = [job_id for _, job_id in found if states.get(job_id) == "RUNNING"]
        if len(running) >= launch_count:
            return running
        time.sleep(0.3)
    pytest.fail("no Slurm job running: " + daemon.log())


def test_a_job_cancelled_with_scancel_is_a_failed_attempt_and_retried(tmp_path, serve):
    daemon = serve()
    # Slurm runs the jobs: an agent that comes anyway is refused.
    agent = subprocess.Popen([TESSEL, "agent", "--fake-gpus", "2", "--name", "stray", "--log-dir", tmp_path / "agent"],
                             cwd=tmp_path, env=daemon.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while "refused agent stray" not in daemon.log() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "this scheduler runs its jobs through Slurm" in daemon.log()
        status = daemon.run("status")
        assert status.returncode == 0 and "stray" not in status.stdout, status.stdout
    finally:
        agent.terminate()
        agent.wait(timeout=30)
    job = daemon.submit(2, 40, "cancelled")
    [slurm_id] = wait_running_in_slurm(daemon, 1)
    daemon.wait(lambda jobs: jobs[0]["iteration"] >= 3, 60, "no progress")
    assert subprocess.run(["scancel", slurm_id], timeout=30).returncode == 0
    jobs = daemon.wait(lambda jobs: jobs[0]["status"] in ("finished", "failed"), 90, "the job did not end")
    assert jobs[0]["status"] == "finished", daemon.log()
    assert jobs[0]["attempts"] == 2
    assert jobs[0]["preemptions"] == 0
    assert "cancelled outside tessel" in daemon.log()
    assert [outcome for _, outcome in launches(tmp_path / "cluster.db")] == ["failed", "finished"]
    assert job == jobs[0]["id"]
    daemon.end()


def test_a_job_cancelled_past_max_retries_is_given_up(tmp_path, serve):
    daemon = serve("max_retries = 0\n")
    daemon.submit(1, 200, "given-up")
    [slurm_id] = wait_running_in_slurm(daemon, 1)
    assert subprocess.run(["scancel", slurm_id], timeout=30).returncode == 0
    jobs = daemon.wait(lambda jobs: jobs[0]["status"] in ("finished", "failed"), 60, "the job did not end")
    assert jobs[0]["status"] == "failed" and jobs[0]["attempts"] == 1, daemon.log()
    assert "giving up" in daemon.log()
    daemon.end()


def test_a_restarted_daemon_adopts_the_slurm_jobs_still_running(tmp_path, serve):
    daemon = serve()
    for i in range(2):
        daemon.submit(2, 60, f"adopted{i}")
    before = sorted(wait_running_in_slurm(daemon, 2))
    daemon.end(signal.SIGKILL)  # a crash: nothing is stopped
    assert sorted(job_id for job_id, state in slurm_jobs().values() if state == "RUNNING" and job_id in before) == before
    daemon = serve()
    jobs = daemon.wait(lambda jobs: len(jobs) == 2 and all(job["status"] in ("finished", "failed") for job in jobs),
                       90, "the adopted jobs did not end")
    assert [job["status"] for job in jobs] == ["finished", "finished"], daemon.log()
    assert [job["attempts"] for job in jobs] == [1, 1]
    assert [job["iteration"] for job in jobs] == [60, 60]  # progress read on after the restart
    assert daemon.log().count("adopted") >= 2
    # No launch was made again: each job ran once, as the Slurm job it had.
    assert launches(tmp_path / "cluster.db") == [(0, "finished"), (1, "finished")]
    assert len(re.findall(r"is Slurm job \d+", daemon.log())) == 2
    daemon.end()


def test_ranks_get_the_agents_environment_and_their_logs_and_cancel_work(tmp_path, serve):
    daemon = serve()
    names = "RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TESSEL_JOB_ID|TESSEL_LAUNCH_ID|TESSEL_PROGRESS|" \
            "TESSEL_RESUME|CUDA_VISIBLE_DEVICES|FROM_JOB"
    done = daemon.run("submit", "--gpus", 3, "--env", "FROM_JOB=yes", "--", "sh", "-c",
                      f"env | grep -E '^({names})=' | sort > env-$RANK.txt; echo rank $RANK wrote")
    assert done.returncode == 0, done.stderr
    daemon.wait(lambda jobs: jobs[0]["status"] == "finished", 60, "the job did not finish")
    envs = [dict(line.split("=", 1) for line in (tmp_path / f"env-{rank}.txt").read_text().splitlines())
            for rank in range(3)]
    progress = str(tmp_path / "cluster.db.slurm" / "run-1" / "job-0" / "launch-1.progress")
    for rank, env in enumerate(envs):
        assert env.pop("TESSEL_PROGRESS") == (progress if rank == 0 else "/dev/null")
        assert env.pop("MASTER_PORT").isdigit()
        assert env.pop("MASTER_ADDR")
        # Slurm's GPUs: the launch's three on this node, for every rank, as an agent gives them.
        assert len(env.pop("CUDA_VISIBLE_DEVICES").split(",")) == 3
        assert env == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "3", "TESSEL_JOB_ID": "0",
                       "TESSEL_LAUNCH_ID": "1", "FROM_JOB": "yes"}  # no TESSEL_RESUME on a first launch
    # The journal keeps the Slurm job's id as its ranks' pid.
    [slurm_id] = re.findall(r"launch 1 of job 0 is Slurm job (\d+)", daemon.log())
    with closing(sqlite3.connect(tmp_path / "cluster.db")) as connection:
        pids = connection.execute("SELECT pid FROM cluster_ranks WHERE launch_id = 1 ORDER BY rank").fetchall()
    assert pids == [(int(slurm_id),)] * 3
    logs = daemon.run("logs", 0, "--rank", 2)
    assert logs.returncode == 0 and "rank 2 wrote" in logs.stdout, logs.stdout + logs.stderr

    # `tessel cancel`: the Slurm job is stopped (TERM, checkpoint) and ends.
    daemon.submit(1, 400, "cancelled")
    [slurm_id] = wait_running_in_slurm(daemon, 1)
    # Running in Slurm is not yet running ranks: a TERM before the step
    # starts reaches none (README, the executor's limits). Cancel once the
    # rank has started.
    log = tmp_path / "cluster.db.slurm" / "run-1" / "job-1" / "rank-0.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "train: iteration" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.1)
    assert daemon.run("cancel", 1).returncode == 0
    daemon.wait(lambda jobs: jobs[1]["status"] == "cancelled", 30, "not cancelled")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(job_id == slurm_id and state in ("PENDING", "RUNNING")
                                              for job_id, state in slurm_jobs().values()):
        time.sleep(0.3)
    assert "SIGTERM at iteration" in log.read_text()
    daemon.end()


def test_a_missing_workdir_is_a_failed_launch(tmp_path, serve):
    daemon = serve("max_retries = 0\n")
    done = daemon.run("submit", "--gpus", 1, "--workdir", tmp_path / "nowhere", "--", "true")
    assert done.returncode == 0, done.stderr
    jobs = daemon.wait(lambda jobs: jobs[0]["status"] == "failed", 60, "the job did not fail")
    assert "exited with code 127" in jobs[0]["last_error"], jobs
    log = (tmp_path / "cluster.db.slurm" / "run-1" / "job-0" / "rank-0.log").read_text()
    assert f"cannot enter working directory {tmp_path / 'nowhere'} on " in log, log
    daemon.end()


def test_bad_executor_settings_are_refused(tmp_path):
    path, env = config(tmp_path)
    text = path.read_text().replace('executor = "slurm"', 'executor = "kubernetes"')
    path.write_text(text)
    result = subprocess.run([TESSEL, "serve", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert re.search(r"cluster\.toml:\d+:\d+: unknown executor 'kubernetes' in \[serve\] \(valid: agents, slurm\)",
                     result.stderr), result.stderr
    path.write_text(text.replace('executor = "kubernetes"', 'slurm_partition = "gpu"'))
    result = subprocess.run([TESSEL, "serve", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "'slurm_partition' in [serve] applies to executor = \"slurm\" only" in result.stderr, result.stderr


def test_serve_with_slurm_and_no_slurm_answering_is_refused(tmp_path):
    path, env = config(tmp_path)
    # A controller that refuses connections (a missing file would make sinfo retry for a minute).
    dead = tmp_path / "slurm.conf"
    dead.write_text("ClusterName=none\nSlurmctldHost=localhost\nSlurmctldPort=9\n")
    env["SLURM_CONF"] = str(dead)
    result = subprocess.run([TESSEL, "serve", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    assert "[serve] executor = \"slurm\"" in result.stderr and "Slurm" in result.stderr, result.stderr
    assert not (tmp_path / "cluster.db").exists()  # refused before a run was opened


def test_a_hung_sbatch_is_given_up_and_the_job_it_submitted_cancelled(tmp_path, serve):
    # The first sbatch submits its job, then never answers (as when the
    # controller took the job and the reply was lost). Each Slurm command may
    # take half of node_timeout_seconds: this one is killed after 3 s, its
    # launch fails, and the job it submitted, which no launch accounts for,
    # is cancelled; the retry runs. Without the limit every later command
    # (polls, stops, sbatch) waited behind it, and so did the daemon's exit.
    real = shutil.which("sbatch")
    folder = tmp_path / "bin"
    folder.mkdir()
    marker = tmp_path / "hung-once"
    fake = folder / "sbatch"
    fake.write_text(f"#!/bin/sh\n{real} \"$@\" || exit $?\n"
                    f"if [ ! -e {marker} ]; then touch {marker}; exec sleep 600; fi\n")
    fake.chmod(0o755)
    daemon = serve("max_retries = 2\n", node_timeout=6, path_first=folder)
    daemon.submit(1, 60, "hung")  # 6 s: the stray still runs when the sbatch is given up
    jobs = daemon.wait(lambda jobs: jobs[0]["status"] in ("finished", "failed"), 60, "the job did not end")
    assert marker.exists()
    assert jobs[0]["status"] == "finished" and jobs[0]["attempts"] == 2, daemon.log()
    assert "sbatch did not answer within 3 s: killed" in daemon.log()
    [stray] = re.findall(r"Slurm job (\d+) \(launch 1\) belongs to no launch of this run: cancelling it",
                         daemon.log())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(job_id == stray and state in ("PENDING", "RUNNING")
                                              for job_id, state in slurm_jobs().values()):
        time.sleep(0.3)
    assert all(state not in ("PENDING", "RUNNING") for job_id, state in slurm_jobs().values() if job_id == stray)
    started = time.monotonic()
    daemon.end()
    assert time.monotonic() - started < 10


def slurm_tag(database, run):
    """The daemon's tag for a run's Slurm jobs (slurm_tag in daemon.cpp):
    FNV-1a of the database's absolute path, then the run."""
    value = 2166136261
    for byte in os.path.normpath(os.path.abspath(database)).encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return f"{value:08x}r{run}"


def test_a_job_bearing_the_runs_name_with_a_foreign_comment_is_not_adopted_but_cancelled(tmp_path, serve):
    # A Slurm job named as this run's launch 7 whose comment tessel did not
    # write: adoption read its job id with std::stoul, which threw out of the
    # event loop and ended the daemon at its first poll.
    need_slurm()
    name = f"tessel-{slurm_tag(tmp_path / 'cluster.db', 1)}-l7"
    submitted = subprocess.run(["sbatch", "--parsable", f"--job-name={name}", "--comment=jnot-a-number",
                                "--output=/dev/null", "--wrap", "sleep 120"], capture_output=True, text=True,
                               timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    foreign = submitted.stdout.strip().split(";")[0]
    try:
        daemon = serve()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "belongs to no launch of this run" not in daemon.log():
            time.sleep(0.3)
        assert f"Slurm job {foreign} bears launch 7's name but not a comment tessel wrote" in daemon.log(), \
            daemon.log()
        assert f"Slurm job {foreign} (launch 7) belongs to no launch of this run: cancelling it" in daemon.log()
        assert daemon.process.poll() is None and daemon.run("status").returncode == 0, daemon.log()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(job_id == foreign and state in ("PENDING", "RUNNING")
                                                  for job_id, state in slurm_jobs().values()):
            time.sleep(0.3)
        assert all(state not in ("PENDING", "RUNNING") for job_id, state in slurm_jobs().values()
                   if job_id == foreign)
        daemon.end()
    finally:
        subprocess.run(["scancel", foreign], timeout=30)


def test_an_srun_that_cannot_start_the_ranks_fails_the_launch_with_slurms_words(tmp_path, serve):
    # The batch script's srun refuses (here a stand-in on PATH, which the job
    # inherits). The script ended with a plain `wait`, always 0: the job
    # COMPLETED, the ranks wrote no status, and the launch read as killed
    # by SIGKILL.
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "srun"
    fake.write_text("#!/bin/sh\necho \"srun: error: Unable to create step for job $SLURM_JOB_ID: "
                    "Requested node configuration is not available\" >&2\nexit 1\n")
    fake.chmod(0o755)
    daemon = serve("max_retries = 0\n", path_first=folder)
    done = daemon.run("submit", "--gpus", 1, "--", "true")
    assert done.returncode == 0, done.stderr
    jobs = daemon.wait(lambda jobs: jobs[0]["status"] in ("finished", "failed"), 60, "the job did not end")
    assert jobs[0]["status"] == "failed", daemon.log()
    error = jobs[0]["last_error"]
    assert "srun: error: Unable to create step" in error and "SIGKILL" not in error, error
    daemon.end()

"""Real distributed training on real nodes: examples/jobs/train_pytorch.py
with Debian's python3-torch, gloo on the CPU, 4 ranks over 2 agents with fake
GPUs. The job is preempted and resumes from its checkpoint, then loses a node
to `kill -9` on an agent and resumes again; every job finishes exactly once.
Skipped where torch cannot be imported."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, TESSEL, listening_address, query

torch = pytest.importorskip("torch")

TRAIN = ROOT / "examples" / "jobs" / "train_pytorch.py"


class Cluster:
    """`tessel serve` and its agents, as processes, in a temporary directory."""

    def __init__(self, tmp_path, write, settings):
        self.dir = tmp_path
        secret = write("secret", "a secret shared by the daemon and its agents\n")
        secret.chmod(0o600)
        config = write("cluster.toml", settings + '\n[output]\ndatabase = "cluster.db"\n')
        self.env = dict(os.environ, TESSEL_SECRET_FILE=str(secret))
        self.serve_err = open(tmp_path / "serve.err", "w")
        self.serve = subprocess.Popen([TESSEL, "serve", str(config), "--listen", "127.0.0.1:0"], cwd=tmp_path,
                                      env=self.env, stdout=subprocess.PIPE, stderr=self.serve_err, text=True)
        self.env["TESSEL_SCHEDULER"] = listening_address(self.serve, log=tmp_path / "serve.err")
        self.agents = {}

    def add_agent(self, name, gpus):
        with open(self.dir / f"{name}.err", "a") as err:
            self.agents[name] = subprocess.Popen(
                [TESSEL, "agent", "--fake-gpus", str(gpus), "--name", name, "--log-dir", str(self.dir / f"logs-{name}")],
                cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL, stderr=err)

    def tessel(self, *args):
        done = subprocess.run([TESSEL, *map(str, args)], cwd=self.dir, env=self.env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def jobs(self):
        return json.loads(self.tessel("jobs", "--format", "json"))

    def logs(self):
        return "".join(f"--- {path.name}:\n{path.read_text()}" for path in sorted(self.dir.glob("*.err")))

    def wait(self, condition, seconds, what):
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting until {what}\n{self.jobs()}\n{self.logs()}")
            time.sleep(0.2)

    def close(self):
        for process in [*self.agents.values(), self.serve]:
            process.terminate()
        for process in [*self.agents.values(), self.serve]:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.serve_err.close()


def submit_training(cluster, name, iterations):
    workdir = cluster.dir / name
    workdir.mkdir()
    out = cluster.tessel("submit", "--name", name, "--gpus", 4, "--iterations", iterations, "--grace-seconds", 10,
                         "--workdir", workdir, "--", sys.executable, TRAIN, "--iterations", iterations,
                         "--checkpoint-every", 5, "--hidden", 16, "--step-seconds", 0.05)
    return int(re.search(r"submitted job (\d+)", out).group(1))


def test_pytorch_job_is_preempted_loses_a_node_and_finishes_once(tmp_path, write):
    # srtf preempts the long job for the short one; max_retries = 0: a node
    # crash that used up a retry would fail the job for good.
    cluster = Cluster(tmp_path, write, """
        [scheduler]
        round_seconds = 0.5
        allocation = { plugin = "srtf" }
        placement = { plugin = "consolidated" }

        [serve]
        heartbeat_seconds = 0.2
        node_timeout_seconds = 30
        grace_seconds = 10
        max_retries = 0
        """)
    try:
        cluster.add_agent("n1", 2)
        cluster.add_agent("n2", 2)
        long = submit_training(cluster, "long", 150)
        cluster.wait(lambda: cluster.jobs()[long]["iteration"] >= 10, 90, "the long job trains")

        short = submit_training(cluster, "short", 10)
        cluster.wait(lambda: cluster.jobs()[short]["status"] == "finished", 90, "the short job finishes")
        cluster.wait(lambda: len(query(tmp_path / "cluster.db",
                                       "SELECT 1 FROM cluster_launches WHERE job_id = ? AND resume = 1 AND outcome IS NULL",
                                       long)) == 1 and cluster.jobs()[long]["status"] == "running",
                     60, "the long job runs again")
        resumed_at = cluster.jobs()[long]["iteration"]
        cluster.wait(lambda: cluster.jobs()[long]["iteration"] >= resumed_at + 5, 90, "the resumed job trains")

        # A node crash under the training: the agent of ranks 2 and 3 dies,
        # and its processes with it. Ranks 0 and 1 fail on losing their peers
        # (gloo); then a supervisor restarts the agent, well within the node
        # timeout, and it reports that it runs nothing.
        rank0_node, other = cluster.jobs()[long]["nodes"]
        assert rank0_node != other
        cluster.agents[other].send_signal(signal.SIGKILL)
        cluster.agents[other].wait()
        cluster.wait(lambda: query(tmp_path / "cluster.db",
                                   "SELECT count(*) FROM cluster_ranks JOIN cluster_launches USING (run_id, launch_id) "
                                   "WHERE job_id = ? AND resume = 1 AND outcome IS NOT NULL AND ended IS NULL "
                                   "AND node = ? AND exit_code IS NOT NULL", long, rank0_node) == [(2,)],
                     60, "the surviving ranks exit")
        cluster.add_agent(other, 2)
        cluster.wait(lambda: all(job["status"] == "finished" for job in cluster.jobs()), 120, "both jobs finish")
    finally:
        cluster.close()

    database = tmp_path / "cluster.db"
    launches = dict(query(database, "SELECT outcome, count(*) FROM cluster_launches WHERE job_id = ? GROUP BY outcome",
                          long))
    assert launches == {"preempted": 1, "lost": 1, "finished": 1}, launches
    assert query(database, "SELECT outcome FROM cluster_launches WHERE job_id = ?", short) == [("finished",)]
    assert query(database, "SELECT status, executed_work, total_work, attempts, preemptions FROM jobs ORDER BY job_id") == [
        ("finished", 150.0, 150.0, 1, 1), ("finished", 10.0, 10.0, 1, 0)]
    # Four processes per launch, over both nodes; the later launches resumed
    # from the checkpoint, and the training ran to its end once.
    assert query(database, "SELECT count(*), count(DISTINCT node) FROM cluster_ranks JOIN cluster_launches "
                           "USING (run_id, launch_id) WHERE job_id = ? GROUP BY launch_id", long) == [(4, 2)] * 3
    with open(tmp_path / "serve.err") as log:
        assert "died with its agent; counted as lost" in log.read()
    rank0_logs = "".join(path.read_text() for path in tmp_path.glob("logs-*/job-0/rank-0.log"))
    resumes = [int(n) for n in re.findall(r"rank 0: resumed from iteration (\d+)", rank0_logs)]
    assert len(resumes) == 2 and all(n > 0 for n in resumes), rank0_logs
    assert rank0_logs.count("rank 0: done at iteration 150 on cpu over gloo") == 1, rank0_logs


def test_pytorch_example_alone_uses_gloo_without_gpus_reports_progress_and_resumes(tmp_path):
    # One rank, as tessel starts it on a node whose GPUs are none to CUDA.
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    progress = tmp_path / "progress"
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               CUDA_VISIBLE_DEVICES="", TESSEL_PROGRESS=str(progress))
    env.pop("TESSEL_RESUME", None)

    def train(iterations, **extra):
        done = subprocess.run([sys.executable, TRAIN, "--iterations", str(iterations), "--checkpoint-every", "3",
                               "--hidden", "8"], cwd=tmp_path, env=dict(env, **extra), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = train(6)
    assert "resumed" not in out
    assert "rank 0: done at iteration 6 on cpu over gloo" in out
    assert progress.read_text().splitlines() == [f"iteration {n} of 6" for n in range(1, 7)]
    assert torch.load(tmp_path / "checkpoint.pt")["iteration"] == 6

    progress.unlink()
    out = train(9, TESSEL_RESUME="1")
    assert "rank 0: resumed from iteration 6" in out
    assert progress.read_text().splitlines() == [f"iteration {n} of 9" for n in range(7, 10)]

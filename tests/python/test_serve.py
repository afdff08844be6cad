"""A Python policy drives real nodes too: `tessel serve` with a Python
allocation and placement policy, one agent on loopback with fake GPUs, and
jobs that run real processes."""

import json
import os
import subprocess
import time

from conftest import BUILD, EXAMPLES, TESSEL, python_stage


def test_serve_runs_jobs_under_python_policies(tmp_path, write):
    secret = write("secret", "a secret shared by the daemon and its agents\n")
    secret.chmod(0o600)
    config = write("cluster.toml", f"""
        [scheduler]
        round_seconds = 1
        allocation = {python_stage(EXAMPLES / "smallest_first.py", "SmallestFirst")}
        placement = {python_stage(EXAMPLES / "tightest_fit.py", "TightestFit")}

        [serve]
        listen = "127.0.0.1:0"
        heartbeat_seconds = 1
        node_timeout_seconds = 5
        grace_seconds = 2

        [output]
        database = "cluster.db"
        """)
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), TESSEL_SECRET_FILE=str(secret))
    serve = subprocess.Popen([TESSEL, "serve", str(config)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    agent = None
    try:
        address = serve.stdout.readline().split()[-1]  # "listening on HOST:PORT"
        env["TESSEL_SCHEDULER"] = address
        agent = subprocess.Popen([TESSEL, "agent", "--fake-gpus", "4", "--name", "n0", "--log-dir", str(tmp_path / "logs")],
                                 cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ids = []
        for gpus in (2, 1):
            submitted = subprocess.run([TESSEL, "submit", "--gpus", str(gpus), "--", "sh", "-c", "sleep 0.5"],
                                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
            assert submitted.returncode == 0, submitted.stderr
            ids.append(submitted.stdout.strip())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listed = subprocess.run([TESSEL, "jobs", "--format", "json"], cwd=tmp_path, env=env,
                                    capture_output=True, text=True, timeout=30)
            jobs = json.loads(listed.stdout)
            if len(jobs) == 2 and all(job["status"] == "finished" for job in jobs):
                break
            time.sleep(0.2)
        assert [job["status"] for job in jobs] == ["finished", "finished"], (jobs, serve.stderr)
    finally:
        for process in (agent, serve):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)

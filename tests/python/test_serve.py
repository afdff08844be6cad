"""A Python policy drives real nodes too: `tessel serve` with a Python
allocation and placement policy, one agent on loopback with fake GPUs, and
jobs that run real processes; a policy that stops itself stops `serve`."""

import json
import os
import subprocess
import time

import pytest
from conftest import BUILD, EXAMPLES, TESSEL, ctrl_c, listening_address, python_stage, query, wait_for_file


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
        env["TESSEL_SCHEDULER"] = listening_address(serve)
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


def serve_python_allocation(tmp_path, write, module, cls):
    """Starts `tessel serve` with `cls` of `module` as its allocation policy;
    returns the process and the environment its clients need (add
    TESSEL_SCHEDULER from the process's first line to submit)."""
    secret = write("secret", "a secret shared by the daemon and its agents\n")
    secret.chmod(0o600)
    config = write("cluster.toml", f"""
        [scheduler]
        round_seconds = 1
        allocation = {python_stage(module, cls)}
        placement = {{ plugin = "first_fit" }}

        [serve]
        listen = "127.0.0.1:0"

        [output]
        database = "cluster.db"
        """)
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), TESSEL_SECRET_FILE=str(secret))
    serve = subprocess.Popen([TESSEL, "serve", str(config)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    return serve, env


def submit_one_job(tmp_path, serve, env):
    """Submits a one-GPU job to `serve`, once it listens."""
    env["TESSEL_SCHEDULER"] = listening_address(serve)
    submitted = subprocess.run([TESSEL, "submit", "--gpus", "1", "--", "true"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=30)
    assert submitted.returncode == 0, submitted.stderr


def test_serve_stops_as_for_ctrl_c_when_a_policy_raises_keyboardinterrupt(tmp_path, write):
    # The interrupt escaped the daemon's loop: `serve` said the run was
    # marked 'interrupted' and left it 'running'.
    write("policies/quits.py", """\
        import tessel
        class Quits:
            def allocate(self, view):
                if len(view.active()) > 0:
                    raise KeyboardInterrupt
                return tessel.AllocationPlan([])
        """)
    serve, env = serve_python_allocation(tmp_path, write, "policies/quits.py", "Quits")
    try:
        submit_one_job(tmp_path, serve, env)
        _, stderr = serve.communicate(timeout=30)
    finally:
        serve.kill()
    assert serve.returncode == 130, stderr
    assert "tessel serve: allocation plugin 'python' (" in stderr, stderr
    assert "policies/quits.py:5); the run is marked 'interrupted'" in stderr, stderr
    assert query(tmp_path / "cluster.db", "SELECT status FROM runs") == [("interrupted",)]


STUCK_IN_ALLOCATE = """\
    import tessel
    class Stuck:
        def allocate(self, view):
            if len(view.active()) > 0:
                open(MARKER, "w").close()
                while True:  # never returns to the daemon's loop
                    pass
            return tessel.AllocationPlan([])
    """

STUCK_IN_IMPORT = """\
    import tessel
    open(MARKER, "w").close()
    while True:  # the daemon is composing its scheduler
        pass
    class Stuck:
        def allocate(self, view):
            return tessel.AllocationPlan([])
    """


@pytest.mark.parametrize("policy", ["allocate", "import"])
def test_ctrl_c_stops_serve_while_its_policy_is_stuck(tmp_path, write, policy):
    # The stop was handled on the daemon's own thread, between its
    # handlers: a policy that never returned kept `serve` running for good.
    marker = tmp_path / "stuck"
    source = STUCK_IN_ALLOCATE if policy == "allocate" else STUCK_IN_IMPORT
    write("policies/stuck.py", source.replace("MARKER", repr(str(marker))))
    serve, env = serve_python_allocation(tmp_path, write, "policies/stuck.py", "Stuck")
    try:
        if policy == "allocate":
            submit_one_job(tmp_path, serve, env)
        wait_for_file(marker, serve)
        time.sleep(0.2)
        stderr, took = ctrl_c(serve)
    finally:
        serve.kill()
    assert took < 5, stderr
    assert serve.returncode == 130, stderr
    if policy == "allocate":  # where the policy was, at its loop's line
        assert "stuck.py:6); the run is marked 'interrupted'" in stderr, stderr
    else:
        assert "interrupted while allocation plugin 'python' loaded (in " in stderr, stderr
        assert "stuck.py:3); the run is marked 'interrupted'" in stderr, stderr
    assert query(tmp_path / "cluster.db", "SELECT status FROM runs") == [("interrupted",)]

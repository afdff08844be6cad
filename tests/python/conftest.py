"""Shared set-up for the pytest suite: the build tree's tessel package and
command, and experiments written into a temporary directory.

meson test runs this suite with TESSEL_BUILD_ROOT and TESSEL_EXE set; run
by hand it assumes ./build: PYTHONPATH=build/python python3 -m pytest tests/python
"""

import json
import os
import pathlib
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing

import pytest

ROOT = pathlib.Path(os.environ.get("TESSEL_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("TESSEL_BUILD_ROOT", ROOT / "build"))
TESSEL = os.environ.get("TESSEL_EXE", str(BUILD / "runners" / "cli" / "tessel"))
EXAMPLES = ROOT / "examples" / "python" / "policies"
POLICIES = ROOT / "tests" / "python" / "policies"

sys.path.insert(0, str(BUILD / "python"))


def small_cluster(jobs=120, jobs_per_hour=10, seed=1, allocation='{ plugin = "fifo" }',
                  placement='{ plugin = "consolidated" }', extra=""):
    """An experiment on 16 × 4 GPUs busy enough that policies differ."""
    return textwrap.dedent(f"""\
        [cluster]
        nodes = 16
        gpus_per_node = 4

        [workload]
        kind = "synthetic"
        jobs = {jobs}
        jobs_per_hour = {jobs_per_hour}
        seed = {seed}

        [scheduler]
        round_seconds = 300
        allocation = {allocation}
        placement = {placement}

        [output]
        database = "results.db"
        """) + textwrap.dedent(extra)


def python_stage(module, cls, **arguments):
    """A stage table for a Python policy: { plugin = "python", module = ..., class = ... }."""
    from tessel._bridge import toml_value

    extra = "".join(f", {key} = {toml_value(value)}" for key, value in arguments.items())
    return f'{{ plugin = "python", module = "{module}", class = "{cls}"{extra} }}'


@pytest.fixture
def write(tmp_path):
    """Writes a file under the test's directory; returns its path."""

    def write_file(name, text):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    return write_file


def cli(*args, cwd=None):
    """Runs the tessel command; returns the CompletedProcess."""
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    return subprocess.run([TESSEL, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def query(database, sql, *params):
    with closing(sqlite3.connect(database)) as connection:
        return connection.execute(sql, params).fetchall()


def wait_for_file(path, child, seconds=60):
    """Returns once `path` exists (a policy's sign that it is stuck); fails if `child` ends first."""
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert path.exists(), child.communicate(timeout=5)


def ctrl_c(child, seconds=60):
    """Sends Ctrl-C to `child` and waits for it; returns its stderr and the seconds it took to stop."""
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        _, stderr = child.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        child.kill()  # still looping: leave no process behind
        child.communicate()
        raise
    return stderr, time.monotonic() - sent


def listening_address(serve, seconds=60, log=None):
    """HOST:PORT from `tessel serve`'s first line ("listening on HOST:PORT"),
    waiting at most `seconds` for it; on failure the text of `log` (its
    stderr's file) is shown."""
    ready, _, _ = select.select([serve.stdout], [], [], seconds)
    line = serve.stdout.readline() if ready else ""
    assert line.startswith("listening on "), \
        f"serve's first line within {seconds} s: {line!r}" + ("\n" + log.read_text() if log else "")
    return line.split()[-1]


def slurm_reachable():
    if shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def need_slurm():
    """Skips a test that needs a Slurm controller when none answers sinfo;
    under scripts/test.sh (TESSEL_REQUIRE_SLURM=1) fails it instead."""
    if slurm_reachable():
        return
    if os.environ.get("TESSEL_REQUIRE_SLURM") == "1":
        pytest.fail("TESSEL_REQUIRE_SLURM=1 but no Slurm controller answers sinfo (scripts/slurm-local.sh start)")
    pytest.skip("no Slurm controller answers sinfo; scripts/test.sh starts one")

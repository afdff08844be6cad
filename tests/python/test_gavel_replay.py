"""Gavel's FIFO_Perf in tessel (fifo gpu_type = "fastest-reassigned",
min_seconds_between_allocations = 1920, completion = "exact-held") against
experiments/gavel-makespan/replay_gavel_fifo_perf.py, the replay of Gavel's
simulator loop, job for job, on a small hand-made case (no ../shared/data)."""

import importlib.util
import json
import sqlite3
from contextlib import closing

import pytest

from conftest import ROOT, cli, query

spec = importlib.util.spec_from_file_location(
    "replay_gavel_fifo_perf", ROOT / "experiments" / "gavel-makespan" / "replay_gavel_fifo_perf.py")
replay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replay)

# Whole steps per 360-s round everywhere, so that Gavel's int() of a round's
# steps loses nothing, and no ties between types (Gavel breaks them
# alphabetically, tessel by the cluster's order).
TABLE = {
    "v100": {"('Alpha', 1)": {"null": 6.0}, "('Alpha', 2)": {"null": 10.0}, "('Beta', 1)": {"null": 3.0}},
    "p100": {"('Alpha', 1)": {"null": 3.0}, "('Alpha', 2)": {"null": 5.0}, "('Beta', 1)": {"null": 2.0}},
    "k80": {"('Alpha', 1)": {"null": 1.0}, "('Alpha', 2)": {"null": 2.0}, "('Beta', 1)": {"null": 1.0}},
}
# Durations on a V100. Job 0 runs through every round, so Gavel's rounds
# (which end with their last job) keep to tessel's 360-s grid.
TRACE = """\
arrival,gpus,duration,model
0,1,7200,Alpha
0,1,600,Beta
0,2,720,Alpha
0,1,1800,Beta
0,1,360,Alpha
0,1,3600,Beta
0,1,1000,Alpha
0,2,400,Alpha
"""
CLUSTER = {"v100": 2, "p100": 2, "k80": 2}


def run(write, tmp_path, gpu_type):
    write("throughputs.json", json.dumps(TABLE))
    write("trace.csv", TRACE)
    groups = "".join(f'[[cluster.groups]]\ncount = 1\ngpus_per_node = {n}\ngpu_type = "{t}"\n'
                     for t, n in CLUSTER.items())
    experiment = write("experiment.toml", groups + f"""
[workload]
kind = "csv"
path = "trace.csv"
model = {{ name = "gavel-table", path = "throughputs.json" }}
reference_gpu_type = "v100"

[scheduler]
round_seconds = 360
allocation = {{ plugin = "fifo", gpu_type = "{gpu_type}", min_seconds_between_allocations = 1920 }}
placement = {{ plugin = "consolidated" }}

[simulation]
completion = "exact-held"

[output]
database = "{gpu_type}.db"
""")
    result = cli("run", experiment, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    database = tmp_path / f"{gpu_type}.db"
    finishes = [finish for (finish,) in query(database, "SELECT finish FROM jobs WHERE run_id = 1 ORDER BY job_id")]
    with closing(sqlite3.connect(database)) as db:
        jobs, throughputs = replay.jobs_of_run(db, 1, TABLE)
    return finishes, jobs, throughputs


def test_fifo_perf_finishes_every_job_when_gavels_loop_does(write, tmp_path):
    ours, jobs, throughputs = run(write, tmp_path, "fastest-reassigned")
    finish, makespan = replay.replay(jobs, throughputs, cluster=CLUSTER)
    assert ours == pytest.approx([finish[j] for j in sorted(finish)], rel=1e-9)
    assert max(ours) == pytest.approx(makespan, rel=1e-9)


def test_fastest_keeps_jobs_on_their_type_and_so_differs(write, tmp_path):
    # The same comparison fails for gpu_type = "fastest": it is not FIFO_Perf.
    ours, jobs, throughputs = run(write, tmp_path, "fastest")
    finish, _ = replay.replay(jobs, throughputs, cluster=CLUSTER)
    assert ours != pytest.approx([finish[j] for j in sorted(finish)], rel=1e-6)

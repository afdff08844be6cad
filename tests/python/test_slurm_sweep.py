"""Sweeps as Slurm job arrays: `tessel run --point`, `tessel merge`, and
`tessel run --slurm` against a real Slurm.

The tests marked `slurm` need a reachable Slurm controller (sinfo answers);
scripts/test.sh starts a single-node one (scripts/slurm-local.sh) and sets
TESSEL_REQUIRE_SLURM=1, which turns their skip into a failure.
"""

import json
import os
import shlex
import sqlite3
import subprocess
import time
from contextlib import closing

import pytest

from conftest import cli, need_slurm, query

SWEEP = """\
[cluster]
nodes = 4
gpus_per_node = 4

[workload]
kind = "synthetic"
jobs = 12
jobs_per_hour = 10
seed = 1

[scheduler]
round_seconds = 300
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }

[output]
database = "local.db"

[sweep]
"workload.jobs_per_hour" = [5, 10, 20]
"scheduler.allocation.plugin" = ["fifo", "las"]
seeds = [1, 2]
"""

# What a run is, apart from its id: the columns a merge must carry over.
FIGURES = "SELECT r.axes, m.name, m.value FROM runs r JOIN metrics m ON m.run_id = r.id WHERE r.status = 'complete'"


def figures(database):
    return sorted(query(database, FIGURES))


def rows_per_run(database, table):
    """{axes: rows of `table`, without run_id} for each complete run."""
    with closing(sqlite3.connect(database)) as db:
        columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})") if c[1] != "run_id"]
        result = {}
        for run_id, axes in db.execute("SELECT id, axes FROM runs WHERE status = 'complete'"):
            result[axes] = sorted(db.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE run_id = ?",
                                             (run_id,)).fetchall(), key=repr)
        return result


@pytest.fixture
def sweep(write):
    return write("sweep.toml", SWEEP)


def test_list_points_numbers_the_sweep_in_its_order(sweep):
    result = cli("run", sweep, "--list-points")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 12
    assert lines[0] == "0\tjobs_per_hour=5 plugin=fifo seed=1"
    assert lines[11] == "11\tjobs_per_hour=20 plugin=las seed=2"


def test_point_runs_that_point_alone_with_the_sweeps_figures(tmp_path, sweep):
    assert cli("run", sweep, "-q", "--db", tmp_path / "local.db").returncode == 0
    result = cli("run", sweep, "--point", "7", "--db", tmp_path / "seven.db", "-q")
    assert result.returncode == 0, result.stderr
    seven = figures(tmp_path / "seven.db")
    assert {axes for axes, _, _ in seven} == {'{"workload.jobs_per_hour":10,"scheduler.allocation.plugin":"las","seed":2}'}
    assert seven == [row for row in figures(tmp_path / "local.db") if row[0] == seven[0][0]]


def test_a_point_the_sweep_lacks_is_refused_naming_the_range(sweep):
    result = cli("run", sweep, "--point", "12")
    assert result.returncode == 2
    assert "--point 12" in result.stderr and "12 sweep points, numbered 0 to 11" in result.stderr


@pytest.mark.parametrize("flags", [["--max-parallel", "2"], ["--wait"], ["--slurm-opt", "--time=1"],
                                   ["--slurm", "--point", "1"], ["--slurm", "-j", "2"],
                                   ["--slurm", "--max-parallel", "0"]])
def test_contradictory_slurm_flags_are_refused(sweep, flags):
    result = cli("run", sweep, *flags)
    assert result.returncode == 2, result.stderr
    assert not (sweep.parent / "local.shards").exists()


def test_slurm_without_sbatch_on_path_exits_2(sweep, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    from conftest import TESSEL
    result = subprocess.run([TESSEL, "run", str(sweep), "--slurm"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 2
    assert "sbatch is not on PATH" in result.stderr


@pytest.mark.parametrize("option", ["--array=0-3", "-a 1", "--dependency afterok:1", "--output=x", "-J name"])
def test_sbatch_options_tessel_sets_itself_are_refused(sweep, option):
    result = cli("run", sweep, "--slurm", "--slurm-opt", f"--partition=cpu {option}")
    assert result.returncode == 2
    assert f"--slurm-opt '{option}'" in result.stderr


def make_shards(tmp_path, sweep, points):
    shards = []
    for point in points:
        shard = tmp_path / "shards" / f"{point}.db"
        result = cli("run", sweep, "--point", point, "--db", shard, "-q")
        assert result.returncode == 0, result.stderr
        shards.append(shard)
    return shards


def test_merge_copies_every_row_under_fresh_ids_and_twice_adds_nothing(tmp_path, sweep):
    shards = make_shards(tmp_path, sweep, [0, 3, 5])
    out = tmp_path / "out.db"
    # The output holds a run already, so shard ids 1 collide unless made fresh.
    assert cli("run", sweep, "--point", "11", "--db", out, "-q").returncode == 0
    result = cli("merge", out, *shards)
    assert result.returncode == 0, result.stderr
    assert "merged 3 runs from 3 databases" in result.stdout
    assert sorted(r[0] for r in query(out, "SELECT id FROM runs")) == [1, 2, 3, 4]
    for table in ("jobs", "samples", "metrics", "decisions", "resizes"):
        merged = rows_per_run(out, table)
        for shard in shards:
            for axes, rows in rows_per_run(shard, table).items():
                assert merged[axes] == rows, (table, axes)
    again = cli("merge", out, *reversed(shards))
    assert again.returncode == 0, again.stderr
    assert "merged 0 runs" in again.stdout and "(3 there already)" in again.stdout
    assert query(out, "SELECT count(*) FROM runs") == [(4,)]
    assert cli("report", out).returncode == 0


def test_merge_refuses_shards_of_another_schema_naming_them(tmp_path, sweep):
    shards = make_shards(tmp_path, sweep, [0, 1, 2])
    for old in shards[1:]:
        with closing(sqlite3.connect(old)) as db:
            db.execute("PRAGMA user_version = 5")
            db.commit()
    out = tmp_path / "out.db"
    result = cli("merge", out, *shards)
    assert result.returncode == 2
    assert f"{shards[1]} (schema 5), {shards[2]} (schema 5)" in result.stderr
    assert str(shards[0]) not in result.stderr
    assert not out.exists()


def test_merge_leaves_out_a_run_still_running_with_a_note(tmp_path, sweep):
    shards = make_shards(tmp_path, sweep, [0, 1])
    with closing(sqlite3.connect(shards[1])) as db:
        db.execute("UPDATE runs SET status = 'running'")
        db.commit()
    out = tmp_path / "out.db"
    result = cli("merge", out, *shards)
    assert result.returncode == 0, result.stderr
    assert f"{shards[1]}: run 1 is still 'running'" in result.stderr
    assert query(out, "SELECT status FROM runs") == [("complete",)]


@pytest.mark.parametrize("mistake", ["missing", "twice", "itself", "not_tessel"])
def test_merge_refuses_bad_shards(tmp_path, sweep, mistake):
    shards = make_shards(tmp_path, sweep, [0])
    out = tmp_path / "out.db"
    if mistake == "missing":
        args, expected = [shards[0], tmp_path / "nope.db"], "nope.db: no such results database"
    elif mistake == "twice":
        args, expected = [shards[0], shards[0]], "0.db: named twice"
    elif mistake == "itself":
        out = shards[0]
        args, expected = [shards[0]], "is the output database"
    else:
        other = tmp_path / "other.db"
        with closing(sqlite3.connect(other)) as db:
            db.execute("CREATE TABLE t (x)")
        args, expected = [shards[0], other], "other.db: not a tessel results database"
    result = cli("merge", out, *args)
    assert result.returncode == 2
    assert expected in result.stderr


# --- against a real Slurm -------------------------------------------------

def points_in_id_order(db):
    """Each run's point as --list-points writes it ("jobs_per_hour=5 plugin=las seed=2"), by run id."""
    with closing(sqlite3.connect(db)) as connection:
        return [" ".join(f"{key.split('.')[-1]}={value}" for key, value in json.loads(axes).items())
                for (axes,) in connection.execute("SELECT axes FROM runs ORDER BY id")]


def test_a_sweep_through_slurm_gives_the_local_runs_figures(tmp_path, sweep):
    need_slurm()
    assert cli("run", sweep, "-q", "--db", tmp_path / "local.db").returncode == 0
    out = tmp_path / "slurm" / "out.db"
    result = cli("run", sweep, "--slurm", "--max-parallel", "2", "--wait", "--db", out)
    assert result.returncode == 0, result.stderr + result.stdout
    assert figures(out) == figures(tmp_path / "local.db")
    assert len(figures(out)) > 12
    # The merge job takes the shards in point order (2.db before 10.db), so
    # the runs' ids follow the points.
    listed = [line.split("\t")[1] for line in cli("run", sweep, "--list-points").stdout.splitlines()]
    assert points_in_id_order(out) == listed
    shards = tmp_path / "slurm" / "out.shards"
    script = (shards / "sweep.sbatch").read_text()
    assert "#SBATCH --array=0,1,2,3,4,5,6,7,8,9,10,11%2" in script
    assert "--point \"$SLURM_ARRAY_TASK_ID\"" in script
    assert "afterany:" in (shards / "merge.sbatch").read_text()

    # Nothing is missing: --resume submits nothing.
    again = cli("run", sweep, "--slurm", "--resume", "--wait", "--db", out)
    assert again.returncode == 0, again.stderr
    assert "nothing to submit" in again.stderr


FAILING_POLICY = """\
import tessel


class FailsIf:
    def __init__(self, fail: bool = False):
        self.fail = fail

    def time_sensitive(self):
        return False

    def admit(self, view):
        if self.fail:
            raise RuntimeError("told to fail")
        return [tessel.AdmissionDecision(job.spec.id, tessel.AdmissionVerdict.admit, "ok") for job in view.pending()]
"""


def test_a_failed_task_shows_as_a_failed_run_and_resume_runs_only_it(tmp_path, write):
    need_slurm()
    policy = write("fails.py", FAILING_POLICY)
    config = write("failing.toml", SWEEP.replace(
        "round_seconds = 300",
        f'round_seconds = 300\nadmission = {{ plugin = "python", module = "{policy}", class = "FailsIf" }}').replace(
        'seeds = [1, 2]', 'seeds = [1, 2]\n"scheduler.admission.fail" = [false, true]').replace(
        '"workload.jobs_per_hour" = [5, 10, 20]\n', ''))
    listed = cli("run", config, "--list-points").stdout.splitlines()
    failing = [line.split("\t")[0] for line in listed if "fail=true" in line]
    assert len(failing) == 4
    out = tmp_path / "out.db"
    result = cli("run", config, "--slurm", "--wait", "--db", out)
    assert result.returncode == 1
    assert "4 of 8 points have no complete run" in result.stderr
    statuses = query(out, "SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
    assert statuses == [("complete", 4), ("failed", 4)]

    # Made to pass, --resume submits the failed points alone; on a terminal
    # (script(1) gives it one) --wait draws the local sweep's progress bar.
    policy.write_text(FAILING_POLICY.replace("if self.fail:", "if False:"))
    from conftest import TESSEL
    command = " ".join(shlex.quote(str(word)) for word in
                       [TESSEL, "run", config, "--slurm", "--resume", "--wait", "--db", out])
    again = subprocess.run(["script", "-q", "-e", "-c", command, "/dev/null"], capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stdout
    assert "] 0/4 runs" in again.stdout and "[" + "#" * 30 + "] 4/4 runs" in again.stdout
    assert f"#SBATCH --array={','.join(failing)}\n" in (tmp_path / "out.shards" / "sweep.sbatch").read_text()
    statuses = query(out, "SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
    assert statuses == [("complete", 8), ("failed", 4)]


def test_what_sbatch_refuses_is_the_users_mistake_and_without_wait_tessel_returns(tmp_path, sweep):
    need_slurm()
    out = tmp_path / "out.db"
    refused = cli("run", sweep, "--slurm", "--slurm-opt", "-p no_such_partition --time=5", "--db", out)
    assert refused.returncode == 2
    assert "sbatch refused" in refused.stderr and "sweep.sbatch" in refused.stderr
    script = (tmp_path / "out.shards" / "sweep.sbatch").read_text()
    assert "#SBATCH -p no_such_partition\n#SBATCH --time=5\n" in script

    submitted = cli("run", sweep, "--slurm", "--db", out)
    assert submitted.returncode == 0, submitted.stderr
    assert "as job array" in submitted.stderr and f"results: {out} (once job" in submitted.stdout
    merge_job = submitted.stdout.split("(once job ")[1].split()[0]
    # The merge job is there to wait for; when it has gone, OUT has every point.
    subprocess.run(["scontrol", "show", "job", merge_job], check=True, capture_output=True, timeout=60)
    deadline = time.monotonic() + 240
    while subprocess.run(["squeue", "-h", "-j", merge_job], capture_output=True, text=True,
                         timeout=60).stdout.strip():
        assert time.monotonic() < deadline, "the merge job did not end"
        time.sleep(0.5)
    assert query(out, "SELECT status, count(*) FROM runs GROUP BY status") == [("complete", 12)]

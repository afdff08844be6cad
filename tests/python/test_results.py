"""tessel.run and the DataFrames it gives back, against what the command
line prints for the same database."""

import json
import math
import sqlite3

import pytest
import tessel
from conftest import ROOT, cli, small_cluster
from tessel.results import Results


def test_run_returns_jobs_with_jct_and_queueing(tmp_path):
    res = tessel.run(ROOT / "experiments" / "quickstart.toml", db=tmp_path / "q.db", set={"workload.seed": 2})
    jobs = res.jobs
    assert len(jobs) == 400
    finished = jobs[jobs["status"] == "finished"]
    assert (finished["jct_s"] == finished["finish"] - finished["arrival"]).all()
    assert (jobs["queueing_s"] >= 0).all()
    assert list(res.runs["seed"]) == [2]  # the override reached the run


def test_report_equals_tessel_report(tmp_path, write):
    experiment = write("sweep.toml", small_cluster(jobs=60, extra="""
        [sweep]
        "workload.jobs_per_hour" = [6, 12]
        "scheduler.allocation.plugin" = ["fifo", "las"]
        seeds = [1, 2]
        """))
    res = tessel.run(experiment, db=tmp_path / "s.db", jobs=2)
    assert len(res.run_ids) == 8

    printed = json.loads(cli("report", tmp_path / "s.db", "--format", "json").stdout)
    ours = res.report()
    assert list(ours["run"]) == [row["run"] for row in printed]
    for row, (_, mine) in zip(printed, ours.iterrows()):
        for figure in ("jobs", "finished", "avg_jct_s", "p99_jct_s", "makespan_s", "gpu_utilization", "preemptions"):
            assert mine[figure] == row[figure]
        for axis, value in row["axes"].items():
            assert mine[axis] == value

    by = "workload.jobs_per_hour"
    printed = json.loads(cli("report", tmp_path / "s.db", "--by", by, "--format", "json").stdout)
    grouped = res.report(by=by)
    assert len(grouped) == len(printed) == 4
    for row, (_, mine) in zip(printed, grouped.iterrows()):
        assert (mine["series"], mine[by], mine["runs"]) == (row["series"], row[by], row["runs"])
        assert mine["avg_jct_s"] == row["avg_jct_s"]
        assert len(mine["run_ids"]) == 2  # the seeds averaged


def test_open_expands_sweep_axes_into_columns(tmp_path, write):
    experiment = write("sweep.toml", small_cluster(jobs=30, extra="""
        [sweep]
        "workload.jobs_per_hour" = [6, 12]
        """))
    tessel.run(experiment, db=tmp_path / "s.db")
    runs = tessel.open(tmp_path / "s.db").runs
    assert sorted(runs["workload.jobs_per_hour"]) == [6, 12]
    assert set(runs["status"]) == {"complete"}


def test_counts_are_integers_in_json(tmp_path):
    tessel.run(ROOT / "experiments" / "quickstart.toml", db=tmp_path / "q.db", set={"workload.jobs": 20})
    row = json.loads(cli("report", tmp_path / "q.db", "--format", "json").stdout)[0]
    assert isinstance(row["jobs"], int) and isinstance(row["preemptions"], int)


def test_a_workload_without_end_reads_back_like_any_run(tmp_path, write):
    # jobs = "until_tracked_done": the run stops when jobs 20..39 are done,
    # with later jobs still waiting or running; Python and `tessel report`
    # read it as they read any run.
    experiment = write("endless.toml", small_cluster(jobs='"until_tracked_done"', jobs_per_hour=60)
                       .replace("seed = 1\n", "seed = 1\ntrack = [20, 40]\n"))
    res = tessel.run(experiment, db=tmp_path / "e.db")
    jobs = res.jobs
    tracked = jobs[jobs["tracked"] == 1]
    assert list(tracked["job_id"]) == list(range(20, 40))
    assert (tracked["status"] == "finished").all()
    assert len(jobs) > 40 and (jobs["status"] != "finished").any()
    assert jobs["arrival"].max() <= tracked["finish"].max()
    printed = json.loads(cli("report", tmp_path / "e.db", "--format", "json").stdout)[0]
    assert printed["jobs"] == printed["finished"] == 20
    assert res.report()["avg_jct_s"][0] == printed["avg_jct_s"]
    assert "the run ended when the tracked jobs were done" in res.runs["note"][0]


def test_jct_bound_counts_the_jobs_a_run_gave_up_on(tmp_path, write):
    # With give_up_hours a run leaves tracked jobs unfinished; avg_jct_bound_s
    # counts each to the run's end, so it is above the average over those
    # that finished.
    from tessel import _tessel

    assert ("avg_jct_bound_s", "avg JCT bound (s)") in _tessel.figures()
    experiment = write("gave-up.toml", small_cluster(jobs='"until_tracked_done"', jobs_per_hour=60,
                                                     allocation='{ plugin = "las" }')
                       .replace("seed = 1\n", "seed = 1\ntrack = [20, 400]\ngive_up_hours = 2\n"))
    res = tessel.run(experiment, db=tmp_path / "g.db")
    tracked = res.jobs[res.jobs["tracked"] == 1]
    done = tracked[tracked["status"] == "finished"]
    assert len(done) < len(tracked) and "gave up" in res.runs["note"][0]
    end = res.runs["end_time"][0]
    bound = ((done["finish"] - done["arrival"]).sum()
             + (end - tracked[tracked["status"] != "finished"]["arrival"]).sum()) / len(tracked)
    report = res.report()
    assert report["avg_jct_bound_s"][0] == pytest.approx(bound)
    assert report["avg_jct_bound_s"][0] > report["avg_jct_s"][0]
    printed = json.loads(cli("report", tmp_path / "g.db", "--format", "json").stdout)[0]
    assert printed["avg_jct_bound_s"] == report["avg_jct_bound_s"][0]


def test_mistakes_raise_tessel_errors(tmp_path, write):
    with pytest.raises(tessel.ConfigError, match=r"bad\.toml:2:1: unknown key 'nodez'"):
        tessel.run(write("bad.toml", "[cluster]\nnodez = 3\n"), db=tmp_path / "x.db")
    with pytest.raises(tessel.Error, match="no such results database"):
        tessel.open(tmp_path / "missing.db")


def test_plots_for_a_paper(tmp_path, write):
    experiment = write("sweep.toml", small_cluster(jobs=40, extra="""
        [sweep]
        "workload.jobs_per_hour" = [6, 12]
        "scheduler.allocation.plugin" = ["fifo", "las"]
        seeds = [1, 2, 3]
        """))
    res = tessel.run(experiment, db=tmp_path / "s.db")
    for suffix in ("pdf", "png", "svg"):
        ax = res.plot_metric(by="workload.jobs_per_hour", output=tmp_path / f"jct.{suffix}")
        assert (tmp_path / f"jct.{suffix}").stat().st_size > 1000
    # One line per policy, each with error bars of the 95% CI over 3 seeds.
    bars = ax.containers
    assert len(bars) == 2
    grouped = res.report(by="workload.jobs_per_hour")
    per_run = res.report().set_index("run")["avg_jct_s"]
    row = grouped.iloc[0]
    values = [per_run[r] for r in row["run_ids"]]
    mean = sum(values) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
    assert row["avg_jct_s"] == pytest.approx(mean)
    low, high = bars[0].lines[1][0].get_ydata()[0], bars[0].lines[1][1].get_ydata()[0]
    scale = 1 / 3600 if "(h)" in ax.get_ylabel() else 1
    assert (high - low) / 2 == pytest.approx(4.303 * sd / math.sqrt(3) * scale)
    assert "JCT" in ax.get_ylabel() and ("(h)" in ax.get_ylabel() or "(s)" in ax.get_ylabel())
    legend = ax.get_legend()
    assert legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted()).x0 > 1  # outside the data

    ax = res.plot_cdf(output=tmp_path / "cdf.pdf")
    assert len(ax.get_lines()) == 12
    with pytest.raises(tessel.Error, match="unknown metric 'avg_jct' .*valid: .*avg_jct_s"):
        res.plot_metric(by="workload.jobs_per_hour", metric="avg_jct")
    with pytest.raises(tessel.Error, match="written as"):
        res.plot_metric(by="workload.jobs_per_hour", output=tmp_path / "jct.jpeg")


def test_a_file_that_is_not_a_results_database_is_refused_when_opened(tmp_path):
    # Once accepted, until pandas failed on a table ("no such table: jobs");
    # an empty file was made a database by report().
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    text = tmp_path / "text.db"
    text.write_text("not a database, just text long enough to be read as a header")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path, says in [(other, "not a tessel results database"), (text, "not an SQLite database"),
                       (empty, "an empty file, not a results database")]:
        with pytest.raises(tessel.Error, match=says):
            tessel.open(path)
    assert empty.stat().st_size == 0


def test_job_times_are_floats_even_when_no_job_started(tmp_path, write):
    # Jobs of 128 GPUs on a cluster of 64: none ever starts. Their
    # times once came back as objects (None), where NaN is promised.
    experiment = write("exp.toml", small_cluster(jobs=5))
    results = tessel.run(experiment, db=tmp_path / "r.db", set={"workload.gpu_counts": [128], "workload.gpu_weights": [1]})
    jobs = results.jobs
    assert len(jobs) == 5
    for column in ("first_start", "finish", "jct_s", "queueing_s"):
        assert jobs[column].dtype == "float64"
    assert jobs["first_start"].isna().all() and jobs["queueing_s"].isna().all()


def test_arguments_of_the_wrong_kind_are_refused_not_rounded(tmp_path, write):
    experiment = write("exp.toml", small_cluster(jobs=5))
    results = tessel.run(experiment, db=tmp_path / "r.db")
    with pytest.raises(TypeError, match=r"runs= takes run ids \(integers\), not \[1\.7\]"):
        Results(results.database, runs=[1.7])  # once run 1
    with pytest.raises(ValueError, match="runs= names a run twice"):
        Results(results.database, runs=[1, 1])  # once two rows of run 1
    assert Results(results.database, runs=results.runs["id"]).run_ids == [1]  # numpy integers
    for missing in (999, 2**70):  # once no rows, or pandas's and pybind11's errors, where report() says this
        with pytest.raises(tessel.Error, match=rf"r\.db: no run {missing}$"):
            Results(results.database, runs=[1, missing])
    with pytest.raises(TypeError, match="set= takes a dict"):
        tessel.run(experiment, db=tmp_path / "r.db", set="workload.seed=3")  # once AttributeError
    for jobs in (2.5, -1, True):
        with pytest.raises(ValueError, match="jobs= is how many simulations run at once"):
            tessel.run(experiment, db=tmp_path / "r.db", jobs=jobs)


def test_a_figure_over_no_jobs_is_nan_and_is_not_plotted(tmp_path, write):
    # Every job asks for more GPUs than the cluster has: none finishes. The
    # JCTs read as 0 s; then, as null, plot_metric failed on None.
    experiment = write("none.toml", small_cluster(jobs=5, extra="""
        [sweep]
        seeds = [1, 2]
        """))
    res = tessel.run(experiment, db=tmp_path / "n.db", set={"workload.gpu_counts": [128], "workload.gpu_weights": [1]})
    report = res.report()
    assert list(report["finished"]) == [0, 0]
    assert report["avg_jct_s"].isna().all() and report["makespan_s"].isna().all()
    assert res.report(by="seed")["avg_jct_s"].isna().all()
    with pytest.raises(tessel.Error, match="avg_jct_s has no value in the chosen runs"):
        res.plot_metric(by="seed", output=tmp_path / "jct.png")

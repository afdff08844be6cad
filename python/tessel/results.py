"""Results: the runs of a results database as pandas DataFrames.

Every table is read straight from SQLite with pandas, so what you see here
is what `sqlite3` or any pandas user sees; report() asks the C++ core for
the figures of `tessel report`, computed one way for every caller.
"""

import json
import numbers
import os
import sqlite3
from contextlib import closing

import pandas as pd

from tessel import _tessel


class Results:
    """The runs of one results database, or only `runs` (run ids) of it."""

    def __init__(self, database, runs=None):
        self.database = os.fspath(database)
        if not os.path.isfile(self.database):
            raise _tessel.Error(f"{self.database}: no such results database")
        # Refused here, as report() refuses it, rather than by pandas when a table is read.
        _tessel.check_results(self.database)
        if runs is not None:  # 1.7 read as run 1, and run 1 twice gave two rows
            runs = list(runs)
            if any(isinstance(r, bool) or not isinstance(r, numbers.Integral) for r in runs):
                raise TypeError(f"runs= takes run ids (integers), not {runs!r}")
            if len(set(runs)) != len(runs):
                raise ValueError(f"runs= names a run twice: {runs!r}")
            # A run that is not there read as no rows, where report() refused it.
            with closing(sqlite3.connect(self.database)) as connection:
                stored = {row[0] for row in connection.execute("SELECT id FROM runs")}
            for run in runs:
                if run not in stored:
                    raise _tessel.Error(f"{self.database}: no run {run}")
        self.run_ids = None if runs is None else [int(r) for r in runs]

    def __repr__(self):
        which = "all runs" if self.run_ids is None else f"runs {self.run_ids}"
        return f"<tessel.Results {self.database}: {which}>"

    # ------------------------------------------------------------ tables

    def _read(self, table, order):
        where, params = "", []
        if self.run_ids is not None:
            column = "id" if table == "runs" else "run_id"
            where = f" WHERE {column} IN ({','.join('?' * len(self.run_ids))})"
            params = self.run_ids
        with closing(sqlite3.connect(self.database)) as connection:
            return pd.read_sql_query(f"SELECT * FROM {table}{where} ORDER BY {order}", connection, params=params)

    @property
    def runs(self):
        """One row per run; each sweep axis is a column of its own, named by
        its config path ("workload.jobs_per_hour"); the seeds axis is `seed`."""
        runs = self._read("runs", "id")
        axes = [json.loads(text or "{}") for text in runs["axes"]]
        names = []
        for point in axes:
            names += [name for name in point if name not in names]
        for name in names:
            if name not in runs.columns:  # the seeds axis is the runs' seed column already
                runs[name] = [point.get(name) for point in axes]
        return runs

    @property
    def jobs(self):
        """One row per job and run, with its JCT (`jct_s`, finish − arrival)
        and queueing delay (`queueing_s`, first start − arrival) in seconds;
        NaN where the job never finished or never started."""
        jobs = self._read("jobs", "run_id, job_id")
        # Floats even where no job of the runs started or finished: SQLite's
        # NULLs alone read as objects (None).
        jobs[["first_start", "finish"]] = jobs[["first_start", "finish"]].astype(float)
        jobs["jct_s"] = jobs["finish"] - jobs["arrival"]
        jobs["queueing_s"] = jobs["first_start"] - jobs["arrival"]
        return jobs

    @property
    def samples(self):
        """The cluster over time: GPUs busy, jobs running and waiting.

        A row where a round changed these counts, and one at the run's last
        round; each row holds until the next one's time, so weigh rows by
        time (a plain mean over rows overweights the changes)."""
        return self._read("samples", "run_id, time")

    @property
    def resizes(self):
        """Every change of a running job's GPUs or layout."""
        return self._read("resizes", "run_id, time, job_id")

    @property
    def decisions(self):
        """Recorded decisions with their reasons ([output] decisions = true)."""
        return self._read("decisions", "run_id, time, job_id")

    # ----------------------------------------------------------- figures

    def report(self, by=None, over=(), group=None):
        """The figures `tessel report` prints, one row per run; with `by` (a
        sweep axis), one row per value of it in each series, averaged over
        seeds and the `over` axes, with the ids of the runs averaged; with
        group="vc", one row per virtual cluster."""
        if isinstance(over, str):
            over = [over]
        if self.run_ids == []:  # none of this call's points ran (resume): nothing to report
            return pd.DataFrame()
        text = _tessel.report_json(self.database, self.run_ids or [], by or "", list(over), group or "")
        rows = json.loads(text)
        if by is None:
            for row in rows:
                for name, value in row.pop("axes", {}).items():
                    row[name] = value
        return pd.DataFrame(rows)

    # ------------------------------------------------------------- plots

    def plot_cdf(self, output=None, ax=None):
        """The CDF of job completion times, one line per run. Writes `output`
        (.pdf, .png or .svg) if given; returns the matplotlib Axes."""
        from tessel.plots import plot_cdf

        return plot_cdf(self, output=output, ax=ax)

    def plot_metric(self, by, metric="avg_jct_s", over=(), output=None, ax=None):
        """`metric` against the sweep axis `by`, one line per series, with the
        mean ± 95% confidence interval over seeds (and `over` axes) as error
        bars. Writes `output` (.pdf, .png or .svg) if given; returns the Axes."""
        from tessel.plots import plot_metric

        return plot_metric(self, by=by, metric=metric, over=over, output=output, ax=ax)

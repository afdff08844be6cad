"""tessel from Python: run experiments, read their results as pandas
DataFrames, and write scheduling policies as Python classes.

    import tessel
    res = tessel.run("experiments/quickstart.toml", db="q.db", set={"workload.seed": 2})
    res.jobs                                   # one row per job
    res.report(by="workload.jobs_per_hour")    # the figures of `tessel report --by`
    tessel.open("results/blox-fig6-7.db").runs

A policy is a class with the stage's method (admit, allocate, place or
resize), named in the experiment file:

    allocation = { plugin = "python", module = "policies/sf.py", class = "SmallestFirst" }

It receives a read-only SchedulerView, the C++ core's own, and returns the
decisions of tessel.decisions, as a C++ plugin does.
"""

import os as _os
import warnings as _warnings

from tessel import _tessel
from tessel._bridge import ArgumentError
from tessel._tessel import (
    ANY_GPU_TYPE,
    AdmissionVerdict,
    Allocation,
    ClusterState,
    ConfigError,
    Error,
    Gpu,
    JobLayout,
    JobList,
    JobSpec,
    JobState,
    JobStatus,
    Node,
    NodeSpec,
    PolicyError,
    Resources,
    SchedulerSettings,
    SchedulerView,
    ServiceUnit,
    Shape,
    ThroughputModel,
    __version__,
)
from tessel.decisions import AdmissionDecision, AllocationPlan, Grant, PlacementChoice, ResizeProposal


def run(config, db=None, set=None, jobs=0, resume=False):
    """Simulates the experiment file `config`, every point of its [sweep] in
    parallel (`jobs` at once; 0: one per core), into the database `db`
    (default: its [output] database). `set` overrides config keys, as
    `--set` does: {"workload.seed": 2}. With `resume`, points that already
    have a complete run are skipped.

    Returns the Results of this call's runs. Ctrl-C stops the runs, marks them
    'interrupted' and raises KeyboardInterrupt; a mistake in the experiment or
    a policy raises tessel.Error (ConfigError, PolicyError) and marks the run
    'failed'."""
    from tessel._bridge import toml_value
    from tessel.results import Results

    if set is not None and not isinstance(set, dict):
        raise TypeError(f"set= takes a dict of config paths and values, like {{'workload.seed': 2}}, "
                        f"not {type(set).__name__}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:  # 2.5 and -1 were taken as 2 and a TypeError
        raise ValueError(f"jobs= is how many simulations run at once, an integer >= 0 (0: one per core), not {jobs!r}")
    overrides = [f"{key}={toml_value(value)}" for key, value in (set or {}).items()]
    database, runs, _points, _skipped, notes = _tessel.run(
        _os.fspath(config), overrides, _os.fspath(db) if db is not None else "", jobs, bool(resume))
    for note in notes:  # points run again with resume, and why
        _warnings.warn(note, stacklevel=2)
    return Results(database, runs=sorted(r for r in runs if r > 0))


def open(database):  # noqa: A001 - tessel.open, as the issue's users write it
    """The Results of every run in a results database."""
    from tessel.results import Results

    return Results(database)

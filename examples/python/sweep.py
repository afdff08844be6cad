#!/usr/bin/env python3
"""Runs sweep.toml (3 loads x 2 Python policies x 2 seeds, in parallel) and
draws average JCT against load, one line per policy, with the mean ± 95%
confidence interval over the seeds.

    PYTHONPATH=build/python python3 examples/python/sweep.py [figure.pdf]
"""

import pathlib
import sys

import tessel

here = pathlib.Path(__file__).resolve().parent
output = sys.argv[1] if len(sys.argv) > 1 else "python-sweep.pdf"

results = tessel.run(here / "sweep.toml", db="results/python-sweep.db")
table = results.report(by="workload.jobs_per_hour")
print(table[["series", "workload.jobs_per_hour", "runs", "avg_jct_s", "avg_queueing_delay_s", "preemptions"]]
      .to_string(index=False))
results.plot_metric(by="workload.jobs_per_hour", metric="avg_jct_s", output=output)
print(f"wrote {output}")

#!/usr/bin/env python3
"""testbed.toml on other runs of 480 consecutive jobs of philly.csv.

testbed.toml runs the 480 jobs at indices 62,000-62,479 of the Philly-derived
job list sorted by submit time, selected by a submit-time window. This script
runs the same configuration with the window moved to other first jobs and
prints, for each, a Markdown table row: the span of the jobs' submit times,
their GPU-seconds over what the 60 GPUs serve in that span, and YARN-CS's
average JCT over each Tiresias policy's (tessel's setup, then the simulator's
rules). README.md, "Which 480 jobs", shows its output.

The submit times are computed as tessel's pollux-csv reader does: seconds
after the earliest timestamp of the file, rows of 0 GPUs or 0 seconds
skipped, sorted stably (file order among equal times). A window starts at its
first job's submit time and ends halfway between its last job's and the
next's; a first job that shares its submit time with the job before it is
moved on to the next distinct time, and so is the end, so that the window
holds whole groups of equal times.

Usage (Python 3, standard library only), from the repository root:
    python3 experiments/tiresias/windows.py [--first N ...] [--jobs 480]
        [--trace PATH] [--tessel PATH]
--first defaults to the indices of README's table; --trace to
../shared/data/pollux/philly.csv; --tessel to build/runners/cli/tessel.
Exit status 2 for bad arguments or a missing or unreadable trace.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_TRACE = os.path.join(ROOT, "..", "shared", "data", "pollux", "philly.csv")
DEFAULT_FIRST = [2000, 10000, 18000, 26000, 34000, 42000, 50000, 58000, 62000, 66000, 74000]
CLUSTER_GPUS = 60  # n15g4.csv
POLICIES = [("2d-las", "yarn-cs"), ("2d-gittins", "yarn-cs"),
            ("2d-las-sim", "yarn-cs-sim"), ("2d-gittins-sim", "yarn-cs-sim")]


class UsageError(Exception):
    pass


def read_jobs(path):
    """[(submit seconds after the earliest, GPU-seconds)], sorted stably by submit time."""
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as error:
        raise UsageError(f"{path}: {error.strerror}") from error
    jobs = []
    for line, row in enumerate(rows, start=2):
        try:
            stamp = datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S")
            submitted = stamp.replace(tzinfo=timezone.utc).timestamp()  # no time zone, no DST
            duration, gpus = float(row["duration"]), int(row["num_gpus"])
        except (KeyError, TypeError, ValueError) as error:
            raise UsageError(f"{path}:{line}: expected timestamp,duration,num_gpus,... ({error})") from error
        jobs.append((submitted, duration, gpus))
    if not jobs:
        raise UsageError(f"{path}: no jobs")
    earliest = min(job[0] for job in jobs)  # over every row, skipped ones included, as pollux-csv
    usable = [(submitted - earliest, duration * gpus) for submitted, duration, gpus in jobs
              if gpus > 0 and duration > 0]
    return sorted(usable, key=lambda job: job[0])  # sorted() is stable


def window(jobs, first, count):
    """(start, end, first, last + 1) of the window holding jobs[first:last + 1]."""
    while 0 < first < len(jobs) and jobs[first - 1][0] == jobs[first][0]:
        first += 1
    stop = first + count
    while stop < len(jobs) and jobs[stop - 1][0] == jobs[stop][0]:
        stop += 1
    if stop >= len(jobs):
        raise UsageError(f"--first {first}: the trace has {len(jobs)} jobs, too few for a window of {count} "
                         f"with one after it")
    return jobs[first][0], (jobs[stop - 1][0] + jobs[stop][0]) / 2, first, stop


def average_jcts(tessel, start, end):
    """{policy: avg JCT s} of testbed.toml with its window set to [start, end]."""
    with tempfile.TemporaryDirectory() as scratch:
        database = os.path.join(scratch, "windows.db")
        run = subprocess.run([tessel, "run", os.path.join(HERE, "testbed.toml"), "-q", "-j", "2", "--db", database,
                              "--set", f"workload.window=[{start!r}, {end!r}]"],
                             capture_output=True, text=True, cwd=ROOT)
        if run.returncode != 0:
            sys.exit(f"windows.py: tessel run failed ({run.returncode}):\n{run.stderr}")
        report = subprocess.run([tessel, "report", database, "--format", "json"], capture_output=True, text=True)
        if report.returncode != 0:
            sys.exit(f"windows.py: tessel report failed ({report.returncode}):\n{report.stderr}")
    return {row["axes"]["policy"]: row["avg_jct_s"] for row in json.loads(report.stdout)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", type=int, nargs="+", default=DEFAULT_FIRST, metavar="N",
                        help="index of a window's first job (0-based, by submit time)")
    parser.add_argument("--jobs", type=int, default=480, help="jobs in a window (480)")
    parser.add_argument("--trace", default=DEFAULT_TRACE, help="the Philly-derived job list")
    parser.add_argument("--tessel", default=os.path.join(ROOT, "build", "runners", "cli", "tessel"))
    args = parser.parse_args()
    try:
        if args.jobs < 1 or any(first < 0 for first in args.first):
            raise UsageError("--jobs must be at least 1 and --first at least 0")
        jobs = read_jobs(args.trace)
        windows = [window(jobs, first, args.jobs) for first in args.first]
    except UsageError as error:
        print(f"windows.py: {error}", file=sys.stderr)
        return 2
    print("| First job | Jobs | Submitted over | Demand / capacity | "
          + " | ".join(f"{baseline} / {policy}" for policy, baseline in POLICIES) + " |")
    print("|---" * (4 + len(POLICIES)) + "|")
    for start, end, first, stop in windows:
        span = jobs[stop - 1][0] - start
        demand = sum(gpu_seconds for _, gpu_seconds in jobs[first:stop]) / (CLUSTER_GPUS * max(span, 1))
        jct = average_jcts(args.tessel, start, end)
        ratios = " | ".join(f"{jct[baseline] / jct[policy]:.2f}" for policy, baseline in POLICIES)
        print(f"| {first:,} | {stop - first} | {span / 3600:.1f} h | {demand:.1f} | {ratios} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes the bursty workload of Blox's Figure 13 as a tessel `csv` trace.

The workload, after msr-fiddle/blox simulator_runner/simulator_dual_load.py
(what the authors meant it to do; see README.md for what its code does):

  base   single-GPU jobs, Poisson arrivals at `--jobs-per-hour`, durations
         uniform in [36000, 86400] s (10 to 24 h; `_clean_sim_job`:
         random.randint(36000, 86400));
  bursts every `--burst-every-hours` (4) hours, for `--burst-hours` (2)
         hours, extra single-GPU jobs arrive as a Poisson process at
         `--burst-factor` (4) times the base rate, with durations uniform in
         [600, 3600] s (`_clean_sim_job_second_work`: random.randint(600,
         3600); `jobs_per_hour=4 * load`). The first burst starts at 4 h,
         as the code's first one does (it tests simulator_time % 14400).

Rows are sorted by arrival; the file holds the first `--jobs` jobs of the
merged stream, so that tessel's job ids (arrival order) count base and burst
jobs together, as Blox's job counter does. The `tenant` column says which
stream a job came from ("base" or "burst").

Python 3 standard library only; the same arguments give the same file.

  python3 make_bursty_trace.py --seed 1 -o bursty-8jph-seed1.csv
"""

import argparse
import random
import sys


def base_jobs(rng, jobs_per_hour, horizon):
    """Poisson arrivals in [0, horizon), each (arrival, duration)."""
    t = 0.0
    while True:
        t += rng.expovariate(jobs_per_hour / 3600.0)
        if t >= horizon:
            return
        yield t, rng.randint(36000, 86400)


def burst_jobs(rng, jobs_per_hour, every, length, horizon):
    """Poisson arrivals at `jobs_per_hour` inside [k*every, k*every + length), k >= 1."""
    start = every
    while start < horizon:
        t = start
        while True:
            t += rng.expovariate(jobs_per_hour / 3600.0)
            if t >= start + length or t >= horizon:
                break
            yield t, rng.randint(600, 3600)
        start += every


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs-per-hour", type=float, default=8, help="base arrival rate (default 8)")
    parser.add_argument("--jobs", type=int, default=10000, help="jobs in the file (default 10000)")
    parser.add_argument("--burst-every-hours", type=float, default=4)
    parser.add_argument("--burst-hours", type=float, default=2)
    parser.add_argument("--burst-factor", type=float, default=4, help="burst rate / base rate (default 4)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")
    args = parser.parse_args(argv)
    if args.jobs_per_hour <= 0 or args.jobs < 1 or args.burst_every_hours <= 0 or args.burst_hours < 0:
        parser.error("rates, counts and periods must be positive")

    # Long enough for `jobs` base jobs alone; the merged stream is cut below.
    horizon = 3600.0 * 2 * args.jobs / args.jobs_per_hour
    base_rng = random.Random(f"base-{args.seed}")
    burst_rng = random.Random(f"burst-{args.seed}")
    jobs = [(t, d, "base") for t, d in base_jobs(base_rng, args.jobs_per_hour, horizon)]
    jobs += [(t, d, "burst") for t, d in burst_jobs(burst_rng, args.burst_factor * args.jobs_per_hour,
                                                    3600.0 * args.burst_every_hours,
                                                    3600.0 * args.burst_hours, horizon)]
    jobs.sort()
    jobs = jobs[: args.jobs]

    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    with out:
        out.write("arrival,gpus,duration,tenant\n")
        out.write(f"# made by make_bursty_trace.py --jobs-per-hour {args.jobs_per_hour:g} --jobs {args.jobs} "
                  f"--burst-every-hours {args.burst_every_hours:g} --burst-hours {args.burst_hours:g} "
                  f"--burst-factor {args.burst_factor:g} --seed {args.seed}\n")
        for t, d, stream in jobs:
            out.write(f"{t:.1f},1,{d},{stream}\n")


if __name__ == "__main__":
    main()

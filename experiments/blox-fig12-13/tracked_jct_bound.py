#!/usr/bin/env python3
"""Average JCT of the tracked jobs of runs that gave up (give_up_hours).

`tessel report`'s avg JCT averages the tracked jobs that finished. A run
with jobs = "until_tracked_done" that gave up left some tracked jobs
unfinished; leaving them out flatters the policy that starved them. Here
each unfinished tracked job counts with its time in the system up to the
run's end: a lower bound on the average Blox's unending run would give.
Printed per sweep point (seeds averaged), with the unfinished jobs per seed.

  python3 tracked_jct_bound.py results/blox-fig12.db

Python 3 standard library only.
"""

import collections
import json
import sqlite3
import sys


def main(path):
    db = sqlite3.connect(path)
    points = collections.defaultdict(list)
    for run, axes, end in db.execute("SELECT id, axes, end_time FROM runs WHERE status = 'complete'"):
        jobs = db.execute("SELECT arrival, finish, status FROM jobs WHERE run_id = ? AND tracked = 1",
                          (run,)).fetchall()
        if not jobs:
            continue
        done = [finish - arrival for arrival, finish, status in jobs if status == "finished"]
        bound = sum((finish if status == "finished" else end) - arrival for arrival, finish, status in jobs)
        point = {k: v for k, v in json.loads(axes or "{}").items() if k != "seed"}
        points[json.dumps(point, sort_keys=True)].append(
            (sum(done) / len(done) / 3600 if done else float("nan"), bound / len(jobs) / 3600, len(jobs) - len(done)))
    print(f"{'sweep point':<70} {'avg JCT finished':>17} {'avg JCT bound':>14}  unfinished per seed")
    for point, runs in sorted(points.items()):
        finished = sum(r[0] for r in runs) / len(runs)
        bound = sum(r[1] for r in runs) / len(runs)
        print(f"{point:<70} {finished:>15.2f} h {bound:>12.2f} h  {[r[2] for r in runs]}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tracked_jct_bound.py RESULTS.db")
    main(sys.argv[1])

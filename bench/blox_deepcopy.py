#!/usr/bin/env python3
"""bench/blox_deepcopy.py: what Blox's synthesizer pays to copy its state.

Blox's synthesizer (msr-fiddle/blox, simulator_runner/predict_simulation.py)
deep-copies, for each of its nine candidates and every round, the job state
(a dict of job dicts), the cluster's GPU table, the policies and the pending
jobs, then simulates the copy. This times Python's copy.deepcopy of a job
state of the same shape: one dict per live job with the ~55 entries a Blox
job carries in simulation (scalars, a few small lists and dicts, including
the cpu_val and mem_val tables every job holds, and tracked_metrics), plus
one entry per finished job (JobState.finished_job). The GPU table (a pandas
DataFrame of 128 rows), the per-job stats Blox keeps for the 1,001 tracked
jobs and the policies are left out, so Blox copies more than this.

The job counts are those bench/synthesizer_forecast reports at hours 100,
200, 300 and 400 of the bursty run (live, and submitted minus live).
    python3 bench/blox_deepcopy.py
"""
import copy
import time

MOMENTS = [(100, 574, 2425), (200, 1123, 4878), (300, 1569, 7253), (400, 2065, 9625)]


def job(i):
    j = {f"scalar_{k}": float(i + k) for k in range(40)}  # ids, times, demands, penalties, counters
    j.update({f"flag_{k}": None for k in range(4)})        # task, command, tput, ...
    j["gpus"] = [i % 128]
    j["gpus_last_round"] = []
    j["cpu_ids"] = {}
    j["res_map"], j["util_map"], j["demand_map"] = {}, {}, {}
    j["cpu_val"] = {0: 1, 1: 2, 2: 3, 3: 4, 4: 5, 5: 6, 6: 9, 7: 12, 8: 24}
    j["mem_val"] = {0: 62.5, 1: 125, 2: 187.5, 3: 250}
    j["tracked_metrics"] = {"per_iter_time": 1.0, "attained_service": 300.0 * i}
    j["is_running"] = i % 2 == 0
    j["simulation"] = True
    return j


def best_of(n, f):
    best = float("inf")
    for _ in range(n):
        start = time.process_time()
        f()
        best = min(best, time.process_time() - start)
    return best


print("blox_deepcopy: copy.deepcopy of a Blox-shaped job state; best of 5, CPU time")
print(f"{'hour':>6} {'live':>6} {'done':>6} | {'one copy (ms)':>13} {'us/live':>8} | {'9 copies (ms)':>13}")
for hour, live, known in MOMENTS:
    state = {"active_jobs": {i: job(i) for i in range(live)},
             "finished_job": {i: 1 for i in range(known - live)}}
    one = best_of(5, lambda: copy.deepcopy(state))
    print(f"{hour:>6} {live:>6} {known - live:>6} | {1000 * one:>13.1f} {1e6 * one / live:>8.1f} | {9000 * one:>13.0f}")

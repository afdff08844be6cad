#!/usr/bin/env python3
"""Replays Gavel's simulator with FIFO_Perf on the jobs of tessel runs.

Gavel's own code cannot run here (its scheduler imports cvxpy and grpc,
which this machine lacks), so this follows its simulation loop, read from
stanford-futuredata/gavel at c4fa40097339e9608ab71fd64c8bdea96a5e4a4c:

- scheduler/scheduler.py `simulate`: rounds back to back; a round ends when
  the last of its jobs does (`max_timestamp`), each job running
  `min(int(throughput * 360), remaining)` steps (`_get_num_steps`) and
  finishing after `steps / throughput` (`_get_job_steps_and_finish_times`);
  a job's completion time is that exact finish.
- `_update_priorities`: the allocation is recomputed when the job set
  changed and 1,920 s have passed since the last reset, or the last reset
  was at time 0 (`minimum_time_between_allocation_resets`).
- policies/fifo.py `FIFOPolicy.get_allocation`, mode 'perf': the allocation
  is cleared; jobs in id order each get the type with the highest
  throughput among those (alphabetical) with room for their scale factor;
  the first job with no room stops the loop.
- `_schedule_jobs_on_workers_helper`: FIFO jobs run only where their
  allocation is positive; every allocated job fits, so each runs every
  round.

For each run of the tessel database given (all jobs arriving at 0), it
takes the jobs (type, GPUs, steps) and prints the replayed makespan beside
tessel's. Usage:
    /usr/bin/python3 experiments/gavel-makespan/replay_gavel_fifo_perf.py results/gavel-fifo-perf.db
"""
import argparse
import json
import sqlite3
from pathlib import Path

ROUND_SECONDS = 360.0           # run_sweep_static.py -i (default 360)
MIN_SECONDS_BETWEEN_RESETS = 1920.0  # Scheduler(minimum_time_between_allocation_resets=1920)
CLUSTER = {"v100": 36, "p100": 36, "k80": 36}  # run_sweep_static.py -c 36:36:36


def fifo_perf_allocation(job_ids, jobs, throughputs, cluster):
    """FIFOPolicy.get_allocation in mode 'perf' for the active `job_ids`: job id -> worker type."""
    available = dict(cluster)
    types = sorted(t for t in available if available[t] > 0)
    allocation = {}
    for job_id in sorted(job_ids):
        if not types:
            break
        scale_factor = jobs[job_id]["gpus"]
        room = [t for t in types if available[t] >= scale_factor]
        if not room:
            break
        best, best_throughput = None, -1.0
        for t in room:
            if throughputs[job_id][t] > best_throughput:
                best, best_throughput = t, throughputs[job_id][t]
        if best_throughput > 0:
            allocation[job_id] = best
            available[best] -= scale_factor
            if available[best] == 0:
                types.remove(best)
    return allocation


def replay(jobs, throughputs, cluster=CLUSTER, round_seconds=ROUND_SECONDS,
           min_seconds_between_resets=MIN_SECONDS_BETWEEN_RESETS):
    """Returns ({job id: finish time}, makespan) for jobs all added at 0."""
    remaining = {j: job["steps"] for j, job in jobs.items()}
    finish = {}
    now = 0.0
    last_reset = 0.0
    need_update = True  # add_job at time 0
    allocation = {}
    while remaining:
        if need_update and (now - last_reset >= min_seconds_between_resets or last_reset == 0):
            last_reset = now
            allocation = fifo_perf_allocation(remaining, jobs, throughputs, cluster)
            need_update = False
        round_end = now
        done = []
        for job_id, worker_type in allocation.items():
            if job_id not in remaining:
                continue
            throughput = throughputs[job_id][worker_type]
            steps = min(int(throughput * round_seconds), remaining[job_id])
            end = now + steps / throughput
            round_end = max(round_end, end)
            remaining[job_id] -= steps
            if remaining[job_id] <= 0:
                finish[job_id] = end
                done.append(job_id)
        if round_end == now:
            raise RuntimeError(f"no job runs at {now} s: {len(remaining)} left")
        for job_id in done:
            del remaining[job_id]
            need_update = True  # _remove_job
        now = round_end
    return finish, now


def jobs_of_run(db, run_id, table):
    jobs, throughputs = {}, {}
    rows = db.execute("SELECT job_id, model, gpus, total_work, arrival FROM jobs WHERE run_id = ? ORDER BY job_id",
                      (run_id,))
    for job_id, model, gpus, total_work, arrival in rows:
        if arrival != 0:
            raise SystemExit(f"run {run_id}: job {job_id} arrives at {arrival} s; the replay needs every job at 0")
        key = str((model, gpus))
        jobs[job_id] = {"gpus": gpus, "steps": total_work}
        throughputs[job_id] = {t: table[t][key]["null"] for t in CLUSTER}
    return jobs, throughputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database")
    parser.add_argument("--throughputs", default=str(Path(__file__).resolve().parents[3] / "shared/data/gavel/"
                                                   "simulation_throughputs.json"))
    parser.add_argument("--label", help="only runs whose axes contain this text")
    args = parser.parse_args()
    table = json.loads(Path(args.throughputs).read_text())
    db = sqlite3.connect(args.database)
    runs = db.execute("SELECT id, label, axes FROM runs WHERE status = 'complete' ORDER BY id").fetchall()
    print(f"{'run':>4}  {'axes':<45} {'makespan: tessel h':>18} {'replay h':>9} {'ratio':>6}"
          f" {'avg JCT: tessel h':>17} {'replay h':>9} {'ratio':>6}", flush=True)
    for run_id, label, axes in runs:
        if args.label and args.label not in (axes or ""):
            continue
        jobs, throughputs = jobs_of_run(db, run_id, table)
        finish, makespan = replay(jobs, throughputs)
        avg_jct = sum(finish.values()) / len(finish)  # every job arrives at 0
        ours, our_jct = db.execute("SELECT MAX(finish) - MIN(arrival), AVG(finish - arrival) FROM jobs WHERE run_id = ?",
                                   (run_id,)).fetchone()
        print(f"{run_id:>4}  {axes or label:<45} {ours / 3600:>18.2f} {makespan / 3600:>9.2f} {ours / makespan:>6.3f}"
              f" {our_jct / 3600:>17.2f} {avg_jct / 3600:>9.2f} {our_jct / avg_jct:>6.3f}")


if __name__ == "__main__":
    main()

"""Job-by-job comparison with Synergy's own simulator.

msr-fiddle/synergy's runner.py logs every job it generates ("[job:ID:MODEL:
GPUS:CPUS:MEM (ARRIVAL s,ITERATIONS)] : Starting at ..., dur = SECONDS") and
every job it finishes ("[ID] : Finished MODEL at HOURShrs, arrival:HOURShrs").

  python3 synergy_log.py trace out.log trace.csv
      writes the generated jobs as a tessel CSV trace (arrival, gpus,
      duration at the proportional share, model), to run with
      artifact.toml's rules: --set workload.kind=\"csv\" ... (README)
  python3 synergy_log.py compare out.log results.db [RUN]
      compares each job's JCT in the log with the run's (the first run by
      default), over the jobs the log saw finish
"""
import re
import sqlite3
import sys

START = re.compile(r"\[job:(\d+):([\w]+):(\d+):[\d.]+:[\d.]+ \(([\d.]+) s,(\d+)\)\] : Starting at [\d.]+s, "
                   r"arr = [\d.]+, dur = ([\d.]+)")
FINISH = re.compile(r"\[(\d+)\] : Finished \w+ at ([\d.]+)hrs, arrival:([\d.]+)hrs")


def started(log):
    jobs = {}
    for line in open(log):
        m = START.search(line)
        if m:
            jid, model, gpus, arrival, _, duration = m.groups()
            jobs[int(jid)] = (float(arrival), int(gpus), float(duration), model)
    return jobs


def finished(log):
    """Finish times in hours, as logged: to 0.01 h, which tells the 300-s rounds apart."""
    ends = {}
    for line in open(log):
        m = FINISH.search(line)
        if m:
            ends[int(m.group(1))] = float(m.group(2))
    return ends


def write_trace(log, out):
    jobs = started(log)
    with open(out, "w") as f:
        f.write("arrival,gpus,duration,model\n")
        for jid in sorted(jobs):  # ids follow arrivals; tessel numbers jobs in file order
            arrival, gpus, duration, model = jobs[jid]
            f.write(f"{arrival:.0f},{gpus},{duration!r},{model}\n")
    print(f"{len(jobs)} jobs, last arrival {max(a for a, *_ in jobs.values()) / 3600:.1f} h")


def compare(log, db, run=None):
    arrival = {jid: job[0] / 3600 for jid, job in started(log).items()}
    theirs = finished(log)
    with sqlite3.connect(db) as c:
        if run is None:
            run = c.execute("select min(id) from runs").fetchone()[0]
        ours = {jid: fin / 3600 for jid, fin in
                c.execute("select job_id, finish from jobs where run_id = ? and finish is not null", (run,))}
    common = sorted(set(theirs) & set(ours))
    if not common:
        sys.exit("no job finished in both")
    # Same round: the finish times agree to the log's 0.01 h (a round is 0.083 h).
    same = sum(abs(theirs[j] - ours[j]) < 0.006 for j in common)
    within = sum(abs(theirs[j] - ours[j]) < 0.09 for j in common)
    mean_t = sum(theirs[j] - arrival[j] for j in common) / len(common)
    mean_o = sum(ours[j] - arrival[j] for j in common) / len(common)
    print(f"run {run}: {len(common)} jobs finished in both; in the same round {same} "
          f"({100 * same / len(common):.1f} %), within one round {within} ({100 * within / len(common):.1f} %); "
          f"mean JCT Synergy {mean_t:.3f} h, tessel {mean_o:.3f} h")
    worst = sorted(common, key=lambda j: -abs(theirs[j] - ours[j]))[:5]
    for j in worst:
        print(f"  job {j}: finished at {theirs[j]:.2f} h in Synergy, {ours[j]:.2f} h in tessel")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "trace":
        write_trace(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None)
    else:
        sys.exit(__doc__)

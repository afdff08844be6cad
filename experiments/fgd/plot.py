#!/usr/bin/env python3
"""Figures of experiments/fgd from its results database, through gnuplot.

  python3 experiments/fgd/plot.py results/fgd.db experiments/fgd

writes, in the second directory:
  alloc.svg             final GPU allocation per policy, ours (mean of the
                        seeds, from the metrics table, as `tessel report`
                        computes it) beside the published one
  alloc-vs-arrived.svg  GPU allocation as the pods arrive (the paper's Fig.
                        9a): pods are placed in arrival order, once, and
                        never leave, so after k arrivals the allocation is
                        what the first k jobs hold at the end
"""
import collections
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

# Weng et al., ATC'23, Fig. 9a at 130% arrived; the means of
# hkust-adsl/kubernetes-scheduler-simulator
# experiments/analysis/expected_results/analysis_allo_discrete.csv
# (openb_pod_list_default, column 130, seeds 42-51).
PUBLISHED = {"Random": 87.47, "DotProd": 90.85, "GpuClustering": 91.88, "GpuPacking": 92.00,
             "BestFit": 93.08, "FGD": 95.39}


def main(db_path, out_dir):
    db = sqlite3.connect(db_path)
    runs = db.execute("SELECT id, axes, cluster_gpus FROM runs WHERE status = 'complete'").fetchall()
    finals = collections.defaultdict(list)
    curves = collections.defaultdict(list)
    for run_id, axes, cluster_gpus in runs:
        policy = json.loads(axes).get("scheduler.placement")
        if policy not in PUBLISHED:
            continue
        (value,) = db.execute("SELECT value FROM metrics WHERE run_id = ? AND name = 'gpu_allocation'",
                              (run_id,)).fetchone()
        finals[policy].append(100 * value)
        total = cluster_gpus * 1000.0
        arrived = held = 0.0
        curve = [0.0] * 131  # allocation (%) once x% of the GPUs have arrived, x = 0..130
        for gpus, milli, held_gpus in db.execute(
                "SELECT gpus, gpu_milli, held_gpus FROM jobs WHERE run_id = ? ORDER BY job_id", (run_id,)):
            arrived += gpus * milli
            held += held_gpus * milli
            x = int(100 * arrived / total)
            for i in range(x, 131):
                curve[i] = 100 * held / total
        curves[policy].append(curve)

    order = [p for p in PUBLISHED if p in finals]
    with tempfile.TemporaryDirectory() as tmp:
        bars = Path(tmp) / "bars.dat"
        bars.write_text("".join(f'"{p}" {PUBLISHED[p]} {sum(finals[p]) / len(finals[p]):.3f}\n' for p in order))
        lines = Path(tmp) / "curves.dat"
        with lines.open("w") as out:
            for p in order:
                out.write(f'"{p}"\n')
                for x in range(131):
                    out.write(f"{x} {sum(c[x] for c in curves[p]) / len(curves[p]):.3f}\n")
                out.write("\n\n")
        script = f"""
set terminal svg size 900,450 font 'sans,12'
set output '{Path(out_dir) / "alloc.svg"}'
set title 'Final GPU allocation, openb default trace, 130% of the GPUs asked'
set ylabel 'GPU allocation (%)'
set yrange [85:97]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key top left
set grid ytics
plot '{bars}' using 2:xtic(1) title "published (ATC'23)", '' using 3 title 'tessel (mean of 10 seeds)'
set output '{Path(out_dir) / "alloc-vs-arrived.svg"}'
set title 'GPU allocation as pods arrive (tessel, mean of 10 seeds); below 60% all policies place every pod'
set xlabel 'GPUs asked by the pods arrived (% of the cluster)'
set ylabel 'GPU allocation (%)'
set xrange [60:130]
set yrange [60:100]
set key bottom right
set style data lines
plot for [i=0:{len(order) - 1}] '{lines}' index i using 1:2 title columnheader(1) lw 2
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    for p in order:
        print(f"{p:14} published {PUBLISHED[p]:6.2f}  tessel {sum(finals[p]) / len(finals[p]):6.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""GPU counts of Synergy's multi-GPU Philly-derived trace, as weights.

Synergy's simulator (msr-fiddle/synergy, simulator/helpers/
parse_philly_trace_full.py, with --multigpu and the default exponential
mode) keeps Philly jobs that ran between 60*10^1.5 s and 60*10^4 s, drops
jobs of more than 16 GPUs and counts every GPU count other than 1, 2, 4, 8
and 16 as 1; durations and arrivals are then redrawn. The Philly trace
itself (cluster_job_log) is not in ../shared/data; Pollux's job list
derived from it (pollux/philly.csv: duration and num_gpus per job) is, so
the same filter is applied to that list.

Usage: python3 experiments/synergy/gpu_mix.py [path/to/philly.csv]
Prints the gpu_counts and gpu_weights lines for [workload].
"""
import csv
import sys
from collections import Counter
from pathlib import Path

default = Path(__file__).resolve().parents[3] / "shared" / "data" / "pollux" / "philly.csv"
path = Path(sys.argv[1]) if len(sys.argv) > 1 else default
low, high = 60 * 10 ** 1.5, 60 * 10 ** 4
counts = Counter()
with open(path, newline="") as f:
    for row in csv.DictReader(f):
        gpus, duration = int(float(row["num_gpus"])), float(row["duration"])
        if not low < duration < high or gpus > 16:
            continue
        counts[gpus if gpus in (1, 2, 4, 8, 16) else 1] += 1
total = sum(counts.values())
sizes = sorted(counts)
print(f"# {total} jobs of {path.name}")
print("gpu_counts = [" + ", ".join(str(g) for g in sizes) + "]")
print("gpu_weights = [" + ", ".join(f"{counts[g] / total:.4f}" for g in sizes) + "]")

#!/usr/bin/env python3
"""bench/python_policy.py: what writing a policy in Python costs.

Runs the same simulation with the C++ `fifo` and `las` plugins and with
their Python twins (examples/python/policies/fifo.py, las.py), which make
the same decisions job for job, and prints each Python run's wall time as a
multiple of the C++ run's. Target: at most 10x.

Two workloads:
  quickstart  experiments/quickstart.toml: 400 jobs on 32 x 4 GPUs
  single-gpu  5,000 single-GPU jobs of Gavel's generator on 128 GPUs at
              7 jobs/h (about the cluster's capacity, so a queue builds),
              300-s rounds, completions held to round ends

Each pair runs back to back, best of 3, so the ratio is measured in one
sitting on the same machine (this 2-core machine is noisy: quote ratios).
    PYTHONPATH=build/python python3 bench/python_policy.py
"""

import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "python"))
import tessel  # noqa: E402

POLICIES = ROOT / "examples" / "python" / "policies"
TARGET = 10.0

SINGLE_GPU = {
    "workload.jobs": 5000,
    "workload.jobs_per_hour": 7,
    "workload.gpu_counts": [1],
    "workload.gpu_weights": [1.0],
    "simulation.completion": "round",
}


def python_stage(module, cls):
    return {"plugin": "python", "module": str(POLICIES / module), "class": cls}


def timed(overrides, scratch, repeats=3):
    best = float("inf")
    for i in range(repeats):
        started = time.perf_counter()
        res = tessel.run(ROOT / "experiments" / "quickstart.toml", db=scratch / f"{time.monotonic_ns()}.db",
                         set=overrides)
        best = min(best, time.perf_counter() - started)
    return best, res


def main():
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        scratch = pathlib.Path(directory)
        for workload, base in (("quickstart", {}), ("single-gpu", SINGLE_GPU)):
            for cpp, (module, cls) in (("fifo", ("fifo.py", "Fifo")), ("las", ("las.py", "Las"))):
                native, native_res = timed({**base, "scheduler.allocation": {"plugin": cpp}}, scratch)
                python, python_res = timed({**base, "scheduler.allocation": python_stage(module, cls)}, scratch)
                same = (native_res.jobs[["job_id", "first_start", "finish"]].values.tolist()
                        == python_res.jobs[["job_id", "first_start", "finish"]].values.tolist())
                rows.append((workload, cpp, native, python, same))

    print(f"{'workload':<12} {'policy':<6} {'C++ s':>8} {'Python s':>9} {'ratio':>6} {'of target':>9}  same JCTs")
    for workload, policy, native, python, same in rows:
        ratio = python / native
        print(f"{workload:<12} {policy:<6} {native:8.3f} {python:9.3f} {ratio:5.1f}x {ratio / TARGET:8.2f}x  "
              f"{'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()

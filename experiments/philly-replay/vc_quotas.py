#!/usr/bin/env python3
"""Per-VC GPU quotas for vc_fair_share, derived from a Philly job list.

Philly's real per-VC quotas are not published. As a stand-in, this script
splits the cluster's GPUs between the virtual clusters (VCs) of the trace:

  1. each VC is first guaranteed its largest job (a VC whose largest job does
     not fit in its quota could never run that job when idle GPUs are not
     lent, lend_idle = false);
  2. the GPUs left are divided in proportion to each VC's share of the
     trace's GPU-time, the sum of num_gpus x duration over its jobs.

    quota(vc) = largest(vc) / G + (1 - sum of largest / G) * gpu_time(vc) / total gpu_time

as a share of the G GPUs of the cluster (2,490 for Philly). Shares are in
millionths: the guarantee rounded up, the proportional part rounded down,
so that every VC's quota holds its largest job and the shares sum to at most
1, as vc_fair_share requires. Arithmetic is exact (fractions of the CSV's
decimal fields). Rows that tessel's pollux-csv reader skips (0 GPUs or 0
seconds) are skipped here too.

Usage (Python 3, standard library only):
    python3 vc_quotas.py [TRACE] [--gpus G]
TRACE defaults to ../../../shared/data/pollux/philly.csv next to this file,
G to 2490. Prints the `quotas = { ... }` table used in philly-replay.toml,
then, as TOML comments, each VC's jobs, largest job, GPU-hours and quota.
"""
import argparse
import csv
import os
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TRACE = os.path.join(HERE, "..", "..", "..", "shared", "data", "pollux", "philly.csv")
MILLION = 10 ** 6


def read_vcs(path):
    """{vc: [jobs, largest job's GPUs, GPU-seconds]} over the usable rows."""
    vcs = {}
    with open(path, newline="") as trace:
        for row in csv.DictReader(trace):
            gpus, duration = int(row["num_gpus"]), Fraction(row["duration"])
            if gpus == 0 or duration == 0:
                continue
            entry = vcs.setdefault(row["cluster"], [0, 0, Fraction(0)])
            entry[0] += 1
            entry[1] = max(entry[1], gpus)
            entry[2] += gpus * duration
    return vcs


def quotas(vcs, cluster_gpus):
    """[(vc, jobs, largest, gpu_seconds, quota in millionths)], largest GPU-time first."""
    guaranteed = {vc: -(-largest * MILLION // cluster_gpus) for vc, (_, largest, _) in vcs.items()}  # rounded up
    rest = MILLION - sum(guaranteed.values())
    if rest < 0:
        raise SystemExit("the VCs' largest jobs need more than the cluster's %d GPUs" % cluster_gpus)
    total = sum(seconds for _, _, seconds in vcs.values())
    order = sorted(vcs, key=lambda vc: (-vcs[vc][2], vc))
    return [(vc, vcs[vc][0], vcs[vc][1], vcs[vc][2],
             guaranteed[vc] + int(rest * vcs[vc][2] / total))  # int() rounds the positive part down
            for vc in order]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=DEFAULT_TRACE, help="a pollux-csv job list")
    parser.add_argument("--gpus", type=int, default=2490, help="GPUs in the cluster (default: 2490, Philly)")
    args = parser.parse_args()
    table = quotas(read_vcs(args.trace), args.gpus)
    print("quotas = { " + ", ".join('"%s" = %d.%06d' % (vc, q // MILLION, q % MILLION)
                                    for vc, _, _, _, q in table) + " }")
    print("# shares sum to %.6f of %d GPUs" % (sum(q for *_, q in table) / MILLION, args.gpus))
    print("# %-8s %7s %8s %10s %9s %9s" % ("vc", "jobs", "largest", "GPU-hours", "share", "GPUs"))
    for vc, jobs, largest, seconds, q in table:
        print("# %-8s %7d %8d %10.0f %9.6f %9.2f" % (vc, jobs, largest, seconds / 3600, q / MILLION,
                                                    q * args.gpus / MILLION))


if __name__ == "__main__":
    main()

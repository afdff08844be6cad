// `tessel run CONFIG --slurm`: a sweep as one Slurm job array, one point per
// task, each task `tessel run CONFIG --point K --db SHARDS/K.db`, and a merge
// job (`tessel merge OUT SHARDS/*.db`) that starts when every task has ended,
// however it ended, so that a failed point shows in OUT as a 'failed' run.
//
// SHARDS is OUT's name with `.shards` for its extension. The two sbatch
// scripts are written there (sweep.sbatch, merge.sbatch) and kept for the
// user to read or submit again; the tasks' output goes to SHARDS/logs. With
// --resume only the points without a complete run in OUT are submitted.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "experiment_runner.hpp"

namespace tessel {

struct SlurmSweepOptions {
  std::vector<std::string> sbatch_options;  // --slurm-opt, each split at spaces, for both jobs
  unsigned max_parallel = 0;                // tasks at once (the array's %N); 0: as many as Slurm allows
};

struct SlurmSweep {
  std::string database;  // OUT
  std::filesystem::path shards;
  std::filesystem::path array_script, merge_script;
  std::string array_job, merge_job;  // Slurm job ids; empty when nothing was submitted
  std::vector<PlannedRun> runs;      // the points submitted
  std::size_t points = 0;            // in the sweep
  std::size_t skipped = 0;           // complete in OUT already (--resume)
  std::vector<std::string> notes;
};

// Writes the scripts and submits them with sbatch. Throws UserError: sbatch
// not on PATH, an sbatch option that tessel sets itself, sbatch refusing.
SlurmSweep submit_slurm_sweep(ExperimentPlan plan, const SlurmSweepOptions& options);

// Polls squeue until the array's tasks, then the merge job, have left the
// queue, telling `on_progress` the tasks ended so far. Throws Interrupted
// when `stop` is raised (the jobs go on), UserError when squeue fails.
void wait_for_slurm_sweep(const SlurmSweep& sweep, const std::atomic<bool>* stop,
                          const std::function<void(const ExperimentProgress&)>& on_progress);

}  // namespace tessel

#include "slurm_sweep.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/program.hpp"
#include "engine/errors.hpp"
#include "simulation.hpp"

namespace tessel {

namespace fs = std::filesystem;

namespace {

// Is `program` an executable file in a folder of $PATH?
bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream folders(path ? path : "");
  for (std::string folder; std::getline(folders, folder, ':');)
    if (!folder.empty() && access((fs::path(folder) / program).c_str(), X_OK) == 0) return true;
  return false;
}

// The job's tasks still pending or running: squeue lists finished jobs only
// when asked, and forgets them after MinJobAge, when it calls the id invalid.
std::size_t active_tasks(const std::string& job, const fs::path& folder) {
  const CommandResult result = run_command({"squeue", "-h", "-r", "-j", job, "-o", "%i %T"}, folder);
  if (result.status != 0) {
    if (result.err.find("Invalid job id") != std::string::npos) return 0;
    throw UserError("squeue failed on job " + job + ": " + trimmed(result.err));
  }
  std::size_t lines = 0;
  std::stringstream text(result.out);
  for (std::string line; std::getline(text, line);)
    if (!trimmed(line).empty()) ++lines;
  return lines;
}

void write_script(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) throw UserError(path.string() + ": cannot write the sbatch script");
}

}  // namespace

SlurmSweep submit_slurm_sweep(ExperimentPlan plan, const SlurmSweepOptions& options) {
  for (const std::string& option : options.sbatch_options) {
    // These are tessel's to set: the array, the merge job's dependency, where the output goes.
    for (const char* own : {"-a", "--array", "-d", "--dependency", "-o", "--output", "-e", "--error", "--wrap",
                            "-J", "--job-name", "--parsable"})
      if (option == own || option.starts_with(std::string(own) + "=") || option.starts_with(std::string(own) + " ") ||
          (std::strlen(own) == 2 && option.starts_with(own)))
        throw UserError("--slurm-opt '" + option + "': tessel sets " + own +
                        " itself (the array and its limit: --max-parallel)");
  }

  for (const char* command : {"sbatch", "squeue"})
    if (!on_path(command))
      throw UserError(std::string("--slurm: ") + command +
                      " is not on PATH; submit from a machine with the Slurm client commands");
  SlurmSweep sweep;
  sweep.database = fs::absolute(plan.database).string();
  sweep.points = plan.runs.size();
  sweep.shards = fs::path(sweep.database).replace_extension(".shards");
  for (const char c : sweep.shards.string())
    if (std::isspace(static_cast<unsigned char>(c)))
      throw UserError(sweep.database + ": Slurm cannot take a shards folder whose path has spaces; choose --db elsewhere");
  std::error_code error;
  fs::create_directories(sweep.shards / "logs", error);
  if (error) throw UserError(sweep.shards.string() + ": cannot create the shards folder: " + error.message());

  if (plan.options.resume && fs::exists(sweep.database)) {
    ResultsStore store(sweep.database);
    sweep.skipped = drop_complete_points(plan.runs, store, sweep.notes);
  }
  sweep.runs = std::move(plan.runs);
  if (sweep.runs.empty()) return sweep;

  std::string indices;
  for (const PlannedRun& run : sweep.runs) indices += (indices.empty() ? "" : ",") + std::to_string(run.point);
  if (options.max_parallel > 0) indices += "%" + std::to_string(options.max_parallel);
  const std::string tessel = fs::read_symlink("/proc/self/exe").string();
  const std::string name = "tessel-" + fs::path(plan.options.config).stem().string();
  std::string extra;
  for (const std::string& option : options.sbatch_options) extra += "#SBATCH " + option + "\n";

  // Each task resumes its shard, so a task run again (by hand, or requeued by
  // Slurm) skips a point it finished.
  std::string task = "exec " + shell_quoted(tessel) + " run " + shell_quoted(fs::absolute(plan.options.config).string()) +
                     " --point \"$SLURM_ARRAY_TASK_ID\" --db " + shell_quoted(sweep.shards.string()) +
                     "/\"$SLURM_ARRAY_TASK_ID\".db --resume --quiet --jobs 1";
  for (const std::string& setting : plan.options.overrides) task += " --set " + shell_quoted(setting);
  sweep.array_script = sweep.shards / "sweep.sbatch";
  write_script(sweep.array_script,
               "#!/bin/sh\n"
               "# Written by `tessel run --slurm`: one task per sweep point (the task id is the point).\n"
               "#SBATCH --job-name=" + name + "\n"
               "#SBATCH --array=" + indices + "\n"
               "#SBATCH --output=" + (sweep.shards / "logs" / "%a.out").string() + "\n" +
               extra + task + "\n");
  sweep.array_job = sbatch(sweep.array_script, sweep.shards);

  // afterany, not afterok: a failed point's run is in its shard, marked
  // 'failed', and belongs in OUT, where --resume finds it.
  sweep.merge_script = sweep.shards / "merge.sbatch";
  write_script(sweep.merge_script,
               "#!/bin/sh\n"
               "# Written by `tessel run --slurm`: merges the shards into the results database once the\n"
               "# sweep's tasks have ended. Merging again adds nothing.\n"
               "#SBATCH --job-name=" + name + "-merge\n"
               "#SBATCH --dependency=afterany:" + sweep.array_job + "\n"
               "#SBATCH --output=" + (sweep.shards / "logs" / "merge.out").string() + "\n" +
               // `ls -v`: the shards in point order (2.db before 10.db), so OUT's run
               // ids follow the points; paths with spaces are refused above.
               extra + "exec " + shell_quoted(tessel) + " merge " + shell_quoted(sweep.database) + " $(ls -v " +
               shell_quoted(sweep.shards.string()) + "/*.db)\n");
  sweep.merge_job = sbatch(sweep.merge_script, sweep.shards);
  return sweep;
}

void wait_for_slurm_sweep(const SlurmSweep& sweep, const std::atomic<bool>* stop,
                          const std::function<void(const ExperimentProgress&)>& on_progress) {
  if (sweep.array_job.empty()) return;
  const auto started = std::chrono::steady_clock::now();
  ExperimentProgress progress{0, sweep.runs.size(), sweep.skipped, 0};
  bool first = true;
  auto pause = [&] {
    for (int i = 0; i < 10; ++i) {  // a second, watching for Ctrl-C
      if (stop != nullptr && stop->load()) throw Interrupted();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  };
  while (true) {
    const std::size_t active = std::min(active_tasks(sweep.array_job, sweep.shards), progress.total);
    const std::size_t done = progress.total - active;
    if (first || done != progress.done) {
      progress.done = done;
      progress.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (on_progress) on_progress(progress);
      first = false;
    }
    if (active == 0) break;
    pause();
  }
  while (active_tasks(sweep.merge_job, sweep.shards) > 0) pause();
}

}  // namespace tessel

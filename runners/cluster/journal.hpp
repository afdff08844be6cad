// The daemon's durable state, in the results database (schema version 4).
//
// A cluster run is a `runs` row with mode 'cluster' whose `jobs` rows the
// daemon keeps up to date, so `tessel report` reads it like a simulation.
// Beside them, the daemon's own tables (README, "Results database"):
//
//   cluster_runs      the run's time 0 (Unix seconds): times survive restarts
//   cluster_jobs      what was submitted: command, env, workdir, iterations, ...
//   cluster_launches  each launch of a job: when decided, resumed or not, and
//                     once stopped or ended, its outcome and end time
//   cluster_ranks     each process of a launch: node, GPUs, pid, exit
//   cluster_nodes     the agents: address, GPUs, up or down, last heard
//
// Writes are write-ahead: a launch is recorded before any agent hears of it,
// an exit before the agent is told it may forget it, a submission before the
// client gets its id. After a crash, `recover` gives back every job and every
// launch that had not ended.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "job_request.hpp"
#include "results/sqlite.hpp"
#include "results/store.hpp"
#include "tessel/job.hpp"

namespace tessel::cluster {

using LaunchId = std::uint64_t;

struct RankRecord {
  int rank = 0;
  std::string node;
  std::vector<int> gpus;  // indices on the node
  std::optional<int> exit_code;  // -1 with a signal
  int signal = 0;
  bool exited() const { return exit_code.has_value(); }
};

struct LaunchRecord {
  LaunchId id = 0;
  JobId job = 0;
  double decided = 0;
  bool resume = false;
  std::string outcome;  // empty while it runs unchallenged; the reason once stopping or ended
  std::vector<RankRecord> ranks;
};

struct JobRecordFull {
  JobState state;
  bool cancelled = false;
  JobRequest request;
};

struct RecoveredRun {
  std::vector<JobRecordFull> jobs;      // in id order
  std::vector<LaunchRecord> open_launches;  // not ended
  LaunchId next_launch = 1;
  double capacity_gpu_seconds = 0;  // the run's figures so far
  std::int64_t rounds = 0;
};

class Journal {
 public:
  // Opens (and migrates) the database. Resumes the newest cluster run that
  // is not complete, unless `new_run`; otherwise begins one from `info`.
  // Throws UserError if another daemon has the database open.
  Journal(const std::string& path, RunInfo info, bool new_run);
  ~Journal();
  Journal(const Journal&) = delete;

  std::int64_t run() const { return run_; }
  bool resumed() const { return resumed_; }
  double epoch() const { return epoch_; }  // Unix seconds at the run's time 0
  RecoveredRun recover();

  sql::Transaction transaction() { return sql::Transaction(db_); }
  // Folds the write-ahead log into the database. The daemon calls it between
  // rounds; SQLite's automatic checkpoints would land inside them.
  void checkpoint();

  void save_submission(const JobState& job, const JobRequest& request);
  void save_job(const JobState& job, bool cancelled = false);
  void save_launch(const LaunchRecord& launch);
  void save_rank_start(LaunchId launch, int rank, int pid, double at);
  void save_rank_exit(LaunchId launch, int rank, int code, int signal);
  void save_launch_outcome(LaunchId launch, const std::string& outcome);
  void save_launch_end(LaunchId launch, double at, const std::string& outcome);
  void save_node(const std::string& name, const std::string& address, int gpus, const std::string& gpu_type,
                 double cpus, double mem_gb, bool up, double last_seen);
  void save_sample(const Sample& sample);
  void save_decision(const DecisionRecord& decision);
  void save_run_figures(int cluster_gpus, double capacity_gpu_seconds, double end_time, std::int64_t rounds);
  void mark_run(const std::string& status, const std::string& note);

 private:
  std::string path_;
  int lock_fd_ = -1;  // <database>.lock, held while the daemon lives
  sql::Database db_;
  std::int64_t run_ = 0;
  double epoch_ = 0;
  bool resumed_ = false;
};

}  // namespace tessel::cluster

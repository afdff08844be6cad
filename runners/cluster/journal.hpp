// The daemon's durable state, in the results database: the real-node RunSink
// (results/run_sink.hpp), which writes every event through as it happens.
//
// A cluster run is a `runs` row with mode 'cluster' whose `jobs`, `samples`,
// `resizes`, `decisions` and `metrics` rows are written by the same
// statements as a simulation's (RunRows), so `tessel report` reads it like
// one. Beside them, the daemon's own tables (README, "Results database"):
//
//   cluster_runs      the run's time 0 (Unix seconds): times survive restarts
//   cluster_jobs      what was submitted: command, env, workdir, iterations, ...
//   cluster_launches  each launch of a job: when decided, resumed or not, its
//                     MASTER_PORT once dispatched, and once stopped or ended,
//                     its outcome and end time
//   cluster_ranks     each process of a launch: node, GPUs, pid (under the
//                     Slurm executor, its Slurm job's id), exit
//   cluster_nodes     the agents: address, GPUs, up or down, last heard
//
// Writes are write-ahead: a launch is recorded before any agent hears of it,
// an exit before the agent is told it may forget it, a submission before the
// client gets its id. After a crash, `recover` gives back every job and every
// launch that had not ended.
//
// When the storage refuses (sql::StorageError: a full disk, an I/O error, a
// read-only file), the journal does not throw at the daemon: it keeps the
// writes it could not make, in order, in memory, and is not writable() until
// retry() has replayed all of them in one transaction. SQLite may roll back a
// whole transaction on SQLITE_FULL, so a failed transaction is always rolled
// back and replayed whole: nothing is lost and nothing is written twice. The
// daemon keeps write-ahead meanwhile by making no promise that needs the disk:
// no launch is dispatched, no exit acknowledged, no submission accepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job_request.hpp"
#include "results/sqlite.hpp"
#include "results/run_sink.hpp"
#include "results/store.hpp"
#include "tessel/job.hpp"

namespace tessel::cluster {

using LaunchId = std::uint64_t;

struct JobRecordFull {
  JobState state;
  bool cancelled = false;
  JobRequest request;
};

struct RecoveredRun {
  std::vector<JobRecordFull> jobs;      // in id order
  std::vector<LaunchRecord> open_launches;  // not ended
  std::vector<LaunchRecord> launches;       // every launch, ended or not, by id
  LaunchId next_launch = 1;
  double capacity_gpu_seconds = 0;  // the run's totals so far
  std::int64_t rounds = 0;
};

class Journal final : public RunSink {
 public:
  // Opens (and migrates) the database. Resumes the newest cluster run that
  // is not complete, unless `new_run`; otherwise begins one from `info`.
  // Throws UserError if another daemon has the database open.
  Journal(const std::string& path, RunInfo info, bool new_run);
  ~Journal() override;
  Journal(const Journal&) = delete;

  std::int64_t run() const { return run_; }
  bool resumed() const { return resumed_; }
  double epoch() const { return epoch_; }  // Unix seconds at the run's time 0
  RecoveredRun recover();

  // The writes between its construction and commit() land together or,
  // while the storage refuses, wait in memory together; destroyed without
  // commit(), they are dropped. Not nested.
  class Transaction {
   public:
    explicit Transaction(Journal& journal);
    Transaction(const Transaction&) = delete;
    ~Transaction();
    void commit();

   private:
    Journal& journal_;
    bool done_ = false;
  };
  Transaction transaction() { return Transaction(*this); }

  // False from the first write the storage refused until retry() saved
  // every write that waited.
  bool writable() const { return error_.empty(); }
  // Why not writable: the StorageError's message, naming the file and cause.
  const std::string& write_error() const { return error_; }
  std::size_t unwritten() const { return unwritten_.size(); }
  // Replays the writes that wait, in order, in one transaction; true once
  // they are all saved (or none waited). Not inside a transaction.
  bool retry();

  // Folds the write-ahead log into the database. The daemon calls it between
  // rounds; SQLite's automatic checkpoints would land inside them.
  void checkpoint();

  // The run is 'running' again; its wall clock counts on from what earlier
  // daemons spent on it.
  void run_started() override;
  void job_changed(const JobRecord& job) override;
  void launched(const LaunchRecord& launch) override;
  void resized(const ResizeRecord& resize) override;
  void node_changed(const NodeRecord& node) override;
  void sampled(const Sample& sample) override;
  void decided(const DecisionRecord& decision) override;
  // The run's totals so far, and its figures from the `jobs` rows (the
  // totals' wall_seconds are the journal's own).
  void run_ended(const RunTotals& totals) override;

  // What only real nodes have: submissions' commands, processes and launches' ends.
  void save_submission(const JobRecord& job, const JobRequest& request);
  void save_rank_start(LaunchId launch, int rank, int pid, double at);
  void save_rank_exit(LaunchId launch, int rank, int code, int signal);
  void save_launch_outcome(LaunchId launch, const std::string& outcome);
  void save_launch_port(LaunchId launch, int master_port);
  void save_launch_end(LaunchId launch, double at, const std::string& outcome);
  void mark_run(const std::string& status, const std::string& note);

 private:
  // Every write goes through here: made at once while writable (outside a
  // transaction, in one of its own), kept in memory otherwise.
  void write(std::function<void()> statements);
  void begin();
  void commit();
  void abandon();
  // The storage refused: roll back what the open transaction wrote (it is
  // still in open_) and stop writing until retry().
  void stop_writing(const sql::StorageError& error);

  std::string path_;
  int lock_fd_ = -1;  // <database>.lock, held while the daemon lives
  sql::Database db_;
  std::int64_t run_ = 0;
  double epoch_ = 0;
  bool resumed_ = false;
  std::optional<RunRows> rows_;  // once the run is known
  // Every job's row as last written (or waiting to be), by id. The run's
  // figures are computed from here: reading the whole `jobs` table back
  // every few seconds cost a round tens of milliseconds at 10,000 jobs.
  std::vector<JobRecord> job_rows_;
  SampleSteps steps_;
  double earlier_wall_seconds_ = 0;  // spent on the run by earlier daemons
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  bool in_transaction_ = false;  // a Journal::Transaction is open
  bool sqlite_open_ = false;     // and SQLite's transaction under it too
  std::vector<std::function<void()>> open_;  // the open transaction's writes, until committed
  // Writes of committed transactions that the storage refused, oldest first.
  // It grows only while not writable, and then only by what the daemon
  // still does without promising anything (README, "Real nodes": rounds are
  // held, submissions refused): exits, progress and node changes of the
  // jobs already running, a few rows each. It is not bounded: memory is
  // the last place they can be kept, and dropping any would break the
  // write-ahead rule after a crash.
  std::deque<std::function<void()>> unwritten_;
  std::string error_;  // empty while writable
};

}  // namespace tessel::cluster

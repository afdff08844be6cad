// The results database: one SQLite file per experiment, many runs in it.
// Schema (version 5; see README "Results database"):
//
//   runs      one row per run: label, axes (JSON), config (TOML), seed,
//             version, mode, started_at, wall_seconds, status, note,
//             cluster_gpus, capacity_gpu_seconds, end_time, events, fingerprint
//   jobs      one row per job per run
//   samples   the cluster over time: busy GPUs, running/waiting/pending jobs
//   decisions stage, plugin, code and reason per job (when enabled)
//   metrics   the run's summary figures by name
//   resizes   every change of a running job's size or layout, with its cost (schema 2)
//   cluster_* the real-cluster daemon's own state (schema 3): jobs' commands,
//             launches, ranks and nodes (runners/cluster/journal.hpp)
//   (schema 4: jobs.gpu_milli, the share of each GPU, and jobs.held_gpus, the
//   GPUs a job held when the run ended, for the GPU allocation figure;
//   schema 5: runs.fingerprint and jobs.priority)
//
// A simulation's run row is written with status 'running' as soon as the run
// starts. All its other rows, and status 'complete', are written in one
// transaction at the end, so an interrupted run is visibly not complete and
// never partial. A cluster run (mode 'cluster') instead writes each row as it
// happens, and its totals and figures as it goes (runners/cluster/journal.hpp).
// Both write through RunRows (below), the one set of statements for a run's rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "results/sqlite.hpp"
#include "results/summary.hpp"
#include "scheduler/decision_log.hpp"
#include "tessel/job.hpp"

namespace tessel {

inline constexpr int kSchemaVersion = 8;

// A `jobs` row is written and read through one table of its columns
// (job_row.hpp: kJobColumns): the INSERT, the SELECT, reading a row back, the
// columns a database of an older schema gains, and job_record/job_state all
// come from it.

// The columns read_job_row reads, in its order, for a SELECT of `jobs` rows,
// and how many they are.
const std::string& job_row_columns();
int job_row_column_count();
// One `jobs` row of a SELECT that starts with job_row_columns().
JobRecord read_job_row(const sql::Statement& row);

struct RunInfo {
  std::string label;
  std::string axes = "{}";  // JSON object of sweep axis values
  std::string config;       // the effective TOML
  std::uint64_t seed = 0;
  std::string mode = "simulation";
  std::string fingerprint;  // configuration_fingerprint (config/sweep.hpp)
};

struct Sample {
  double time;
  int total_gpus;
  int busy_gpus;
  int running_jobs;
  int waiting_jobs;
  int pending_jobs;
  int shared_gpus = 0;  // GPUs holding more than one whole-GPU job (space sharing)

  bool operator==(const Sample&) const = default;
};

// A running job changed size or layout.
struct ResizeRecord {
  double time;
  JobId job;
  int from_gpus;
  int to_gpus;
  double cost_seconds;  // no progress for this long
  JobLayout layout;     // after the change
};

// A run's counters in its `runs` row.
struct RunTotals {
  int cluster_gpus = 0;  // installed when the run ended, up or down
  double capacity_gpu_seconds = 0;
  double end_time = 0;   // run time
  std::uint64_t events = 0;  // a simulation's events; a real-node run's rounds
  double wall_seconds = 0;   // wall-clock seconds the runner spent on it
  std::string note;  // e.g. why some jobs never finished
};

struct RunResults : RunTotals {
  std::vector<JobRecord> jobs;
  std::vector<Sample> samples;
  std::vector<ResizeRecord> resizes;
  std::vector<DecisionRecord> decisions;
};

// The rows of one run, through the one set of statements that writes them:
// a simulation's at its end (ResultsStore::complete_run) and the real-node
// journal's as they happen.
class RunRows {
 public:
  RunRows(sql::Database& db, std::int64_t run);

  void job(const JobRecord& job);  // inserted, or replacing the job's row
  void sample(const Sample& sample);
  // The same rows as a call of job() or sample() for each, in that order,
  // in one statement: a simulation's end writes thousands. The run's first
  // rows of these jobs: a job that has a row already is refused
  // (sql::Error, SQLITE_CONSTRAINT), as is one given twice.
  void jobs(std::span<const JobRecord> jobs);
  void samples(std::span<const Sample> samples);
  void resize(const ResizeRecord& resize);
  void decision(const DecisionRecord& decision);
  // The run's counters, and its figures (`metrics`) from `jobs`, replacing
  // any written before.
  void totals(const RunTotals& totals, std::span<const JobRecord> jobs);
  void status(std::string_view status, std::string_view note);

 private:
  sql::Database& db_;
  std::int64_t run_;
  sql::Statement job_, sample_, resize_, decision_, metric_, totals_, status_;
  std::optional<sql::Statement> jobs_, samples_;  // prepared by the first jobs() or samples()
};

struct RunRow {
  std::int64_t id = 0;
  std::string label, axes, config, version, mode, started_at, status, note;
  std::string fingerprint;  // "" for runs stored before schema 5
  std::uint64_t seed = 0;
  double wall_seconds = 0;
  int cluster_gpus = 0;
  double capacity_gpu_seconds = 0;
  double end_time = 0;
  std::int64_t events = 0;
};

// The schema version of an open database file (`path` names it in errors):
// 0 for an empty file. Throws UserError if it is not a tessel database.
std::int64_t schema_version(sql::Database& db, const std::string& path);

// The schema's steps: the i-th takes a database from version i to i + 1 (a
// new file gets their result in one script). For tests that build an older
// database.
std::span<const char* const> schema_migrations();

// Creates the folder that the database file `path` goes in, if it is
// missing: a run or `tessel serve` writes there. Throws UserError naming the
// folder when it cannot be made (its parent is a file, or read-only).
void create_database_folder(const std::string& path);

class ResultsStore {
 public:
  // Opens or creates the file and brings its schema up to date. Throws
  // UserError if the file is not a tessel database or is from a newer tessel.
  explicit ResultsStore(const std::string& path, bool create = true);

  const std::string& path() const { return path_; }

  std::int64_t begin_run(const RunInfo& info);
  void complete_run(std::int64_t run, const RunResults& results);
  // Marks a run that stopped early ('failed' or 'interrupted'), keeping no rows.
  void abandon_run(std::int64_t run, const std::string& status, const std::string& note);

  std::vector<RunRow> runs();
  std::optional<RunRow> run(std::int64_t id);
  std::vector<JobRecord> jobs(std::int64_t run);
  // The figures the run stored (summary.hpp's list): at its end, and on real
  // nodes every few seconds while it goes. nullopt for a run that stored none
  // (stopped early) or not all (stored by an older tessel).
  std::optional<RunSummary> figures(std::int64_t run);
  std::vector<Sample> samples(std::int64_t run);
  std::vector<DecisionRecord> decisions(std::int64_t run, std::optional<JobId> job = std::nullopt);
  std::vector<ResizeRecord> resizes(std::int64_t run);

 private:
  void migrate(bool create);  // `create`: an empty file may become a new database

  std::string path_;
  sql::Database db_;
  std::mutex mutex_;  // one writer at a time when a sweep shares the store
};

// A ResultsStore opening on a thread of its own. Creating a database is
// mostly waiting on the disk (a new file is synced five times before its
// first row), which a simulation need not wait for: run_simulation starts
// simulating meanwhile and writes its run's row once the store is open.
class OpeningStore {
 public:
  explicit OpeningStore(std::string path);
  OpeningStore(const OpeningStore&) = delete;  // the opening writes into this one
  OpeningStore& operator=(const OpeningStore&) = delete;
  // The open store, once it is; throws what opening it threw. Safe from
  // several threads at once.
  ResultsStore& get() const;

 private:
  std::unique_ptr<ResultsStore> store_;
  std::shared_future<void> opened_;  // after store_: destroyed first, it waits for the opening
};

}  // namespace tessel

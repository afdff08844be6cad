#include "journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include "engine/errors.hpp"
#include "log_line.hpp"

namespace tessel::cluster {

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

std::vector<int> split(const std::string& text) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    values.push_back(std::stoi(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return values;
}

}  // namespace

Journal::Journal(const std::string& path, RunInfo info, bool new_run) : path_(path) {
  // One daemon per database: two would both think they own every job.
  lock_fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    throw UserError(path + ": another tessel serve is using this database");
  }
  { ResultsStore store(path); }  // creates the file or brings its schema up to date
  try {
    db_ = sql::Database(path, false);
    db_.exec("PRAGMA foreign_keys=ON");
    db_.exec("PRAGMA synchronous=NORMAL");
    db_.exec("PRAGMA wal_autocheckpoint=0");
    if (!new_run) {
      auto latest = db_.prepare(
          "SELECT runs.id, cluster_runs.epoch, coalesce(runs.wall_seconds, 0) FROM runs JOIN cluster_runs ON cluster_runs.run_id = runs.id "
          "WHERE runs.mode = 'cluster' AND runs.status != 'complete' ORDER BY runs.id DESC LIMIT 1");
      if (latest.step()) {
        run_ = latest.integer(0);
        epoch_ = latest.real(1);
        earlier_wall_seconds_ = latest.real(2);
        resumed_ = true;
        rows_.emplace(db_, run_);
        return;
      }
    }
  } catch (const sql::Error& e) {
    throw UserError(path + ": " + e.what());
  }
  info.mode = "cluster";
  {
    ResultsStore store(path);
    run_ = store.begin_run(info);
  }
  epoch_ = unix_now();
  auto insert = db_.prepare("INSERT INTO cluster_runs (run_id, epoch) VALUES (?, ?)");
  insert.bind(1, run_).bind(2, epoch_);
  insert.run();
  rows_.emplace(db_, run_);
}

Journal::~Journal() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

// A checkpoint copies pages the WAL already holds; refused, they stay there
// and the next checkpoint copies them.
void Journal::checkpoint() {
  if (!writable()) return;
  try {
    db_.exec("PRAGMA wal_checkpoint(PASSIVE)");
  } catch (const sql::StorageError&) {
  }
}

Journal::Transaction::Transaction(Journal& journal) : journal_(journal) { journal_.begin(); }

Journal::Transaction::~Transaction() {
  if (!done_) journal_.abandon();
}

void Journal::Transaction::commit() {
  journal_.commit();
  done_ = true;
}

void Journal::begin() {
  in_transaction_ = true;
  open_.clear();
  if (!writable()) return;
  try {
    db_.exec("BEGIN IMMEDIATE");
    sqlite_open_ = true;
  } catch (const sql::StorageError& e) {
    stop_writing(e);
  }
}

void Journal::commit() {
  in_transaction_ = false;
  if (sqlite_open_) try {
      db_.exec("COMMIT");
      sqlite_open_ = false;
      open_.clear();
      return;
    } catch (const sql::StorageError& e) {
      stop_writing(e);
    }
  for (auto& statements : open_) unwritten_.push_back(std::move(statements));
  open_.clear();
}

void Journal::abandon() {
  in_transaction_ = false;
  open_.clear();
  if (!sqlite_open_) return;
  sqlite_open_ = false;
  try {
    db_.exec("ROLLBACK");
  } catch (...) {
  }
}

void Journal::stop_writing(const sql::StorageError& error) {
  if (sqlite_open_) {
    sqlite_open_ = false;
    // Whatever SQLite kept of the transaction goes: it is replayed whole.
    try {
      db_.exec("ROLLBACK");
    } catch (...) {
    }
  }
  if (writable())
    log_line("tessel serve", std::string("cannot write the database, keeping its writes in memory until it can: ") +
                                 error.what());
  error_ = error.what();
}

void Journal::write(std::function<void()> statements) {
  if (!in_transaction_) {
    Transaction alone(*this);
    write(std::move(statements));
    alone.commit();
    return;
  }
  open_.push_back(std::move(statements));
  if (!sqlite_open_) return;
  try {
    open_.back()();
  } catch (const sql::StorageError& e) {
    stop_writing(e);
  }
}

bool Journal::retry() {
  if (writable()) return true;
  try {
    sql::Transaction replay(db_);  // rolls back unless committed
    for (const auto& statements : unwritten_) statements();
    replay.commit();
  } catch (const sql::StorageError& e) {
    error_ = e.what();
    return false;
  }
  log_line("tessel serve", "writing the database again; saved the " + std::to_string(unwritten_.size()) +
                               " writes that waited");
  unwritten_.clear();
  error_.clear();
  return true;
}

void Journal::run_started() {
  started_ = std::chrono::steady_clock::now();
  write([this] { rows_->status("running", ""); });
}

void Journal::save_submission(const JobRecord& job, const JobRequest& request) {
  // Stamped now: a write that waits for room is replayed later, and the
  // submission happened now, not then.
  write([this, job, request, submitted_at = iso8601_utc_now()] {
    auto insert = db_.prepare(
        "INSERT INTO cluster_jobs (run_id, job_id, command, env, workdir, iterations, processes, grace_seconds, "
        "submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, run_).bind(2, static_cast<std::int64_t>(job.id));
    insert.bind(3, json(request.command).dump()).bind(4, json(request.env).dump()).bind(5, request.workdir);
    if (request.iterations)
      insert.bind(6, *request.iterations);
    else
      insert.bind_null(6);
    insert.bind(7, std::string_view(request.per_node ? "per_node" : "per_gpu"));
    insert.bind(8, request.grace_seconds.value_or(-1));
    insert.bind(9, submitted_at);
    insert.run();
  });
  job_changed(job);
}

void Journal::job_changed(const JobRecord& job) {
  if (job.id >= job_rows_.size()) job_rows_.resize(job.id + 1);
  job_rows_[job.id] = job;
  write([this, job] { rows_->job(job); });
}

void Journal::resized(const ResizeRecord& resize) {
  write([this, resize] { rows_->resize(resize); });
}

void Journal::sampled(const Sample& sample) {
  if (steps_.changes(sample)) write([this, sample] { rows_->sample(sample); });
}

void Journal::decided(const DecisionRecord& decision) {
  write([this, decision] { rows_->decision(decision); });
}

void Journal::launched(const LaunchRecord& launch) {
  write([this, launch] {
    auto insert = db_.prepare(
        "INSERT INTO cluster_launches (run_id, launch_id, job_id, decided, resume) VALUES (?, ?, ?, ?, ?)");
    insert.bind(1, run_).bind(2, static_cast<std::int64_t>(launch.id)).bind(3, static_cast<std::int64_t>(launch.job));
    insert.bind(4, launch.decided).bind(5, launch.resume ? 1 : 0);
    insert.run();
    auto rank = db_.prepare("INSERT INTO cluster_ranks (run_id, launch_id, rank, node, gpus) VALUES (?, ?, ?, ?, ?)");
    for (const RankRecord& r : launch.ranks) {
      rank.bind(1, run_).bind(2, static_cast<std::int64_t>(launch.id)).bind(3, r.rank).bind(4, r.node);
      rank.bind(5, join(r.gpus));
      rank.run();
    }
  });
}

void Journal::save_rank_start(LaunchId launch, int rank, int pid, double at) {
  write([=, this] {
    auto update =
        db_.prepare("UPDATE cluster_ranks SET pid = ?, started = ? WHERE run_id = ? AND launch_id = ? AND rank = ?");
    update.bind(1, pid).bind(2, at).bind(3, run_).bind(4, static_cast<std::int64_t>(launch)).bind(5, rank);
    update.run();
  });
}

void Journal::save_rank_exit(LaunchId launch, int rank, int code, int signal) {
  write([=, this] {
    auto update = db_.prepare(
        "UPDATE cluster_ranks SET exit_code = ?, signal = ? WHERE run_id = ? AND launch_id = ? AND rank = ?");
    update.bind(1, code).bind(2, signal).bind(3, run_).bind(4, static_cast<std::int64_t>(launch)).bind(5, rank);
    update.run();
  });
}

void Journal::save_launch_outcome(LaunchId launch, const std::string& outcome) {
  write([=, this] {
    auto update = db_.prepare("UPDATE cluster_launches SET outcome = ? WHERE run_id = ? AND launch_id = ?");
    update.bind(1, outcome).bind(2, run_).bind(3, static_cast<std::int64_t>(launch));
    update.run();
  });
}

void Journal::save_launch_port(LaunchId launch, int master_port) {
  write([=, this] {
    auto update = db_.prepare("UPDATE cluster_launches SET master_port = ? WHERE run_id = ? AND launch_id = ?");
    update.bind(1, master_port).bind(2, run_).bind(3, static_cast<std::int64_t>(launch));
    update.run();
  });
}

void Journal::save_launch_end(LaunchId launch, double at, const std::string& outcome) {
  write([=, this] {
    auto update = db_.prepare("UPDATE cluster_launches SET ended = ?, outcome = ? WHERE run_id = ? AND launch_id = ?");
    update.bind(1, at).bind(2, outcome).bind(3, run_).bind(4, static_cast<std::int64_t>(launch));
    update.run();
  });
}

void Journal::node_changed(const NodeRecord& node) {
  write([this, node] {
    auto upsert = db_.prepare("INSERT OR REPLACE INTO cluster_nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    upsert.bind(1, run_).bind(2, node.name).bind(3, node.address).bind(4, node.gpus).bind(5, node.gpu_type);
    upsert.bind(6, node.cpus).bind(7, node.mem_gb).bind(8, node.up ? 1 : 0).bind(9, node.time);
    upsert.run();
  });
}

void Journal::run_ended(const RunTotals& totals) {
  // The totals are written every few seconds while the run goes on: the
  // samples reach the latest round that often.
  if (const auto last = steps_.take_unrecorded()) write([this, sample = *last] { rows_->sample(sample); });
  RunTotals mine = totals;
  mine.wall_seconds =
      earlier_wall_seconds_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  // The figures read every job's row as the journal has it when this write
  // lands: at once while writable; replayed after a full disk, the newest,
  // in the same transaction as the rows themselves.
  write([this, mine] { rows_->totals(mine, job_rows_); });
}

void Journal::mark_run(const std::string& status, const std::string& note) {
  write([=, this] { rows_->status(status, note); });
}

RecoveredRun Journal::recover() {
  RecoveredRun recovered;
  // The jobs row first (read_job_row), then the daemon's own columns.
  auto jobs = db_.prepare("SELECT " + job_row_columns() +
                          ", c.command, c.env, c.workdir, c.iterations, c.processes, c.grace_seconds "
                          "FROM jobs JOIN cluster_jobs c USING (run_id, job_id) WHERE run_id = ? ORDER BY job_id");
  jobs.bind(1, run_);
  while (jobs.step()) {
    const JobRecord row = read_job_row(jobs);
    if (row.id >= job_rows_.size()) job_rows_.resize(row.id + 1);
    job_rows_[row.id] = row;
    const int own = job_row_column_count();  // the first of the daemon's columns
    JobRecordFull full;
    full.state = job_state(row);  // 'cancelled' reads as failed: the core saw it fail
    const JobSpec& spec = full.state.spec;
    full.cancelled = row.status == "cancelled";
    JobRequest& request = full.request;
    request.name = spec.name;
    request.tenant = spec.tenant;
    request.vc = spec.vc;
    request.gpus = spec.gpus;
    request.priority = spec.priority;
    if (spec.elastic()) request.min_gpus = spec.min_gpus, request.max_gpus = spec.max_gpus;
    request.command = json::parse(jobs.text(own + 0)).get<std::vector<std::string>>();
    request.env = json::parse(jobs.text(own + 1)).get<std::map<std::string, std::string>>();
    request.workdir = jobs.text(own + 2);
    if (!jobs.is_null(own + 3)) request.iterations = jobs.integer(own + 3);
    request.per_node = jobs.text(own + 4) == "per_node";
    if (const double grace = jobs.real(own + 5); grace >= 0) request.grace_seconds = grace;
    recovered.jobs.push_back(std::move(full));
  }

  auto figures = db_.prepare("SELECT coalesce(capacity_gpu_seconds, 0), coalesce(events, 0) FROM runs WHERE id = ?");
  figures.bind(1, run_);
  if (figures.step()) {
    recovered.capacity_gpu_seconds = figures.real(0);
    recovered.rounds = figures.integer(1);
  }

  auto next = db_.prepare("SELECT coalesce(max(launch_id), 0) + 1 FROM cluster_launches WHERE run_id = ?");
  next.bind(1, run_);
  next.step();
  recovered.next_launch = static_cast<LaunchId>(next.integer(0));

  auto launches = db_.prepare(
      "SELECT launch_id, job_id, decided, resume, coalesce(outcome, ''), ended IS NULL, coalesce(master_port, 0), ended "
      "FROM cluster_launches WHERE run_id = ? ORDER BY launch_id");
  launches.bind(1, run_);
  auto ranks = db_.prepare(
      "SELECT rank, node, gpus, exit_code, coalesce(signal, 0) FROM cluster_ranks WHERE run_id = ? AND launch_id = ? "
      "ORDER BY rank");
  while (launches.step()) {
    LaunchRecord launch;
    launch.id = static_cast<LaunchId>(launches.integer(0));
    launch.job = static_cast<JobId>(launches.integer(1));
    launch.decided = launches.real(2);
    launch.resume = launches.integer(3) != 0;
    launch.outcome = launches.text(4);
    launch.master_port = static_cast<int>(launches.integer(6));
    if (!launches.is_null(7)) launch.ended = launches.real(7);
    ranks.bind(1, run_).bind(2, static_cast<std::int64_t>(launch.id));
    while (ranks.step()) {
      RankRecord r;
      r.rank = static_cast<int>(ranks.integer(0));
      r.node = ranks.text(1);
      r.gpus = split(ranks.text(2));
      if (!ranks.is_null(3)) r.exit_code = static_cast<int>(ranks.integer(3));
      r.signal = static_cast<int>(ranks.integer(4));
      launch.ranks.push_back(std::move(r));
    }
    ranks.reset();
    if (launches.integer(5) != 0) recovered.open_launches.push_back(launch);
    recovered.launches.push_back(std::move(launch));
  }
  return recovered;
}

}  // namespace tessel::cluster

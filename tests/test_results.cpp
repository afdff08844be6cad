// The results database: what a run stores, what a report computes from it,
// and what an interrupted run leaves behind.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include "engine/errors.hpp"
#include "journal.hpp"
#include "log_line.hpp"
#include "results/report.hpp"
#include "results/run_sink.hpp"
#include "results/sqlite.hpp"
#include "results/store.hpp"
#include "results/summary.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

extern char** environ;

namespace {

const char* kExperiment = R"([cluster]
nodes = 8
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 250
jobs_per_hour = 5
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
[output]
database = "r.db"
)";

JobRecord job(double arrival, std::optional<double> start, std::optional<double> finish, double gpu_seconds,
              bool tracked = true) {
  JobRecord r;
  r.arrival = arrival;
  r.first_start = start;
  r.finish = finish;
  r.gpu_seconds = gpu_seconds;
  r.status = finish ? "finished" : "queued";
  r.tracked = tracked;
  return r;
}

pid_t spawn_tessel(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> argv{tessel_exe().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Waits until the run row exists, i.e. the simulation itself has begun.
void wait_for_run_row(const fs::path& db) {
  for (int i = 0; i < 2000; ++i) {
    if (fs::exists(db)) try {
        if (count(db, "SELECT count(*) FROM runs") > 0) return;
      } catch (...) {
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  FAIL("the run never started");
}

}  // namespace

TEST_CASE("summary figures match values computed by hand") {
  // JCTs of tracked finished jobs: 100, 200, 300, 400.
  const std::vector<JobRecord> jobs = {
      job(0, 0, 100, 100),  job(0, 50, 200, 150),   job(100, 100, 400, 300),
      job(100, 300, 500, 200), job(50, 60, 1000, 940, false),  // untracked: no JCT, but makespan and usage
      job(10, std::nullopt, std::nullopt, 0),                    // tracked, never ran
  };
  const RunSummary s = summarize(jobs, 4 * 1000.0, 4, 1000);
  CHECK(s.jobs == 5);
  CHECK(s.finished == 4);
  CHECK(s.unfinished == 1);
  CHECK(s.avg_jct == 250);
  CHECK(s.p50_jct == 250);                       // between 200 and 300
  CHECK(s.p95_jct == doctest::Approx(385));      // 300 + 0.85 * 100
  CHECK(s.p99_jct == doctest::Approx(397));
  CHECK(s.avg_queueing_delay == doctest::Approx((0 + 50 + 0 + 200) / 4.0));
  CHECK(s.makespan == 1000);
  CHECK(s.gpu_utilization == doctest::Approx(1690 / 4000.0));
  CHECK(s.gpu_allocation == 0);  // every job is done or waiting
}

TEST_CASE("a figure over no jobs is none, not 0: stored as NULL, shown as '-', empty in CSV, null in JSON") {
  const std::vector<JobRecord> waiting = {job(0, std::nullopt, std::nullopt, 0)};
  const RunSummary s = summarize(waiting, 4 * 1000.0, 4, 1000);
  CHECK(s.finished == 0);
  for (const double figure : {s.avg_jct, s.p50_jct, s.p95_jct, s.p99_jct, s.avg_queueing_delay, s.makespan})
    CHECK(std::isnan(figure));
  CHECK(s.avg_jct_bound == 1000);  // the waiting job counted to the run's end
  // A job that took no time has a JCT and a makespan of 0, not none.
  const std::vector<JobRecord> instant = {job(5, 5, 5, 0)};
  CHECK(summarize(instant, 4 * 1000.0, 4, 1000).makespan == 0);

  // Every job asks for more GPUs than the cluster has: none runs.
  TempDir dir;
  std::string experiment = kExperiment;
  experiment.replace(experiment.find("jobs = 250"), 10, "jobs = 5\ngpu_counts = [64]\ngpu_weights = [1]");
  dir.write("e.toml", experiment + "[sweep]\nseeds = [1, 2]\n");
  const auto run = run_tessel({"run", "e.toml"}, dir.path());
  REQUIRE(run.code == 0);
  const fs::path db = dir.path() / "r.db";
  CHECK(count(db, "SELECT count(*) FROM metrics WHERE value IS NULL") == 2 * 7);
  CHECK(count(db, "SELECT count(*) FROM metrics WHERE name = 'avg_jct_s' AND value IS NULL") == 2);
  // The table: "-" under each figure over no jobs, where "0 s" stood.
  CHECK(run.out.find("0 s") == std::string::npos);
  CHECK(run.out.find("  -  ") != std::string::npos);
  const auto csv = run_tessel({"report", "r.db", "--format", "csv"}, dir.path());
  CHECK(csv.out.find(",5,0,5,,,,,,,") != std::string::npos);
  const auto json = nlohmann::json::parse(run_tessel({"report", "r.db", "--format", "json"}, dir.path()).out);
  CHECK(json.at(0).at("avg_jct_s").is_null());
  CHECK(json.at(0).at("finished") == 0);
  const auto plot = run_tessel({"plot", "r.db", "--kind", "metric", "--metric", "avg_jct_s", "--by", "seed", "-o",
                                "m.svg"}, dir.path());
  CHECK(plot.code == 2);
  CHECK(plot.err == "tessel: r.db: avg_jct_s has no value in the chosen runs: none of their tracked jobs finished "
                    "(or, for queueing, started)\n");
}

TEST_CASE("GPU allocation: the GPU shares held when the run ended, over the cluster's GPUs") {
  // 8 GPUs. Still running: 2 whole GPUs, 1 GPU at 460 milli, 1 at 250 (an
  // untracked job counts: the figure is the cluster's). Done or waiting jobs
  // hold nothing. (2000 + 460 + 250) / 8000 = 0.33875.
  std::vector<JobRecord> jobs = {job(0, 0, 100, 100), job(0, 0, std::nullopt, 0), job(0, 0, std::nullopt, 0),
                                 job(0, 0, std::nullopt, 0, false), job(0, std::nullopt, std::nullopt, 0)};
  jobs[1].held_gpus = 2;
  jobs[2].held_gpus = 1;
  jobs[2].gpu_milli = 460;
  jobs[3].held_gpus = 1;
  jobs[3].gpu_milli = 250;
  jobs[4].gpu_milli = 500;  // never started: holds nothing
  jobs[1].status = jobs[2].status = jobs[3].status = "running";
  CHECK(summarize(jobs, 0, 8, 0).gpu_allocation == doctest::Approx(0.33875));
  CHECK(summarize(jobs, 0, 0, 0).gpu_allocation == 0);  // no GPUs: no figure
  // By VC, each VC's share of the same cluster: a holds 2 GPUs, b 0.71.
  jobs[1].vc = "a";
  jobs[2].vc = jobs[3].vc = "b";
  const std::vector<GroupSummary> groups = summarize_by_vc(jobs, 0, 8, 0);
  REQUIRE(groups.size() == 3);
  CHECK(groups[1].summary.gpu_allocation == doctest::Approx(0.25));
  CHECK(groups[2].summary.gpu_allocation == doctest::Approx(0.71 / 8));
}

TEST_CASE("summaries by VC apply the run's figures to each VC's jobs, against the whole cluster") {
  std::vector<JobRecord> jobs = {
      job(0, 0, 100, 100), job(0, 50, 200, 150),  // VC "b": JCTs 100 and 200, one waited 50 s
      job(10, 10, 40, 30),                        // VC "a": JCT 30
      job(0, 0, 500, 500),                        // no VC
  };
  jobs[0].vc = jobs[1].vc = "b";
  jobs[2].vc = "a";
  const std::vector<GroupSummary> groups = summarize_by_vc(jobs, 1000.0, 4, 1000);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].group == "");  // VCs in name order, no VC first
  CHECK(groups[1].group == "a");
  CHECK(groups[2].group == "b");
  CHECK(groups[0].summary.avg_jct == 500);
  CHECK(groups[1].summary.jobs == 1);
  CHECK(groups[1].summary.makespan == 30);                      // 40 - 10
  CHECK(groups[1].summary.gpu_utilization == doctest::Approx(0.03));  // 30 of 1000 GPU-seconds
  CHECK(groups[2].summary.jobs == 2);
  CHECK(groups[2].summary.avg_jct == 150);
  CHECK(groups[2].summary.p50_jct == 150);
  CHECK(groups[2].summary.avg_queueing_delay == 25);
  CHECK(groups[2].summary.gpu_utilization == doctest::Approx(0.25));  // 100 + 150 of 1000

  // One VC: the same figures as the whole run, from the same function.
  for (JobRecord& record : jobs) record.vc = "only";
  const std::vector<GroupSummary> one = summarize_by_vc(jobs, 1000.0, 4, 1000);
  REQUIRE(one.size() == 1);
  const RunSummary whole = summarize(jobs, 1000.0, 4, 1000);
  CHECK(one[0].summary.avg_jct == whole.avg_jct);
  CHECK(one[0].summary.p99_jct == whole.p99_jct);
  CHECK(one[0].summary.makespan == whole.makespan);
  CHECK(one[0].summary.gpu_utilization == whole.gpu_utilization);
  CHECK(summarize_by_vc({}, 1000.0, 4, 1000).empty());
}

TEST_CASE("a run stores one row per job, samples, metrics, and is marked complete") {
  TempDir dir;
  dir.write("e.toml", kExperiment);
  REQUIRE(run_tessel({"run", "e.toml", "-q"}, dir.path()).code == 0);
  const fs::path db = dir.path() / "r.db";
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE run_id = 1") == 250);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished'") == 250);
  CHECK(count(db, "SELECT count(*) FROM samples") > 10);
  CHECK(count(db, "SELECT count(*) FROM metrics WHERE run_id = 1") == 13);
  CHECK(count(db, "SELECT count(*) FROM decisions") == 0);  // off by default
  CHECK(query_text(db, "SELECT status FROM runs") == "complete");
  CHECK(count(db, "PRAGMA user_version") == kSchemaVersion);
  CHECK(query_text(db, "PRAGMA journal_mode") == "wal");
  CHECK(query_text(db, "SELECT config FROM runs").find("jobs = 250") != std::string::npos);

  // The stored figures are what summarize() makes of the stored jobs, under
  // the names of the one list of figures.
  ResultsStore store(db.string());
  const RunRow run = *store.run(1);
  const RunSummary computed = summarize(store.jobs(1), run.capacity_gpu_seconds, run.cluster_gpus, run.end_time);
  const std::optional<RunSummary> stored = store.figures(1);
  REQUIRE(stored);
  for (const Figure& figure : figures()) {
    CAPTURE(figure.name);
    CHECK(figure.get(*stored) == doctest::Approx(figure.get(computed)));
    CHECK(count(db, std::string("SELECT count(*) FROM metrics WHERE name = '") + figure.name + "'") == 1);
  }

  // A second run goes into the same file.
  REQUIRE(run_tessel({"run", "e.toml", "-q", "--set", "workload.seed=2"}, dir.path()).code == 0);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE status = 'complete'") == 2);
  CHECK(count(db, "SELECT count(*) FROM jobs") == 500);
}

TEST_CASE("GPU allocation goes through the database: the report computes it from the jobs rows") {
  // One node of 4 GPUs; openb pods that never leave (the FGD protocol):
  // 2 whole GPUs, then 4 (passed over), 600, 500 and 300 milli, then a whole
  // GPU (passed over): (2000 + 600 + 500 + 300) / 4000 = 0.85.
  TempDir dir;
  dir.write("pods.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time\n"
            "p0,1000,1024,2,1000,,LS,Running,10,20,10\n"
            "p1,1000,1024,4,1000,,LS,Running,10,20,10\n"
            "p2,1000,1024,1,600,,LS,Running,10,20,10\n"
            "p3,1000,1024,1,500,,LS,Running,10,20,10\n"
            "p4,1000,1024,1,300,,LS,Running,10,20,10\n"
            "p5,1000,1024,1,1000,,LS,Running,10,20,10\n");
  const std::string config = R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "openb"
path = "pods.csv"
times = "ignore"
[scheduler]
round_seconds = 1
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "first_fit" }
[output]
database = "r.db"
)";
  dir.write("e.toml", config);
  REQUIRE(run_tessel({"run", "e.toml", "-q"}, dir.path()).code == 0);
  const fs::path db = dir.path() / "r.db";
  CHECK(count(db, "SELECT sum(held_gpus) FROM jobs") == 5);
  CHECK(count(db, "SELECT gpu_milli FROM jobs WHERE job_id = 2") == 600);
  CHECK(query_text(db, "SELECT value FROM metrics WHERE name = 'gpu_allocation'") == "0.85");
  const auto report = run_tessel({"report", "r.db", "--format", "csv"}, dir.path());
  REQUIRE(report.code == 0);
  CHECK(report.out.find(",0.850000,0,") != std::string::npos);  // gpu_allocation, then preemptions
  const auto table = run_tessel({"report", "r.db"}, dir.path());
  CHECK(table.out.find("GPU alloc") != std::string::npos);
  CHECK(table.out.find("85.0 %") != std::string::npos);

  // When every job leaves, nothing is held at the end: the table drops the
  // column, CSV keeps it.
  std::string leaving = config;
  leaving.erase(leaving.find("times = \"ignore\"\n"), std::string("times = \"ignore\"\n").size());
  dir.write("ends.toml", leaving);
  REQUIRE(run_tessel({"run", "ends.toml", "-q", "--db", "ends.db"}, dir.path()).code == 0);
  CHECK(run_tessel({"report", "ends.db"}, dir.path()).out.find("GPU alloc") == std::string::npos);
  CHECK(run_tessel({"report", "ends.db", "--format", "csv"}, dir.path()).out.find("gpu_allocation") !=
        std::string::npos);
}

TEST_CASE("a run killed mid-way is visibly not complete and leaves no rows") {
  TempDir dir;
  std::string big = kExperiment;
  big.replace(big.find("jobs = 250"), 10, "jobs = 400000");
  big.replace(big.find("nodes = 8"), 9, "nodes = 500");
  big.replace(big.find("jobs_per_hour = 5"), 17, "jobs_per_hour = 200");
  dir.write("big.toml", big);
  const pid_t pid = spawn_tessel({"run", "big.toml", "-q"}, dir.path());
  wait_for_run_row(dir.path() / "r.db");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  const fs::path db = dir.path() / "r.db";
  CHECK(query_text(db, "SELECT status FROM runs") == "running");
  CHECK(count(db, "SELECT count(*) FROM jobs") == 0);
  CHECK(count(db, "SELECT count(*) FROM samples") == 0);
  const auto report = run_tessel({"report", "r.db"}, dir.path());
  CHECK(report.code == 0);
  CHECK(report.out.find("note: run 1 is running; it has no results") != std::string::npos);
  // Its figures are absent, not zeros: "-" in a table, empty in CSV, null in JSON.
  const std::string row = report.out.substr(report.out.find("\n") + 1);
  CHECK(row.find(" 0 ") == std::string::npos);
  CHECK(row.find("  -  ") != std::string::npos);
  CHECK(run_tessel({"report", "r.db", "--format", "csv"}, dir.path()).out.find(",running,,,,") != std::string::npos);
  const auto json = nlohmann::json::parse(run_tessel({"report", "r.db", "--format", "json"}, dir.path()).out);
  CHECK(json[0]["avg_jct_s"].is_null());
  CHECK(json[0]["jobs"].is_null());
}

TEST_CASE("Ctrl-C stops a run cleanly and marks it interrupted") {
  TempDir dir;
  std::string big = kExperiment;
  big.replace(big.find("jobs = 250"), 10, "jobs = 400000");
  big.replace(big.find("nodes = 8"), 9, "nodes = 500");
  big.replace(big.find("jobs_per_hour = 5"), 17, "jobs_per_hour = 200");
  dir.write("big.toml", big);
  const pid_t pid = spawn_tessel({"run", "big.toml", "-q"}, dir.path());
  wait_for_run_row(dir.path() / "r.db");
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(query_text(dir.path() / "r.db", "SELECT status FROM runs") == "interrupted");
  CHECK(count(dir.path() / "r.db", "SELECT count(*) FROM jobs") == 0);
}

TEST_CASE("an older database is migrated in place, keeping its runs") {
  TempDir dir;
  dir.write("e.toml", kExperiment);
  REQUIRE(run_tessel({"run", "e.toml", "-q"}, dir.path()).code == 0);
  const fs::path db = dir.path() / "r.db";
  {
    // Make it look like schema 1: none of the tables and columns later
    // versions added.
    sql::Database raw(db.string(), false);
    raw.exec("DROP TABLE resizes; DROP TABLE cluster_runs; DROP TABLE cluster_jobs; DROP TABLE cluster_launches; "
             "DROP TABLE cluster_ranks; DROP TABLE cluster_nodes; ALTER TABLE jobs DROP COLUMN gpu_milli; "
             "ALTER TABLE jobs DROP COLUMN held_gpus; ALTER TABLE jobs DROP COLUMN priority; "
             "ALTER TABLE runs DROP COLUMN fingerprint; ALTER TABLE samples DROP COLUMN shared_gpus; "
             "ALTER TABLE jobs DROP COLUMN shared_seconds; "
             "DELETE FROM metrics WHERE name = 'avg_jct_bound_s'; "
             "UPDATE metrics SET name = substr(name, 1, length(name) - 2) WHERE name LIKE '%\\_s' ESCAPE '\\'; "
             "PRAGMA user_version = 1");
  }
  CHECK(run_tessel({"run", "e.toml", "-q"}, dir.path()).code == 0);
  CHECK(count(db, "PRAGMA user_version") == kSchemaVersion);
  CHECK(count(db, "SELECT count(*) FROM resizes") == 0);
  // The old run's jobs get the defaults: whole GPUs, nothing held at the end.
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE run_id = 1 AND gpu_milli = 1000 AND held_gpus = 0") == 250);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE run_id = 1 AND priority = 1") == 250);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE run_id = 1 AND shared_seconds = 0") == 250);
  CHECK(count(db, "SELECT count(*) FROM samples WHERE run_id = 1 AND shared_gpus <> 0") == 0);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE status = 'complete'") == 2);
  // The old run has no fingerprint (schema 5); the new one has.
  CHECK(count(db, "SELECT count(*) FROM runs WHERE id = 1 AND fingerprint = ''") == 1);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE id = 2 AND length(fingerprint) = 16") == 1);
  // Schema 6 names the old run's figures as `report` does, and reads them back.
  CHECK(count(db, "SELECT count(*) FROM metrics WHERE run_id = 1 AND name = 'avg_jct'") == 0);
  CHECK(count(db, "SELECT count(*) FROM metrics WHERE run_id = 1 AND name = 'avg_jct_s'") == 1);
  // It lacks the figures added since (avg_jct_bound_s): report computes them again from its rows.
  ResultsStore store(db.string());
  CHECK_FALSE(store.figures(1));
  CHECK(store.figures(2));
}

TEST_CASE("one list of figures: report prints what the run stored, under the same names in CSV, JSON and SQL") {
  TempDir dir;
  dir.write("e.toml", kExperiment);
  REQUIRE(run_tessel({"run", "e.toml", "-q"}, dir.path()).code == 0);
  const fs::path db = dir.path() / "r.db";
  {
    // The report reads the stored figures, not a second computation.
    sql::Database raw(db.string(), false);
    raw.exec("UPDATE metrics SET value = 4242.5 WHERE name = 'avg_jct_s'");
  }
  const auto csv = run_tessel({"report", "r.db", "--format", "csv"}, dir.path());
  REQUIRE(csv.code == 0);
  CHECK(csv.out.find(",4242.500,") != std::string::npos);
  const auto json = nlohmann::json::parse(run_tessel({"report", "r.db", "--format", "json"}, dir.path()).out);
  CHECK(json[0]["avg_jct_s"] == 4242.5);

  std::string header = csv.out.substr(0, csv.out.find('\n'));
  for (const Figure& figure : figures()) {
    CAPTURE(figure.name);
    CHECK(header.find(std::string(",") + figure.name) != std::string::npos);
    CHECK(json[0].contains(figure.name));
    CHECK(count(db, std::string("SELECT count(*) FROM metrics WHERE name = '") + figure.name + "'") == 1);
    CHECK(find_figure(figure.name) == &figure);
  }
  CHECK(count(db, "SELECT count(*) FROM metrics") == static_cast<std::int64_t>(figures().size()));

  // Figures averaged over seeds: means, with counts rounded.
  RunSummary a, b;
  a.jobs = 3, b.jobs = 4, a.avg_jct = 10, b.avg_jct = 15, a.preemptions = 1, b.preemptions = 2;
  const std::vector<RunSummary> runs = {a, b};
  const RunSummary mean = average(runs);
  CHECK(mean.avg_jct == 12.5);
  CHECK(mean.jobs == 4);  // 3.5, rounded half away from zero
  CHECK(mean.preemptions == 2);
}

TEST_CASE("a job row keeps every field, the schema and the row codec agree, and a record restores its job") {
  TempDir dir;
  const fs::path path = dir.path() / "codec.db";
  JobState state;
  JobSpec& spec = state.spec;
  spec.id = 7, spec.name = "bert-7", spec.tenant = "alice", spec.vc = "research", spec.model = "bert";
  spec.arrival = 12.5, spec.gpus = 4, spec.min_gpus = 2, spec.max_gpus = 8, spec.gpu_milli = 500;
  spec.total_work = 1e6, spec.tracked = false, spec.priority = 2.5;
  state.status = JobStatus::preempted;
  state.first_start = 20.0, state.executed_work = 300, state.attained_service = 4000, state.gpu_seconds = 3900;
  state.preemptions = 3, state.attempts = 2;
  {
    ResultsStore store(path.string());
    const std::int64_t run = store.begin_run(RunInfo{"codec", "{}", "", 1, "simulation", ""});
    RunResults results;
    results.jobs.push_back(job_record(state));
    store.complete_run(run, results);
  }
  ResultsStore store(path.string());
  const std::vector<JobRecord> read = store.jobs(1);
  REQUIRE(read.size() == 1);
  const JobState back = job_state(read[0]);
  CHECK(back.spec.id == 7);
  CHECK(back.spec.name == "bert-7");
  CHECK(back.spec.tenant == "alice");
  CHECK(back.spec.vc == "research");
  CHECK(back.spec.model == "bert");
  CHECK(back.spec.arrival == 12.5);
  CHECK(back.spec.gpus == 4);
  CHECK(back.spec.min_gpus == 2);
  CHECK(back.spec.max_gpus == 8);
  CHECK(back.spec.gpu_milli == 500);
  CHECK(back.spec.total_work == 1e6);
  CHECK_FALSE(back.spec.tracked);
  CHECK(back.spec.priority == 2.5);  // gavel weighs jobs by it: a restart must keep it
  CHECK(back.status == JobStatus::preempted);
  CHECK(back.first_start == 20.0);
  CHECK_FALSE(back.finish);
  CHECK(back.executed_work == 300);
  CHECK(back.attained_service == 4000);
  CHECK(back.gpu_seconds == 3900);
  CHECK(back.preemptions == 3);
  CHECK(back.attempts == 2);

  // The table's columns are the codec's, in its order, after run_id.
  std::string columns;
  sql::Database raw(path.string(), false);
  auto info = raw.prepare("SELECT name FROM pragma_table_info('jobs')");
  while (info.step()) columns += (columns.empty() ? "" : ", ") + info.text(0);
  CHECK(columns == "run_id, " + job_row_columns());
}

TEST_CASE("files that are not tessel databases are refused") {
  TempDir dir;
  dir.write("text.db", "this is not a database at all, just some text that is long enough");
  CHECK_THROWS_WITH_AS(ResultsStore((dir.path() / "text.db").string()),
                       ((dir.path() / "text.db").string() + ": not an SQLite database").c_str(), UserError);
  {
    sql::Database other((dir.path() / "other.db").string());
    other.exec("CREATE TABLE t (x)");
  }
  CHECK_THROWS_WITH_AS(ResultsStore((dir.path() / "other.db").string()),
                       ((dir.path() / "other.db").string() + ": not a tessel results database").c_str(),
                       UserError);
  {
    ResultsStore store((dir.path() / "new.db").string());
  }
  {
    sql::Database newer((dir.path() / "new.db").string());
    newer.exec("PRAGMA user_version = 99");
  }
  CHECK_THROWS_WITH_AS(ResultsStore((dir.path() / "new.db").string()),
                       ((dir.path() / "new.db").string() +
                        ": written by a newer tessel (schema 99, this tessel knows up to " +
                        std::to_string(kSchemaVersion) + ")")
                           .c_str(),
                       UserError);
  // A version set by another program: below the first, or not that of the
  // tables the file has. Each once crashed or failed with SQLite's words alone.
  const std::string path = (dir.path() / "new.db").string();
  for (const int version : {-1, 0}) {
    {
      sql::Database changed(path);
      changed.exec("PRAGMA user_version = " + std::to_string(version));
    }
    CHECK_THROWS_WITH_AS(ResultsStore{path},
                         (path + ": a tessel results database whose schema version (" + std::to_string(version) +
                          ") was changed by another program; tessel cannot tell which tables it has")
                             .c_str(),
                         UserError);
  }
  {
    sql::Database changed(path);
    changed.exec("PRAGMA user_version = 5");
  }
  CHECK_THROWS_WITH_AS(ResultsStore{path},
                       (path + ": cannot upgrade its schema from version 5 to " + std::to_string(kSchemaVersion) +
                        ": duplicate column name: master_port")
                           .c_str(),
                       UserError);
  const auto result = run_tessel({"report", "missing.db"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err == "tessel: missing.db: no such results database\n");
}

// A read (report, tessel.open) once turned an empty file into a database;
// processes creating one database at once failed with "table runs already
// exists", and their runs were lost.
TEST_CASE("an empty file is not a database to read, and a new database is created once however many open it") {
  TempDir dir;
  const std::string empty = dir.write("empty.db", "").string();
  CHECK_THROWS_WITH_AS(ResultsStore(empty, /*create=*/false), (empty + ": an empty file, not a results database").c_str(),
                       UserError);
  CHECK(fs::file_size(empty) == 0);
  // A database whose schema a full disk stopped: SQLite's first page alone.
  const std::string bare = (dir.path() / "bare.db").string();
  {
    sql::Database db(bare);
    db.exec("PRAGMA journal_mode=WAL");
  }
  REQUIRE(fs::file_size(bare) > 0);
  CHECK_THROWS_WITH_AS(ResultsStore(bare, /*create=*/false),
                       (bare + ": a database without tables, not a results database").c_str(), UserError);

  const std::string path = (dir.path() / "new.db").string();
  std::vector<std::thread> openers;
  std::atomic<int> stored{0};
  for (int i = 0; i < 6; ++i)
    openers.emplace_back([&] {
      ResultsStore store(path);
      RunInfo info;
      info.config = "[cluster]\n";
      store.begin_run(info);
      ++stored;
    });
  for (std::thread& opener : openers) opener.join();
  CHECK(stored == 6);
  CHECK(ResultsStore(path).runs().size() == 6);
}

namespace {

RunInfo labelled(std::string label) {
  RunInfo info;
  info.label = std::move(label);
  return info;
}

// Every row of `table` for `run`, each as the SQL literals of its columns
// but run_id, in the table's order.
std::vector<std::string> rows_of(const fs::path& db, const std::string& table, std::int64_t run) {
  sql::Database database(db.string(), false);
  auto columns = database.prepare("SELECT name FROM pragma_table_info('" + table + "') WHERE name != 'run_id'");
  std::string row;
  while (columns.step()) row += (row.empty() ? "quote(" : " || ',' || quote(") + columns.text(0) + ")";
  auto query = database.prepare("SELECT " + row + " FROM " + table + " WHERE run_id = ? ORDER BY 1");
  query.bind(1, run);
  std::vector<std::string> rows;
  while (query.step()) rows.push_back(query.text(0));
  return rows;
}

// One finished job's run, as a RunSink hears it.
void feed_run(RunSink& sink) {
  JobRecord job;
  job.name = "a", job.tenant = "t", job.vc = "v", job.model = "m";
  job.arrival = 1, job.first_start = 2, job.finish = 12;
  job.gpus = 4, job.min_gpus = 2, job.max_gpus = 4;
  job.total_work = job.executed_work = 10, job.attained_service = job.gpu_seconds = 30;
  job.attempts = 1, job.status = "finished";
  RunTotals totals;
  totals.cluster_gpus = 8, totals.capacity_gpu_seconds = 96, totals.end_time = 12, totals.events = 3;
  sink.run_started();
  JobRecord started = job;
  started.status = "running", started.finish.reset();
  sink.job_changed(started);
  sink.sampled({5, 8, 4, 1, 0, 0});
  sink.sampled({7, 8, 4, 1, 0, 0});  // unchanged: recorded only as the run's last round
  sink.sampled({9, 8, 4, 1, 0, 0});
  sink.decided({6, 0, PluginKind::elasticity, "shrink_on_failure", "shrink", "lost node n1"});
  sink.resized({6, 0, 4, 2, 20, JobLayout{}});
  sink.job_changed(job);
  sink.run_ended(totals);
}

}  // namespace

TEST_CASE("samples are recorded where the cluster changes, and at the run's last round") {
  auto times = [](const std::vector<Sample>& rounds) {
    BatchSink sink;
    sink.run_started();
    for (const Sample& s : rounds) sink.sampled(s);
    sink.run_ended(RunTotals{});
    std::vector<double> recorded;
    for (const Sample& s : sink.take().samples) recorded.push_back(s.time);
    return recorded;
  };
  const Sample busy{0, 8, 4, 1, 0, 0}, full{0, 8, 8, 2, 0, 0};
  auto at = [](Sample s, double t) {
    s.time = t;
    return s;
  };
  CHECK(times({at(busy, 0), at(busy, 300), at(busy, 600), at(full, 900), at(busy, 1200), at(busy, 1500)}) ==
        std::vector<double>{0, 900, 1200, 1500});
  CHECK(times({at(busy, 0), at(full, 300)}) == std::vector<double>{0, 300});  // the last changed: once
  CHECK(times({at(busy, 0)}) == std::vector<double>{0});
  // Every field but the time is the state: a change in any one is recorded.
  for (int Sample::*field : {&Sample::total_gpus, &Sample::busy_gpus, &Sample::running_jobs, &Sample::waiting_jobs,
                             &Sample::pending_jobs, &Sample::shared_gpus}) {
    Sample changed = at(busy, 300);
    ++(changed.*field);
    CHECK(times({at(busy, 0), changed, at(changed, 600)}) == std::vector<double>{0, 300, 600});
  }
}

TEST_CASE("a statement whose step failed can be bound and run again") {
  TempDir dir;
  sql::Database db((dir.path() / "x.db").string());
  db.exec("CREATE TABLE t (k INTEGER PRIMARY KEY)");
  auto insert = db.prepare("INSERT INTO t VALUES (?)");
  insert.bind(1, 1).run();
  CHECK_THROWS_AS(insert.bind(1, 1).run(), sql::Error);  // the key is taken
  insert.bind(1, 2).run();
  CHECK(count(dir.path() / "x.db", "SELECT count(*) FROM t") == 2);
}

TEST_CASE("the real-node journal writes a run's rows as a simulation's batch does") {
  TempDir dir;
  const fs::path db = dir.path() / "runs.db";
  BatchSink batch;
  feed_run(batch);
  std::int64_t simulated = 0, real = 0;
  {
    ResultsStore store(db.string());
    simulated = store.begin_run(labelled("simulated"));
    store.complete_run(simulated, batch.take());
  }
  {
    cluster::Journal journal(db.string(), labelled("real"), /*new_run=*/true);
    real = journal.run();
    feed_run(journal);
  }
  REQUIRE(simulated != real);
  for (const char* table : {"jobs", "samples", "decisions", "resizes", "metrics"}) {
    INFO(table);
    const std::vector<std::string> rows = rows_of(db, table, simulated);
    CHECK_FALSE(rows.empty());
    CHECK(rows_of(db, table, real) == rows);
  }
  CHECK(count(db, "SELECT count(*) FROM metrics WHERE name = 'finished' AND value = 1") == 2);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE end_time = 12 AND events = 3 AND capacity_gpu_seconds = 96 AND "
                  "cluster_gpus = 8 AND wall_seconds < 12") == 2);
}

TEST_CASE("a journal on a full disk keeps its writes in memory and saves them once, in order, when there is room") {
  TempDir dir;
  const TestMount disk = TestMount::tmpfs(dir.path() / "disk", 1 << 20);
  if (!disk.mounted()) return;  // mounting needs root; CI runs as root
  const fs::path db = dir.path() / "disk/runs.db";
  BatchSink batch;
  feed_run(batch);
  std::int64_t simulated = 0;
  {
    ResultsStore store(db.string());
    simulated = store.begin_run(labelled("simulated"));
    store.complete_run(simulated, batch.take());
  }
  cluster::Journal journal(db.string(), labelled("real"), /*new_run=*/true);
  fill_disk(dir.path() / "disk/filler");
  // The run's writes in one transaction, which the disk refuses (at its
  // commit, or before); then one more on its own, kept without trying.
  {
    auto transaction = journal.transaction();
    feed_run(journal);
    transaction.commit();
  }
  CHECK_FALSE(journal.writable());
  CHECK(journal.write_error().find(db.string() + ": cannot write: the disk is full") != std::string::npos);
  const std::size_t waiting = journal.unwritten();
  CHECK(waiting >= 7);  // every write of feed_run
  journal.mark_run("complete", "");
  CHECK(journal.unwritten() == waiting + 1);
  CHECK_FALSE(journal.retry());  // still full: nothing saved, nothing dropped
  CHECK(journal.unwritten() == waiting + 1);
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE run_id = " + std::to_string(journal.run())) == 0);

  fs::remove(dir.path() / "disk/filler");
  CHECK(journal.retry());
  CHECK(journal.writable());
  CHECK(journal.unwritten() == 0);
  // Every row once, as a simulation's batch writes them.
  for (const char* table : {"jobs", "samples", "decisions", "resizes", "metrics"}) {
    INFO(table);
    CHECK(rows_of(db, table, journal.run()) == rows_of(db, table, simulated));
  }
  CHECK(query_text(db, "SELECT status FROM runs WHERE id = " + std::to_string(journal.run())) == "complete");
}

TEST_CASE("a submission that waited for room keeps the time it was made") {
  TempDir dir;
  const TestMount disk = TestMount::tmpfs(dir.path() / "disk", 1 << 20);
  if (!disk.mounted()) return;  // mounting needs root; CI runs as root
  const fs::path db = dir.path() / "disk/runs.db";
  cluster::Journal journal(db.string(), labelled("real"), /*new_run=*/true);
  fill_disk(dir.path() / "disk/filler");
  JobRecord job;
  job.name = "a", job.gpus = 1, job.total_work = 10, job.status = "pending";
  cluster::JobRequest request;
  request.command = {"true"};
  request.workdir = "/";
  const std::string before = cluster::iso8601_utc_now();
  journal.save_submission(job, request);
  const std::string after = cluster::iso8601_utc_now();
  REQUIRE_FALSE(journal.writable());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the replay comes later
  fs::remove(dir.path() / "disk/filler");
  REQUIRE(journal.retry());
  const std::string stamped =
      query_text(db, "SELECT submitted_at FROM cluster_jobs WHERE run_id = " + std::to_string(journal.run()));
  CHECK(stamped >= before);  // ISO 8601 of one format sorts as text
  CHECK(stamped <= after);
}

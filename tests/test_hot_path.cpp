// The simulator's hot path (issue 17): the one pass that accounts every
// running job before a round, and storing a finished run with its rows'
// parent checked once. Both must give what the slower way gave.
#include <doctest/doctest.h>

#include "engine/errors.hpp"
#include "fifo_scheduler.hpp"
#include "results/sqlite.hpp"
#include "results/store.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// Three jobs on 4 GPUs: 0 (2 GPUs) and 1 (1 GPU) run from t=0, 2 (2 GPUs) waits.
std::unique_ptr<Scheduler> three_jobs() {
  auto scheduler = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  scheduler->submit(rigid_job(2, 100), 0);
  scheduler->submit(rigid_job(1, 100), 0);
  scheduler->submit(rigid_job(2, 100), 0);
  const RoundOutcome first = scheduler->run_round(0);
  REQUIRE(first.started == std::vector<JobId>{0, 1});
  return scheduler;
}

RunInfo simulation_run(std::string label) {
  RunInfo info;
  info.label = std::move(label);
  info.config = "";
  info.seed = 1;
  info.mode = "simulation";
  return info;
}

}  // namespace

TEST_CASE("one pass over the running jobs accounts them as a report of each would, and the round adds nothing") {
  auto each = three_jobs();
  auto pass = three_jobs();
  each->report_progress(0, 30.5, 10);
  each->report_progress(1, 70.25, 10);
  std::vector<JobId> asked;
  pass->report_running_progress(10, [&](const JobState& job) {
    asked.push_back(job.spec.id);
    return job.spec.id == 0 ? 30.5 : 1000.0;  // more than its total: capped, as report_progress caps it
  });
  CHECK(asked == std::vector<JobId>{0, 1});  // running jobs only, in arrival order
  CHECK(pass->job(1).executed_work == 100);
  pass->report_progress(1, 70.25, 10);  // as `each` has it, for the comparison below
  each->run_round(10);
  pass->run_round(10);
  for (JobId id : {0u, 1u, 2u}) {
    CAPTURE(id);
    CHECK(pass->job(id).executed_work == each->job(id).executed_work);
    CHECK(pass->job(id).gpu_seconds == each->job(id).gpu_seconds);
    CHECK(pass->job(id).attained_service == each->job(id).attained_service);
  }
  // Ten seconds on 2 GPUs, counted once: the round at the pass's time does
  // not account the running jobs a second time.
  CHECK(pass->job(0).gpu_seconds == 20);
  CHECK(pass->job(1).gpu_seconds == 10);
  CHECK(pass->job(2).gpu_seconds == 0);
}

TEST_CASE("the pass drops the jobs that ended from the active list, and later rounds account time again") {
  auto scheduler = three_jobs();
  scheduler->complete(1, 5, JobStatus::finished);
  std::vector<JobId> asked;
  scheduler->report_running_progress(5, [&](const JobState& job) {
    asked.push_back(job.spec.id);
    return job.executed_work;
  });
  CHECK(asked == std::vector<JobId>{0});
  std::vector<JobId> active;
  for (const JobState* job : scheduler->active()) active.push_back(job->spec.id);
  CHECK(active == std::vector<JobId>{0, 2});
  CHECK(scheduler->job(1).gpu_seconds == 5);
  // A round at another time than the pass's accounts the running jobs itself.
  scheduler->run_round(5);
  scheduler->run_round(8);
  CHECK(scheduler->job(0).gpu_seconds == 16);
  CHECK(scheduler->job(1).gpu_seconds == 5);
}

TEST_CASE("a finished run whose row was deleted meanwhile stores no rows, and says so; the next run stores its own") {
  TempDir dir;
  const fs::path path = dir.path() / "results.db";
  ResultsStore store(path.string());
  RunResults results;
  JobState state;
  state.spec = rigid_job(1, 10);
  state.status = JobStatus::finished;
  results.jobs.push_back(job_record(state));
  results.samples.push_back(Sample{0, 4, 1, 1, 0, 0, 0});

  const std::int64_t gone = store.begin_run(simulation_run("gone"));
  {
    sql::Database other(path.string(), false);  // another process removes it while it runs
    other.exec("DELETE FROM runs WHERE id = " + std::to_string(gone));
  }
  try {
    store.complete_run(gone, results);
    FAIL("complete_run stored a run that is not there");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("run " + std::to_string(gone) + " is no longer in the database") !=
          std::string::npos);
    CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
  }
  CHECK(count(path, "SELECT count(*) FROM jobs") == 0);
  CHECK(count(path, "SELECT count(*) FROM samples") == 0);

  const std::int64_t kept = store.begin_run(simulation_run("kept"));
  store.complete_run(kept, results);
  CHECK(count(path, "SELECT count(*) FROM jobs WHERE run_id = " + std::to_string(kept)) == 1);
  CHECK(count(path, "SELECT count(*) FROM samples WHERE run_id = " + std::to_string(kept)) == 1);
  CHECK(store.run(kept)->status == "complete");
}

TEST_CASE("rows written many to a statement are the rows written one at a time, in the same order") {
  TempDir dir;
  const fs::path path = dir.path() / "rows.db";
  ResultsStore store(path.string());
  // 64 rows go to a statement: 130 rows are two full statements and two rows alone.
  RunResults results;
  for (int i = 0; i < 130; ++i) {
    JobState state;
    state.spec = rigid_job(1 + i % 3, 10.0 * i);
    state.spec.id = static_cast<JobId>(i);
    state.spec.name = "job-" + std::to_string(i);
    state.status = i % 2 ? JobStatus::finished : JobStatus::queued;
    if (i % 2) state.finish = 100.0 + i;
    state.gpu_seconds = 0.5 * i;
    results.jobs.push_back(job_record(state));
    results.samples.push_back(Sample{300.0 * i, 8, i % 9, i % 5, i % 7, i % 2, i % 3});
  }
  const std::int64_t batched = store.begin_run(simulation_run("batched"));
  store.complete_run(batched, results);
  const std::int64_t single = store.begin_run(simulation_run("single"));
  {
    sql::Database db(path.string(), false);
    sql::Transaction transaction(db);
    RunRows rows(db, single);
    for (const JobRecord& j : results.jobs) rows.job(j);
    for (const Sample& s : results.samples) rows.sample(s);
    transaction.commit();
  }
  auto dump = [&](const std::string& sql, int columns, std::int64_t run) {
    sql::Database db(path.string(), false);
    auto query = db.prepare(sql);
    query.bind(1, run);
    std::vector<std::string> rows;
    while (query.step()) {
      std::string row;
      for (int c = 0; c < columns; ++c) row += query.text(c) + "|";
      rows.push_back(row);
    }
    return rows;
  };
  const std::pair<std::string, int> tables[] = {
      {"SELECT * FROM jobs WHERE run_id = ? ORDER BY job_id", job_row_column_count() + 1},
      {"SELECT * FROM samples WHERE run_id = ? ORDER BY rowid", 8}};
  for (const auto& [sql, columns] : tables) {
    CAPTURE(sql);
    const std::vector<std::string> a = dump(sql, columns, batched), b = dump(sql, columns, single);
    CHECK(a.size() == 130);
    // The run ids differ; everything after them is the same.
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].substr(a[i].find('|')) == b[i].substr(b[i].find('|')));
  }
}

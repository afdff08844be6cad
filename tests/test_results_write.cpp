// How a finished run's rows are written (issue 17): all of a run's jobs, and
// all of its samples, in one INSERT ... SELECT each, from tables of the
// connection that read them from memory (store.cpp, RowTable).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fifo_scheduler.hpp"
#include "results/sqlite.hpp"
#include "results/store.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

RunInfo simulation_run(std::string label) {
  RunInfo info;
  info.label = std::move(label);
  info.seed = 1;
  info.mode = "simulation";
  return info;
}

std::vector<JobRecord> job_records(int first, int count) {
  std::vector<JobRecord> jobs;
  for (int i = first; i < first + count; ++i) {
    JobState state;
    state.spec = rigid_job(1 + i % 2, 10.0 * i);
    state.spec.id = static_cast<JobId>(i);
    state.spec.name = "job-" + std::to_string(i);
    jobs.push_back(job_record(state));
  }
  return jobs;
}

std::int64_t count(sql::Database& db, const std::string& sql) {
  auto query = db.prepare(sql);
  REQUIRE(query.step());
  return query.integer(0);
}

}  // namespace

TEST_CASE("a run's rows at its end are its first: a job that has a row already, or is given twice, is refused") {
  TempDir dir;
  const std::string path = (dir.path() / "rows.db").string();
  ResultsStore store(path);
  const std::int64_t run = store.begin_run(simulation_run("twice"));
  sql::Database db(path, false);
  {
    sql::Transaction transaction(db);
    RunRows rows(db, run);
    rows.job(job_records(0, 1)[0]);  // the journal's way: one row, replacing
    transaction.commit();
  }
  std::vector<JobRecord> again = job_records(0, 3);
  again[0].name = "replaced";
  {
    sql::Transaction transaction(db);
    RunRows rows(db, run);
    try {
      rows.jobs(again);
      FAIL("job 0 had a row and was written again");
    } catch (const sql::Error& e) {
      CHECK(e.code() == SQLITE_CONSTRAINT);
    }
  }  // rolled back
  CHECK(count(db, "SELECT count(*) FROM jobs WHERE run_id = " + std::to_string(run)) == 1);
  CHECK(store.jobs(run).at(0).name == "job-0");

  std::vector<JobRecord> doubled = job_records(5, 2);
  doubled.push_back(doubled[0]);
  sql::Transaction transaction(db);
  RunRows rows(db, run);
  CHECK_THROWS_AS(rows.jobs(doubled), sql::Error);
}

TEST_CASE("one RunRows writes several spans of rows, and a second one on the connection writes too") {
  TempDir dir;
  const std::string path = (dir.path() / "rows.db").string();
  ResultsStore store(path);
  const std::int64_t run = store.begin_run(simulation_run("spans"));
  sql::Database db(path, false);
  sql::Transaction transaction(db);
  RunRows first(db, run);
  first.jobs(job_records(0, 10));
  first.samples(std::vector<Sample>{{0, 8, 1, 1, 0, 0, 0}, {300, 8, 2, 2, 0, 0, 0}});
  RunRows second(db, run);  // the tables are the connection's already
  second.jobs(job_records(10, 5));
  first.jobs(job_records(20, 3));  // its statement again, other rows
  first.jobs({});
  second.samples(std::vector<Sample>{{600, 8, 3, 3, 1, 0, 0}});
  transaction.commit();
  const std::vector<JobRecord> jobs = store.jobs(run);
  REQUIRE(jobs.size() == 18);
  CHECK(jobs[9].id == 9);
  CHECK(jobs[10].id == 10);
  CHECK(jobs[15].id == 20);
  CHECK(jobs[17].name == "job-22");
  const std::vector<Sample> samples = store.samples(run);
  REQUIRE(samples.size() == 3);
  CHECK(samples[2].busy_gpus == 3);
  CHECK(samples[2].waiting_jobs == 1);
}

TEST_CASE("the row tables read only rows a statement gives them, and are no part of the file") {
  TempDir dir;
  const std::string path = (dir.path() / "rows.db").string();
  ResultsStore store(path);
  const std::int64_t run = store.begin_run(simulation_run("tables"));
  RunResults results;
  results.jobs = job_records(0, 4);
  results.samples = {{0, 8, 1, 1, 0, 0, 0}};
  store.complete_run(run, results);

  const std::int64_t more = store.begin_run(simulation_run("more"));
  sql::Database db(path, false);
  {
    sql::Transaction transaction(db);
    RunRows rows(db, more);
    rows.jobs(job_records(0, 2));  // each adds its table to this connection
    rows.samples(std::vector<Sample>{{0, 8, 1, 1, 0, 0, 0}});
    transaction.commit();
  }
  // No rows given, or a pointer of another kind: an error, never a read of
  // whatever memory it points at.
  for (const std::string sql : {"SELECT count(*) FROM tessel_job_rows(NULL)", "SELECT count(*) FROM tessel_job_rows(1)",
                          "SELECT count(*) FROM tessel_sample_rows('rows')"}) {
    CAPTURE(sql);
    auto query = db.prepare(sql);
    try {
      query.step();
      FAIL("read rows it was not given");
    } catch (const sql::Error& e) {
      CHECK(std::string(e.what()).find("no rows given") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(db.prepare("SELECT count(*) FROM tessel_job_rows"), sql::Error);

  // The file keeps only its tables: another connection (pandas, the sqlite3
  // shell) knows nothing of these.
  CHECK(count(db, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'tessel%'") == 0);
  sql::Database other(path, false);
  try {
    other.prepare("SELECT count(*) FROM tessel_job_rows(NULL)");
    FAIL("another connection sees the row table");
  } catch (const sql::Error& e) {
    CHECK(std::string(e.what()).find("no such table") != std::string::npos);
  }
  CHECK(store.jobs(run).size() == 4);
}

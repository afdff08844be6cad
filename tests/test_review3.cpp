// The third review of the day's merges: each fix with a case that fails
// without it, and the row-batching boundaries it checked.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "common/python_random.hpp"
#include "fifo_scheduler.hpp"
#include "results/sqlite.hpp"
#include "results/store.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

// /usr/bin/python3 (3.11.2) -c "import random
// r=random.Random(42); print([r.randint(-2**63, -2**63+5) + 2**63 for _ in range(6)])
// r=random.Random(42); print([r.randint(2**63-4, 2**63-1) - (2**63-4) for _ in range(6)])"
// gives [5, 0, 0, 5, 2, 1] and [0, 0, 2, 1, 1, 1].
TEST_CASE("PythonRandom::randint at the ends of int64, and bounds too far apart refused rather than wrapped") {
  constexpr std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t highest = std::numeric_limits<std::int64_t>::max();
  {
    PythonRandom r(42);
    for (std::int64_t expected : {5, 0, 0, 5, 2, 1}) CHECK(r.randint(lowest, lowest + 5) == lowest + expected);
  }
  {
    PythonRandom r(42);
    for (std::int64_t expected : {0, 0, 2, 1, 1, 1}) CHECK(r.randint(highest - 3, highest) == highest - 3 + expected);
  }
  PythonRandom r(42);
  // b - a is 2^63 + 9: in int64 it wrapped to a negative width, which passed
  // the width check, and randint drew from [a, a + 9] as if b were a + 9.
  CHECK_THROWS_AS(r.randint(-(std::int64_t{1} << 62), (std::int64_t{1} << 62) + 9), std::invalid_argument);
  CHECK_THROWS_AS(r.randint(lowest, highest), std::invalid_argument);
  CHECK_THROWS_AS(r.randint(0, std::int64_t{1} << 32), std::invalid_argument);
  CHECK_NOTHROW(r.randint(0, (std::int64_t{1} << 32) - 2));
}

// complete_run writes jobs and samples 64 to a statement and the rest one at
// a time: every count around that boundary stores each row once, in order.
TEST_CASE("complete_run stores 0, 1, 63, 64, 65, 128 and 129 rows, each once and in order") {
  TempDir dir;
  ResultsStore store((dir.path() / "rows.db").string());
  for (int rows : {0, 1, 63, 64, 65, 128, 129}) {
    CAPTURE(rows);
    RunResults results;
    for (int i = 0; i < rows; ++i) {
      JobState state;
      state.spec = rigid_job(1, 10);
      state.spec.id = static_cast<JobId>(i);
      state.status = JobStatus::finished;
      state.finish = 100.0 + i;
      results.jobs.push_back(job_record(state));
      results.samples.push_back(Sample{10.0 * i, 8, i % 9, i % 5, i % 7, i % 2, i % 3});
    }
    RunInfo info;
    info.label = "rows-" + std::to_string(rows);
    info.mode = "simulation";
    const std::int64_t run = store.begin_run(info);
    store.complete_run(run, results);
    const std::vector<JobRecord> jobs = store.jobs(run);
    const std::vector<Sample> samples = store.samples(run);
    REQUIRE(jobs.size() == static_cast<std::size_t>(rows));
    REQUIRE(samples.size() == static_cast<std::size_t>(rows));
    for (int i = 0; i < rows; ++i) {
      CHECK(jobs[i].id == static_cast<JobId>(i));
      CHECK(jobs[i].finish == 100.0 + i);
      CHECK(samples[i].time == 10.0 * i);
      CHECK(samples[i].busy_gpus == i % 9);
    }
  }
}

// SQLite before 3.32 (Ubuntu 20.04's 3.31, for one) takes at most 999
// parameters to a statement; rows bound 64 to a statement took over that, and
// no finished run could be stored there. Rows now go in through a table that
// reads them from memory, two parameters in all; set lower on the connection
// here, as such a library has it, so that no way of writing them that needs
// many parameters comes back unnoticed.
TEST_CASE("a finished run's rows are stored where the connection takes few parameters to a statement") {
  TempDir dir;
  const std::string path = (dir.path() / "limit.db").string();
  ResultsStore store(path);
  for (int limit : {999, 30}) {  // 30: fewer than one job row's 24 columns
    CAPTURE(limit);
    RunInfo info;
    info.label = "limit-" + std::to_string(limit);
    info.mode = "simulation";
    const std::int64_t run = store.begin_run(info);
    std::vector<JobRecord> jobs;
    std::vector<Sample> samples;
    for (int i = 0; i < 130; ++i) {
      JobState state;
      state.spec = rigid_job(1, 10);
      state.spec.id = static_cast<JobId>(i);
      jobs.push_back(job_record(state));
      samples.push_back(Sample{10.0 * i, 8, i % 9, 0, 0, 0, 0});
    }
    {
      sql::Database db(path, false);
      sqlite3_limit(db.handle(), SQLITE_LIMIT_VARIABLE_NUMBER, limit);
      sql::Transaction transaction(db);
      RunRows rows(db, run);
      rows.jobs(jobs);
      rows.samples(samples);
      transaction.commit();
    }
    const std::vector<JobRecord> stored = store.jobs(run);
    const std::vector<Sample> stored_samples = store.samples(run);
    REQUIRE(stored.size() == 130);
    REQUIRE(stored_samples.size() == 130);
    for (int i = 0; i < 130; ++i) {
      CHECK(stored[i].id == static_cast<JobId>(i));
      CHECK(stored_samples[i].time == 10.0 * i);
    }
  }
}

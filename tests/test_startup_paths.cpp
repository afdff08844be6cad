// Issue 17's shortcuts in writing results: a new database gets its schema in
// one script, and job rows bind their texts without a copy. Each must leave
// the file exactly as the long way did.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "results/sqlite.hpp"
#include "results/store.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// sqlite_master, row by row in creation order.
std::vector<std::string> schema_of(const fs::path& file) {
  sql::Database db(file.string(), false);
  auto rows = db.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid");
  std::vector<std::string> out;
  while (rows.step()) out.push_back(rows.text(0) + "|" + rows.text(1) + "|" + rows.text(2) + "|" + rows.text(3));
  return out;
}

}  // namespace

TEST_CASE("a new database's schema is the migrated one") {
  TempDir dir;
  const fs::path fresh = dir.path() / "fresh.db";
  const fs::path migrated = dir.path() / "migrated.db";
  { ResultsStore store(fresh.string()); }
  {
    // A database of schema 1, as the first tessel wrote it; opening it runs
    // every later migration.
    sql::Database db(migrated.string());
    db.exec(schema_migrations()[0]);
    db.exec("PRAGMA application_id = " + std::to_string(count(fresh, "PRAGMA application_id")));
    db.exec("PRAGMA user_version = 1");
  }
  { ResultsStore store(migrated.string()); }
  const std::vector<std::string> expected = schema_of(migrated);
  CHECK(expected.size() == 15);
  CHECK(schema_of(fresh) == expected);
  CHECK(count(fresh, "PRAGMA user_version") == kSchemaVersion);
  CHECK(count(migrated, "PRAGMA user_version") == kSchemaVersion);
  CHECK(query_text(fresh, "PRAGMA journal_mode") == "wal");
}

TEST_CASE("job rows bound without a copy read back as written, batched and one by one") {
  TempDir dir;
  const fs::path file = dir.path() / "r.db";
  ResultsStore store(file.string());
  RunInfo info;
  info.label = "rows";
  const std::int64_t run = store.begin_run(info);
  // 64 rows to a statement, then 3 one at a time; texts long enough to be on
  // the heap, and empty ones.
  std::vector<JobRecord> jobs(67);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    JobRecord& j = jobs[i];
    j.id = static_cast<JobId>(i);
    j.name = "job-with-a-long-name-" + std::to_string(i);
    j.tenant = i % 2 ? "" : "tenant-" + std::to_string(i * 7);
    j.vc = "vc" + std::to_string(i % 5);
    j.model = i % 3 ? "resnet50-" + std::string(40, static_cast<char>('a' + i % 26)) : "";
    j.status = i % 4 ? "finished" : "running";
    j.arrival = static_cast<double>(i) * 1.5;
    j.gpus = j.min_gpus = j.max_gpus = 1 + static_cast<int>(i % 8);
  }
  RunResults results;
  results.jobs = jobs;
  store.complete_run(run, results);
  const std::vector<JobRecord> back = store.jobs(run);
  REQUIRE(back.size() == jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    CAPTURE(i);
    CHECK(back[i].id == jobs[i].id);
    CHECK(back[i].name == jobs[i].name);
    CHECK(back[i].tenant == jobs[i].tenant);
    CHECK(back[i].vc == jobs[i].vc);
    CHECK(back[i].model == jobs[i].model);
    CHECK(back[i].status == jobs[i].status);
    CHECK(back[i].arrival == jobs[i].arrival);
    CHECK(back[i].gpus == jobs[i].gpus);
  }
  // Empty texts are stored as texts, not NULL.
  CHECK(count(file, "SELECT count(*) FROM jobs WHERE typeof(tenant) <> 'text' OR typeof(model) <> 'text'") == 0);
}

// The JCT bound (avg_jct_bound_s): the average JCT of the tracked jobs with
// those still waiting or running when the run ended counted up to that end,
// as Blox's average over its tracked jobs would count them at the least had
// the run gone on until they finished.
#include <doctest/doctest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "results/sqlite.hpp"
#include "results/summary.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

JobRecord job(double arrival, std::string status, std::optional<double> finish = std::nullopt, bool tracked = true) {
  JobRecord r;
  r.arrival = arrival;
  r.status = std::move(status);
  r.finish = finish;
  if (finish) r.first_start = arrival;
  r.tracked = tracked;
  return r;
}

// A stream that gives up with tracked jobs unfinished: LAS on one 4-GPU node
// at 60 jobs/h starves the jobs that have run longest (as blox-fig12-13).
const char* kGaveUp = R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = "until_tracked_done"
jobs_per_hour = 60
track = [20, 400]
give_up_hours = 2
seed = 1
[scheduler]
attained_service = "seconds"
allocation = { plugin = "las" }
placement = { plugin = "consolidated" }
[output]
database = "g.db"
)";

double metric(const fs::path& db, const std::string& name) {
  sql::Database d(db.string(), false);
  auto q = d.prepare("SELECT value FROM metrics WHERE run_id = 1 AND name = ?");
  q.bind(1, name);
  REQUIRE(q.step());
  return q.real(0);
}

}  // namespace

TEST_CASE("the JCT bound counts tracked jobs still in the system up to the run's end") {
  const std::vector<JobRecord> jobs = {
      job(0, "finished", 100),        // 100
      job(50, "finished", 250),       // 200
      job(300, "queued"),             // 1000 - 300 = 700
      job(400, "running"),            // 600
      job(500, "preempted"),          // 500
      job(900, "pending"),            // 100
      job(1200, "pending"),           // arrives after the end: 0
      job(0, "rejected"),             // left the system: not counted
      job(0, "failed"),               // not counted
      job(0, "cancelled"),            // a real-node job cancelled: not counted
      job(0, "queued", {}, false),    // untracked: not counted
      job(0, "finished", 5000, false),
  };
  const RunSummary s = summarize(jobs, 0, 4, 1000);
  CHECK(s.avg_jct == doctest::Approx(150));
  CHECK(s.avg_jct_bound == doctest::Approx((100 + 200 + 700 + 600 + 500 + 100 + 0) / 7.0));
  CHECK(s.unfinished == 8);

  // Every tracked job finished: the bound is the average JCT itself.
  const std::vector<JobRecord> done = {job(0, "finished", 100), job(50, "finished", 250), job(0, "rejected")};
  CHECK(summarize(done, 0, 4, 1000).avg_jct_bound == doctest::Approx(150));

  // No tracked job finished yet: the bound still says how long they have waited.
  const std::vector<JobRecord> waiting = {job(200, "queued"), job(600, "running")};
  const RunSummary w = summarize(waiting, 0, 4, 1000);
  CHECK(std::isnan(w.avg_jct));  // over no jobs: no value
  CHECK(w.avg_jct_bound == doctest::Approx(600));
  CHECK(std::isnan(summarize(std::vector<JobRecord>{}, 0, 4, 1000).avg_jct_bound));

  // Averaged over seeds as a mean, like the average JCT.
  const std::vector<RunSummary> runs = {s, w};
  CHECK(average(runs).avg_jct_bound == doctest::Approx((s.avg_jct_bound + 600) / 2));
}

TEST_CASE("the JCT bound is a figure of the one list") {
  const Figure* figure = find_figure("avg_jct_bound_s");
  REQUIRE(figure != nullptr);
  CHECK(figure->unit == FigureUnit::seconds);
  CHECK(figure->over_seeds == Averaging::mean);
  CHECK(figure_title(*figure) == "avg JCT bound (s)");
  // Last of the list, so that the figures before it keep their CSV columns.
  CHECK(std::string(figures().back().name) == "avg_jct_bound_s");
}

TEST_CASE("a run that gave up stores the JCT bound, and report computes it again from the rows") {
  TempDir dir;
  dir.write("g.toml", kGaveUp);
  const auto run = run_tessel({"run", "g.toml", "-q"}, dir.path());
  REQUIRE_MESSAGE(run.code == 0, run.err);
  const fs::path db = dir.path() / "g.db";
  REQUIRE(count(db, "SELECT count(*) FROM jobs WHERE tracked = 1 AND status != 'finished'") > 0);

  // The bound from the rows, as SQL has it.
  double expected = 0;
  {
    sql::Database d(db.string(), false);
    auto q = d.prepare(
        "SELECT avg(CASE WHEN status = 'finished' THEN finish ELSE (SELECT end_time FROM runs WHERE id = 1) END "
        "- arrival) FROM jobs WHERE run_id = 1 AND tracked = 1 AND status NOT IN ('rejected', 'failed')");
    REQUIRE(q.step());
    expected = q.real(0);
  }
  const double stored = metric(db, "avg_jct_bound_s");
  CHECK(stored == doctest::Approx(expected));
  CHECK(stored > metric(db, "avg_jct_s"));  // the starved jobs count, and they waited longest

  // A run stored before the figure existed has it computed again from its
  // rows, to the run's end.
  {
    sql::Database d(db.string(), false);
    d.exec("DELETE FROM metrics WHERE name = 'avg_jct_bound_s'");
  }
  const auto report = run_tessel({"report", "g.db", "--format", "json"}, dir.path());
  REQUIRE_MESSAGE(report.code == 0, report.err);
  const nlohmann::json rows = nlohmann::json::parse(report.out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["avg_jct_bound_s"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
}

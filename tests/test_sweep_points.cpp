// A sweep point alone (`tessel run --point K`, what each Slurm array task
// runs): numbered as the whole sweep numbers it, and --resume's choice of
// points, which `--slurm --resume` submits.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>

#include "engine/errors.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

const char* kSweep = R"([cluster]
nodes = 2
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 8
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
[output]
database = "points.db"
[sweep]
"workload.jobs_per_hour" = [2, 4, 8]
seeds = [1, 2]
)";

ExperimentOptions options_for(std::string config) {
  ExperimentOptions options;
  options.config = std::move(config);
  return options;
}

}  // namespace

TEST_CASE("--point K plans the K-th point of the whole sweep, and that point alone") {
  TempDir dir;
  const std::string config = (dir.path() / "s.toml").string();
  dir.write("s.toml", kSweep);
  const ExperimentPlan whole = plan_experiment(options_for(config));
  REQUIRE(whole.runs.size() == 6);
  for (std::size_t k = 0; k < whole.runs.size(); ++k) {
    CHECK(whole.runs[k].point == k);
    ExperimentOptions options = options_for(config);
    options.point = k;
    const ExperimentPlan one = plan_experiment(options);
    REQUIRE(one.runs.size() == 1);
    CHECK(one.runs[0].point == k);
    CHECK(one.runs[0].info.axes == whole.runs[k].info.axes);
    CHECK(one.runs[0].info.fingerprint == whole.runs[k].info.fingerprint);
  }
  CHECK(whole.runs[3].info.axes == R"({"workload.jobs_per_hour":4,"seed":2})");
}

TEST_CASE("a point past the sweep is the user's mistake, naming the points there are") {
  TempDir dir;
  dir.write("s.toml", kSweep);
  ExperimentOptions options = options_for((dir.path() / "s.toml").string());
  options.point = 6;
  CHECK_THROWS_WITH_AS(plan_experiment(options), doctest::Contains("has 6 sweep points, numbered 0 to 5"),
                       UserError);
}

TEST_CASE("--resume keeps the points without a complete run, whichever ran first") {
  TempDir dir;
  dir.write("s.toml", kSweep);
  const std::string config = (dir.path() / "s.toml").string(), db = (dir.path() / "points.db").string();
  std::atomic<bool> stop{false};
  for (const std::size_t k : {4u, 1u}) {
    ExperimentOptions options = options_for(config);
    options.database = db;
    options.point = k;
    run_experiment(plan_experiment(options), &stop);
  }
  ExperimentOptions whole = options_for(config);
  whole.database = db;
  ExperimentPlan plan = plan_experiment(whole);
  ResultsStore store(db);
  std::vector<std::string> notes;
  CHECK(drop_complete_points(plan.runs, store, notes) == 2);
  std::vector<std::size_t> left;
  for (const PlannedRun& run : plan.runs) left.push_back(run.point);
  CHECK(left == std::vector<std::size_t>{0, 2, 3, 5});
  CHECK(notes.empty());
}

// experiments/tiresias/testbed.toml: its submit-time window selects the 480
// jobs that its README and bench/tiresias_events.cpp describe (philly.csv's
// jobs 62,000 to 62,479 by submit time, the clock starting at the first), at
// the load the README states. Skipped when ../shared/data is absent; the
// runs' figures are pinned by test_experiments (tests/golden).
#include <doctest/doctest.h>

#include <numeric>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"
#include "workloads/workload.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

const fs::path kTestbed = source_root() / "experiments" / "tiresias" / "testbed.toml";

Workload jobs_of(const std::vector<std::string>& overrides = {}) {
  const ExperimentConfig config = load_experiment(kTestbed, overrides);
  return build_workload(config.workload, ClusterState(config.cluster.nodes));
}

}  // namespace

TEST_CASE("testbed.toml's window holds philly.csv's jobs 62,000 to 62,479 by submit time, and no other") {
  if (!shared_data("pollux/philly.csv")) {
    MESSAGE("skipped: ../shared/data/pollux/philly.csv is not there");
    return;
  }
  const Workload testbed = jobs_of();
  // The whole list, in the order a run reads it (stably by submit time).
  const Workload all = jobs_of({"workload.window=[0, 1e12]"});
  REQUIRE(all.jobs.size() == 82247);
  REQUIRE(testbed.jobs.size() == 480);
  constexpr std::size_t first = 62000;
  const double origin = all.jobs[first].arrival;
  CHECK(load_experiment(kTestbed).workload.transforms.window->first == origin);
  // The jobs just outside have other submit times, so the window's edges
  // fall between them and no tie is cut.
  CHECK(all.jobs[first - 1].arrival < origin);
  CHECK(all.jobs[first + 480].arrival > all.jobs[first + 479].arrival);
  for (std::size_t i = 0; i < testbed.jobs.size(); ++i) {
    CAPTURE(i);
    const JobSpec& ours = testbed.jobs[i];
    const JobSpec& theirs = all.jobs[first + i];
    CHECK(ours.arrival == doctest::Approx(theirs.arrival - origin));
    CHECK(ours.gpus == theirs.gpus);
    CHECK(ours.total_work == theirs.total_work);
  }
}

TEST_CASE("testbed.toml's 480 jobs ask for 6.4 times what 60 GPUs serve while they arrive") {
  if (!shared_data("pollux/philly.csv")) {
    MESSAGE("skipped: ../shared/data/pollux/philly.csv is not there");
    return;
  }
  const ExperimentConfig config = load_experiment(kTestbed);
  int gpus = 0;
  for (const auto& node : config.cluster.nodes) gpus += node.gpus;
  REQUIRE(gpus == 60);
  const Workload testbed = jobs_of();
  REQUIRE(!testbed.jobs.empty());
  // Under the linear model a job's work is its GPU-seconds.
  const double gpu_seconds = std::accumulate(testbed.jobs.begin(), testbed.jobs.end(), 0.0,
                                             [](double sum, const JobSpec& job) { return sum + job.total_work; });
  const double span = testbed.jobs.back().arrival - testbed.jobs.front().arrival;
  CHECK(gpu_seconds == doctest::Approx(27542960));
  CHECK(span == doctest::Approx(72265));  // 20.1 h
  CHECK(gpu_seconds / (gpus * span) == doctest::Approx(6.35).epsilon(0.01));
}

// [workload] profile_assignment = "exact_shares": Synergy's way of giving
// jobs models (ModelAssignment.OVERALL), each job the profile furthest below
// its share so far, against the default weighted draw.
#include <doctest/doctest.h>

#include <algorithm>

#include "config/experiment.hpp"
#include "engine/errors.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"
#include "workloads/workload.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// Solo was measured on one GPU only; Duo on 1 and 2.
const char* kProfileTable = R"json({
  "v100": {"('Solo', 1)": {"null": 2.0}, "('Duo', 1)": {"null": 4.0}, "('Duo', 2)": {"null": 6.0}}
})json";

Workload profiled(const TempDir& dir, int jobs, const std::string& gpu_counts, const std::string& extra) {
  dir.write("throughputs.json", kProfileTable);
  const std::string toml = R"([cluster]
nodes = 2
gpus_per_node = 8
[workload]
kind = "synthetic"
jobs = )" + std::to_string(jobs) + R"(
jobs_per_hour = 0
gpu_counts = )" + gpu_counts + R"(
gpu_weights = )" + (gpu_counts == "[1]" ? "[1]" : "[1, 1]") + R"(
model = { name = "gavel-table", path = "throughputs.json" }
)" + extra + R"(
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
  const ExperimentConfig config = load_experiment(dir.write("w.toml", toml));
  return build_workload(config.workload, ClusterState(config.cluster.nodes));
}

std::string models(const Workload& w) {
  std::string out;
  for (const JobSpec& job : w.jobs) out += job.model == "Solo" ? 'S' : 'D';
  return out;
}

}  // namespace

TEST_CASE("exact shares give each job the profile furthest below its share, the first in order on a tie") {
  TempDir dir;
  // Solo 3 : Duo 1. Owed before each job (n/4 - Duo so far, 3n/4 - Solo so far), the
  // weights in name order: job 0: 0, 0 -> Duo (first); job 1: -0.75, 0.75 -> Solo;
  // job 2: -0.5, 0.5 -> Solo; job 3: -0.25, 0.25 -> Solo; the cycle repeats from the tie at n = 4.
  const Workload w = profiled(dir, 8, "[1]", "profile_weights = { Solo = 3, Duo = 1 }\n"
                                             "profile_assignment = \"exact_shares\"");
  CHECK(models(w) == "DSSSDSSS");
  CHECK(w.notes.back() == "gave 8 jobs a profile of 'gavel-table', in exact shares of profile_weights");

  // Without weights, equal shares: the profiles in turn (the model lists Duo first).
  const Workload equal = profiled(dir, 6, "[1]", "profile_assignment = \"exact_shares\"");
  CHECK(models(equal) == "DSDSDS");
  CHECK(equal.notes.back() == "gave 6 jobs a profile of 'gavel-table', in exact shares");

  // The default draw at random keeps the split only on average.
  const Workload drawn = profiled(dir, 400, "[1]", "profile_weights = { Solo = 3, Duo = 1 }");
  const std::string drawn_models = models(drawn);
  const auto solo = std::count(drawn_models.begin(), drawn_models.end(), 'S');
  CHECK(solo != 300);  // seed 1; exact shares give 300 of 400
  CHECK(solo == doctest::Approx(300).epsilon(0.1));
  const Workload exact = profiled(dir, 400, "[1]", "profile_weights = { Solo = 3, Duo = 1 }\n"
                                                   "profile_assignment = \"exact_shares\"");
  const std::string exact_models = models(exact);
  CHECK(std::count(exact_models.begin(), exact_models.end(), 'S') == 300);
}

TEST_CASE("exact shares are kept apart for each GPU count, as the profiles that suit it") {
  TempDir dir;
  // Two-GPU jobs can only be Duo; one-GPU jobs alternate, whatever the two-GPU jobs got.
  const Workload w = profiled(dir, 200, "[1, 2]", "profile_assignment = \"exact_shares\"");
  std::string one;
  for (const JobSpec& job : w.jobs) {
    if (job.gpus == 2) CHECK(job.model == "Duo");
    if (job.gpus == 1) one += job.model == "Solo" ? 'S' : 'D';
  }
  REQUIRE(one.size() >= 4);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(one[i] == (i % 2 == 0 ? 'D' : 'S'));
}

TEST_CASE("profile_assignment mistakes are located") {
  TempDir dir;
  const std::string file = (dir.path() / "w.toml").string();
  CHECK_THROWS_WITH_AS(profiled(dir, 10, "[1]", "profile_assignment = \"round_robin\""),
                       (file + ":11:22: unknown profile_assignment 'round_robin' in [workload] "
                               "(valid: random, exact_shares)")
                           .c_str(),
                       ConfigError);
  // A model without profiles has nothing to assign.
  dir.write("linear.toml", R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 10
profile_assignment = "exact_shares"
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)");
  const std::string linear = (dir.path() / "linear.toml").string();
  CHECK_THROWS_WITH_AS(load_experiment(linear),
                       (linear + ":7:22: throughput model 'linear' has no profiles to assign; "
                                 "'profile_assignment' needs a model that has")
                           .c_str(),
                       ConfigError);
}

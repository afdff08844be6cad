// Attained service read on demand (issue 17): las ranks by
// SchedulerView::attained_service, which adds what a running job gained
// since the core last accounted it, so it declares that it reads no
// progress and its rounds skip accounting every running job (lazy
// progress). Its decisions must be what accounting every round gave.
#include <doctest/doctest.h>

#include <deque>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

ExperimentConfig las_experiment(const std::string& extra_scheduler) {
  // Multi-GPU jobs on 16 GPUs at a load that keeps a queue: LAS preempts
  // often, and a running job's service decides whom it preempts.
  return read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(R"([cluster]
nodes = 4
gpus_per_node = 4
[workload]
kind = "synthetic"
seed = 11
jobs = 80
jobs_per_hour = 12
[scheduler]
round_seconds = 300
allocation = { plugin = "las" }
placement = { plugin = "consolidated" }
)" + extra_scheduler, "lazy_service.toml")));
}

}  // namespace

TEST_CASE("a view reads a running job's service as the field plus what it gained since it was accounted") {
  ClusterState cluster(std::vector<NodeSpec>{{"n0", "v100", 4, 32, 256, 0}});
  std::deque<JobState> jobs;
  std::vector<JobState*> all;
  for (int i = 0; i < 3; ++i) {
    JobState& job = jobs.emplace_back();
    job.spec.id = static_cast<JobId>(i);
    job.attained_service = 100;
    all.push_back(&job);
  }
  all[0]->status = JobStatus::running;  // 2 GPUs, accounted until 400
  all[0]->allocation = Allocation{{0, 1}, 1000, 0, 0};
  all[1]->status = JobStatus::running;  // half of one GPU, accounted until 1000
  all[1]->allocation = Allocation{{2}, 500, 0, 0};
  all[2]->status = JobStatus::queued;   // waiting: its service stays
  const std::vector<double> accounted_until{400, 1000, 0};
  const FlatRate model;

  SchedulerSettings settings;
  const SchedulerView view(settings, cluster, model, all, {}, all, {}, 1000, nullptr, accounted_until);
  CHECK(view.attained_service(*all[0]) == 100 + 600 * 2);
  CHECK(view.attained_service(*all[1]) == 100);  // nothing elapsed
  CHECK(view.attained_service(*all[2]) == 100);
  const SchedulerView later(settings, cluster, model, all, {}, all, {}, 1600, nullptr, accounted_until);
  CHECK(later.attained_service(*all[1]) == 100 + 600 * 0.5);

  settings.service = ServiceUnit::seconds;  // classic LAS: seconds of running
  const SchedulerView seconds(settings, cluster, model, all, {}, all, {}, 1000, nullptr, accounted_until);
  CHECK(seconds.attained_service(*all[0]) == 100 + 600);
  // A view made without accounting times (a plugin's own test) reads the field.
  const SchedulerView plain(settings, cluster, model, all, {}, all, {}, 1000);
  CHECK(plain.attained_service(*all[0]) == 100);
}

TEST_CASE("las reads no progress: its rounds leave running jobs unaccounted") {
  // With the default placement, elasticity and admission, which read none.
  PluginRegistry registry(std::vector<std::string>{});
  CHECK_FALSE(compose_scheduler(las_experiment("").scheduler, registry, 1).reads_progress());
}

TEST_CASE("las with service read on demand decides as when every round accounted every job") {
  // Each round, a running job's service on demand must equal the per-round
  // sum, or the ranking (whom a waiting job preempts, who is kept) moves.
  // Preemptions show that the ranking of running jobs mattered.
  SUBCASE("GPU-seconds") { CHECK(check_lazy_progress_changes_nothing(las_experiment("")) > 0); }
  SUBCASE("seconds of running") {
    CHECK(check_lazy_progress_changes_nothing(las_experiment("attained_service = \"seconds\"\n")) > 0);
  }
}

// GPU-seconds read on demand (issue 17): tiresias and gittins place jobs in
// their queues (discretized_queues.hpp) by SchedulerView::gpu_seconds, which
// adds what a running job gained since the core last accounted it, so they
// declare that they read no progress and their rounds skip accounting every
// running job (lazy progress). Their decisions must be what accounting every
// round gave, in each of tiresias's queue orders, with the starvation guard
// (which counts run and wait times from GPU-seconds), with the simulator's
// greedy selection at events (which still reads progress), and whatever
// unit attained service is in.
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

ExperimentConfig experiment(const std::string& allocation, const std::string& extra = "") {
  // Multi-GPU jobs on 16 GPUs at a load that keeps a queue, with queue
  // limits low enough that most jobs cross one or two of them while they
  // run: crossings decide who is preempted.
  return read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(R"([cluster]
nodes = 4
gpus_per_node = 4
[workload]
kind = "synthetic"
seed = 5
jobs = 80
jobs_per_hour = 12
[scheduler]
round_seconds = 300
allocation = )" + allocation + R"(
placement = { plugin = "consolidated" }
)" + extra, "tiresias_lazy_queues.toml")));
}

// The same decisions with GPU-seconds read on demand as with every round
// accounting every job; preemptions show that crossings moved running jobs
// behind waiting ones.
void check_same_jobs(const ExperimentConfig& config) { CHECK(check_lazy_progress_changes_nothing(config) > 0); }

bool reads_progress(const ExperimentConfig& config) {
  PluginRegistry registry(config.scheduler.plugin_path);
  return compose_scheduler(config.scheduler, registry, 1).reads_progress();
}

constexpr const char* kTiresias = R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [1800, 7200])";

}  // namespace

TEST_CASE("a view reads a running job's GPU-seconds as the field plus what it gained, whatever the service unit") {
  ClusterState cluster(std::vector<NodeSpec>{{"n0", "v100", 4, 32, 256, 0}});
  std::deque<JobState> jobs;
  std::vector<JobState*> all;
  for (int i = 0; i < 3; ++i) {
    JobState& job = jobs.emplace_back();
    job.spec.id = static_cast<JobId>(i);
    job.gpu_seconds = 100;
    job.attained_service = 7;  // another unit: GPU-seconds must not follow it
    all.push_back(&job);
  }
  all[0]->status = JobStatus::running;  // 2 GPUs, accounted until 400
  all[0]->allocation = Allocation{{0, 1}, 1000, 0, 0};
  all[1]->status = JobStatus::running;  // half of one GPU, accounted until 1000
  all[1]->allocation = Allocation{{2}, 500, 0, 0};
  all[2]->status = JobStatus::queued;   // waiting: its GPU-seconds stay
  const std::vector<double> accounted_until{400, 1000, 0};
  const FlatRate model;

  SchedulerSettings settings;
  settings.service = ServiceUnit::seconds;
  const SchedulerView view(settings, cluster, model, all, {}, all, {}, 1000, nullptr, accounted_until);
  CHECK(view.gpu_seconds(*all[0]) == 100 + 600 * 2);
  CHECK(view.gpu_seconds(*all[1]) == 100);  // nothing elapsed
  CHECK(view.gpu_seconds(*all[2]) == 100);
  CHECK(view.attained_service(*all[0]) == 7 + 600);  // the service unit still counts seconds
  const SchedulerView later(settings, cluster, model, all, {}, all, {}, 1600, nullptr, accounted_until);
  CHECK(later.gpu_seconds(*all[1]) == 100 + 600 * 0.5);
  // A view made without accounting times (a plugin's own test) reads the field.
  const SchedulerView plain(settings, cluster, model, all, {}, all, {}, 1000);
  CHECK(plain.gpu_seconds(*all[0]) == 100);
}

TEST_CASE("tiresias and gittins read no progress: their rounds leave running jobs unaccounted") {
  TempDir dir;
  const std::string distribution = dir.write("gpu-time.csv", "duration\n3000\n100\n100000\n3000\n3000\n").string();
  CHECK_FALSE(reads_progress(experiment(std::string(kTiresias) + " }")));
  CHECK_FALSE(reads_progress(experiment(std::string(kTiresias) + ", promote_knob = 2 }")));
  CHECK_FALSE(reads_progress(experiment(R"({ plugin = "gittins", distribution = ")" + distribution + "\" }")));
}

TEST_CASE("tiresias with GPU-seconds read on demand decides as when every round accounted every job") {
  // Each round, a running job's GPU-seconds on demand must equal the
  // per-round sum, or a crossing is seen a round early or late and the
  // preemptions move.
  const std::string tiresias = kTiresias;
  SUBCASE("running jobs first") { check_same_jobs(experiment(tiresias + " }")); }
  SUBCASE("arrival order only") { check_same_jobs(experiment(tiresias + ", running_first = false }")); }
  SUBCASE("entry order") { check_same_jobs(experiment(tiresias + ", entry_order = true }")); }
  SUBCASE("starvation guard") { check_same_jobs(experiment(tiresias + ", promote_knob = 1 }")); }
  SUBCASE("service counted in seconds") {
    // Queues stay on GPU time: with the unit in seconds, reading attained
    // service instead would bin the multi-GPU jobs too high.
    check_same_jobs(experiment(tiresias + " }", "attained_service = \"seconds\"\n"));
  }
  SUBCASE("greedy selection, rounds at events and crossings") {
    // Rounds at fractional moments: summed once, GPU time would differ from
    // the per-round sum in its last bit, so this mode still reads progress.
    const ExperimentConfig config = experiment(tiresias + R"(, selection = "greedy_by_count" })",
                                               "left_out = \"stop\"\n[simulation]\nrounds = \"events\"\n");
    CHECK(reads_progress(config));
    check_same_jobs(config);
  }
}

TEST_CASE("gittins with GPU-seconds read on demand decides as when every round accounted every job") {
  TempDir dir;
  const std::string distribution = dir.write("gpu-time.csv", "duration\n3000\n100\n100000\n3000\n3000\n").string();
  check_same_jobs(experiment(R"({ plugin = "gittins", distribution = ")" + distribution +
                             R"(", delta = 1000, queue_thresholds_gpu_seconds = [1800, 7200] })"));
}

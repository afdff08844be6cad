// Tiresias's incremental plan (issue 17): under the default rules (running
// jobs first, no starvation guard, ranked selection) a round lists only the
// waiting jobs and the running jobs some waiting job ranks ahead of, and
// keeps the others (AllocationPlan::keep_running); with a decision log it
// ranks every job, so that the log says what it said. Checked on a plan
// built by hand, and on whole runs against the full plan, which a
// starvation guard too large to act selects.
#include <doctest/doctest.h>

#include <deque>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// Multi-GPU jobs on 16 GPUs with node failures and crashing jobs: a queue
// forms, crossings move running jobs behind waiting ones, and jobs are
// stopped and wait again.
std::string busy(const std::string& allocation, const std::string& extra = "") {
  return busy_experiment(allocation, extra, BusyLoad{.nodes = 4, .jobs = 120, .jobs_per_hour = 12, .seed = 5});
}

constexpr const char* kIncremental = R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [1800, 7200] })";
// The same queues through the full plan: a guard that would promote a job
// only after it waited 1e15 times its run time never acts, and with a guard
// tiresias ranks every job.
constexpr const char* kFull =
    R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [1800, 7200], promote_knob = 1e15 })";

// The same jobs, and the ranking of running jobs mattered.
void check_same_jobs_preempted(const RunResults& incremental, const RunResults& full) {
  CHECK(check_same_jobs(incremental, full) > 0);
}

// The grants' job ids, in rank order.
std::vector<JobId> ids(const AllocationPlan& plan) {
  std::vector<JobId> out;
  for (const Grant& grant : plan.ranked) out.push_back(grant.job);
  return out;
}

}  // namespace

TEST_CASE("tiresias lists only the jobs a waiting job may change, and every job where decisions are recorded") {
  const ExperimentConfig config = read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(
      R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
[scheduler]
allocation = { plugin = "tiresias", queue_thresholds_gpu_seconds = [3600] }
placement = { plugin = "consolidated" }
)",
      "incremental.toml")));
  PluginRegistry registry(config.scheduler.plugin_path);
  ComposedScheduler composed = compose_scheduler(config.scheduler, registry, 1);
  AllocationPolicy& tiresias = *composed.allocation;

  ClusterState cluster(std::vector<NodeSpec>{{"n0", "v100", 4, 32, 256, 0}});
  std::deque<JobState> jobs;
  std::vector<JobState*> all;
  for (int i = 0; i < 3; ++i) {
    JobState& job = jobs.emplace_back();
    job.spec.id = static_cast<JobId>(i);
    job.spec.gpus = job.spec.min_gpus = job.spec.max_gpus = 1;
    all.push_back(&job);
  }
  const FlatRate model;
  SchedulerSettings settings;
  auto run = [&](JobState& job, GpuId gpu) {
    job.status = JobStatus::running;
    job.allocation = Allocation{{gpu}, 1000, 0, 0};
  };
  auto plan_at = [&](double now, const std::vector<JobState*>& active) {
    std::vector<JobState*> waiting;
    for (JobState* job : active)
      if (job->waiting()) waiting.push_back(job);
    return tiresias.allocate(SchedulerView(settings, cluster, model, all, {}, active, waiting, now));
  };

  // Jobs 0 and 1 run, nobody waits: nothing listed, both kept; the next
  // change is job 0's crossing of 3600 GPU-s.
  run(*all[0], 0);
  run(*all[1], 1);
  AllocationPlan plan = plan_at(0, {all[0], all[1]});
  CHECK(plan.ranked.empty());
  CHECK(plan.keep_running.has_value());
  CHECK(plan.revisit_at == 3600);

  // Job 0 crossed into queue 2 and job 2 arrives in queue 1: job 2 ranks
  // ahead of job 0, which is listed behind it; job 1, still in queue 1,
  // runs ahead of both and is kept.
  all[0]->gpu_seconds = 5000;
  all[1]->gpu_seconds = 1000;
  all[2]->status = JobStatus::queued;
  plan = plan_at(5000, {all[0], all[1], all[2]});
  REQUIRE(ids(plan) == std::vector<JobId>{2, 0});
  CHECK(plan.keep_running.has_value());
  CHECK(plan.ranked[0].resources.gpus == 1);
  CHECK(plan.ranked[1].reason.str() == "queue 2 of 2: attained 5000 GPU-s >= 3600");
  CHECK(plan.revisit_at == 5000 + 2600);  // job 1's crossing

  // Job 2 ran into queue 2 and was preempted: it waits in the lowest queue,
  // where running jobs go first, so only it is listed.
  all[0]->gpu_seconds = 6000;
  all[2]->status = JobStatus::preempted;
  all[2]->gpu_seconds = 4000;
  plan = plan_at(6000, {all[0], all[1], all[2]});
  CHECK(ids(plan) == std::vector<JobId>{2});

  // With a decision log, the full plan: every job, by queue, running first.
  settings.decisions_recorded = true;
  plan = plan_at(6000, {all[0], all[1], all[2]});
  REQUIRE(ids(plan) == std::vector<JobId>{1, 0, 2});
  CHECK_FALSE(plan.keep_running.has_value());
  CHECK(plan.ranked[0].reason.str() == "queue 1 of 2: attained 1000 GPU-s < 3600");
}

TEST_CASE("tiresias's incremental plan decides as its full plan, job for job") {
  TempDir dir;
  SUBCASE("rounds on a clock") {
    check_same_jobs_preempted(simulate(dir, busy(kIncremental)), simulate(dir, busy(kFull)));
  }
  SUBCASE("rounds at events and crossings") {
    const std::string events = "[simulation]\nrounds = \"events\"\n";
    check_same_jobs_preempted(simulate(dir, busy(kIncremental, events)), simulate(dir, busy(kFull, events)));
  }
  SUBCASE("service counted in seconds") {
    const std::string seconds = "attained_service = \"seconds\"\n";
    check_same_jobs_preempted(simulate(dir, busy(kIncremental, seconds)), simulate(dir, busy(kFull, seconds)));
  }
}

TEST_CASE("with a decision log tiresias decides the same and logs each running job's queue every round") {
  TempDir dir;
  const RunResults quiet = simulate(dir, busy(kIncremental));
  const RunResults logged = simulate(dir, busy(kIncremental, "[output]\ndecisions = true\n"));
  check_same_jobs_preempted(quiet, logged);
  // The full plan's reasons, never the kept jobs' one: a running job's grant
  // gives its service, round after round.
  int running_grants = 0;
  for (const DecisionRecord& d : logged.decisions) {
    CHECK(d.reason.find("no waiting job is above") == std::string::npos);
    if (d.code == "grant" && d.time > 0 && d.reason.find("attained") != std::string::npos) ++running_grants;
  }
  CHECK(running_grants > 100);
}

// Lazy progress accounting (issue 17): when no plugin of a run reads a
// running job's progress (Plugin::reads_progress), rounds leave running jobs
// alone and a job's progress, service and GPU time are brought up to date
// when its run changes. Results must be what accounting every round gave.
#include <doctest/doctest.h>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "fifo_scheduler.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

ExperimentConfig experiment(const std::string& scheduler) {
  return read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 1
[scheduler]
)" + scheduler, "lazy.toml")));
}

bool composition_reads_progress(const std::string& scheduler) {
  PluginRegistry registry(std::vector<std::string>{});
  return compose_scheduler(experiment(scheduler).scheduler, registry, 1).reads_progress();
}

// FIFO + consolidated, as bench/sim_throughput runs it, with node crashes
// and checkpoints: jobs stop mid-run (losing progress since a checkpoint)
// and restart, so their progress is settled at many different times.
const char* kCrashingFifo = R"([cluster]
nodes = 4
gpus_per_node = 4
[workload]
kind = "synthetic"
seed = 7
jobs = 60
jobs_per_hour = 6
[scheduler]
round_seconds = 300
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
[failures]
node_mtbf_hours = 10
job_failure_probability = 0.3
node_repair_hours = 1
checkpoint_interval_seconds = 1800
)";

RunResults run(const ExperimentConfig& config, bool observed) {
  PluginRegistry registry(config.scheduler.plugin_path);
  Simulation simulation(config, registry);
  // An observer reads the scheduler after each round, so every round
  // accounts the running jobs, as all rounds did before lazy accounting.
  if (observed) simulation.observe_rounds([](double, const Scheduler&, const RoundOutcome&) {});
  return simulation.run();
}

}  // namespace

TEST_CASE("a composition reads progress unless each of its four plugins says it does not") {
  // accept_all, fifo, consolidated and none (the defaults besides fifo) do not.
  CHECK_FALSE(composition_reads_progress("allocation = { plugin = \"fifo\" }\nplacement = { plugin = \"consolidated\" }\n"));
  // SRTF ranks by remaining work; a plugin that says nothing is assumed to read.
  CHECK(composition_reads_progress("allocation = { plugin = \"srtf\" }\nplacement = { plugin = \"consolidated\" }\n"));
  CHECK(composition_reads_progress("allocation = { plugin = \"fifo\" }\nplacement = { plugin = \"first_fit\" }\n"));
}

TEST_CASE("a deferred round accounts nobody; a job's stop settles it from the progress source") {
  auto scheduler = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  scheduler->submit(rigid_job(2, 100), 0);
  scheduler->submit(rigid_job(1, 100), 0);
  REQUIRE(scheduler->run_round(0).started == std::vector<JobId>{0, 1});
  std::vector<std::pair<JobId, double>> asked;
  scheduler->set_progress_source([&](const JobState& job, double now) {
    asked.emplace_back(job.spec.id, now);
    return 0.1 * now;  // 0.1 work units a second since 0
  });

  scheduler->defer_running_progress(300);
  scheduler->run_round(300);
  CHECK(asked.empty());
  CHECK(scheduler->job(0).gpu_seconds == 0);
  CHECK(scheduler->job(0).executed_work == 0);

  // Job 1 finishes at 450: 450 s on 1 GPU, its work from the source.
  scheduler->complete(1, 450);
  CHECK(asked == std::vector<std::pair<JobId, double>>{{1, 450}});
  CHECK(scheduler->job(1).executed_work == doctest::Approx(45));
  CHECK(scheduler->job(1).gpu_seconds == 450);
  CHECK(scheduler->job(1).attained_service == 450);  // GPU-seconds, the default unit
  CHECK(scheduler->job(0).gpu_seconds == 0);

  // Job 0 crashes at 600: 600 s on 2 GPUs, in one step.
  scheduler->interrupt(0, 600, /*failed_attempt=*/true);
  CHECK(asked.back() == std::pair<JobId, double>{0, 600});
  CHECK(scheduler->job(0).executed_work == doctest::Approx(60));
  CHECK(scheduler->job(0).gpu_seconds == 1200);
  CHECK(scheduler->job(0).attained_service == 1200);
}

TEST_CASE("a job stopped at the time it was launched is not asked for progress") {
  // The simulator starts a job's run after the round that launched it: a
  // resize or stop in that round must not read the rate of its last run.
  auto scheduler = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  scheduler->submit(rigid_job(2, 100), 0);
  REQUIRE(scheduler->run_round(0).started == std::vector<JobId>{0});
  int asked = 0;
  scheduler->set_progress_source([&](const JobState&, double) {
    ++asked;
    return 50.0;
  });
  scheduler->interrupt(0, 0);
  CHECK(asked == 0);
  CHECK(scheduler->job(0).executed_work == 0);
}

TEST_CASE("a round that is not deferred still accounts every running job") {
  auto scheduler = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  scheduler->submit(rigid_job(2, 100), 0);
  REQUIRE(scheduler->run_round(0).started == std::vector<JobId>{0});
  scheduler->run_round(300);
  CHECK(scheduler->job(0).gpu_seconds == 600);
}

TEST_CASE("FIFO + consolidated with crashes: deferred accounting gives what accounting every round gave") {
  TempDir dir;
  const ExperimentConfig config = load_experiment(dir.write("experiment.toml", kCrashingFifo));
  const RunResults lazy = run(config, false);
  const RunResults eager = run(config, true);
  REQUIRE(lazy.jobs.size() == eager.jobs.size());
  int crashed = 0;
  for (std::size_t i = 0; i < lazy.jobs.size(); ++i) {
    const JobRecord& a = lazy.jobs[i];
    const JobRecord& b = eager.jobs[i];
    CAPTURE(i);
    CHECK(a.status == b.status);
    CHECK(a.first_start == b.first_start);
    CHECK(a.finish == b.finish);
    CHECK(a.attempts == b.attempts);
    CHECK(a.preemptions == b.preemptions);
    // One product instead of a sum of per-round ones: equal to rounding.
    CHECK(a.executed_work == doctest::Approx(b.executed_work).epsilon(1e-12));
    CHECK(a.gpu_seconds == doctest::Approx(b.gpu_seconds).epsilon(1e-12));
    CHECK(a.attained_service == doctest::Approx(b.attained_service).epsilon(1e-12));
    crashed += a.attempts > 1;
  }
  CHECK(crashed > 0);  // the crashes the case is about happened
  CHECK(lazy.end_time == eager.end_time);
}

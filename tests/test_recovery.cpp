// The core's recovery API, as the real-cluster daemon uses it after a
// restart: restore every job with its counters, adopt the ones that still
// run, end the ones that ended meanwhile; and a cluster that grows.
#include <doctest/doctest.h>

#include "config/experiment.hpp"
#include "models/models.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "scheduler/scheduler.hpp"
#include "support.hpp"

using namespace tessel;

namespace {

const ExperimentConfig& fifo_config() {
  static const ExperimentConfig config = read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 1
[scheduler]
round_seconds = 1
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "first_fit" }
)", "recovery.toml")));
  return config;
}

std::unique_ptr<Scheduler> scheduler(const std::vector<NodeSpec>& nodes) {
  PluginRegistry registry(std::vector<std::string>{});
  const ExperimentConfig& config = fifo_config();
  return std::make_unique<Scheduler>(compose_scheduler(config.scheduler, registry, 1), ClusterState(nodes),
                                     build_throughput_model(config.workload.model), config.scheduler.settings);
}

JobSpec job(int gpus, double work) {
  JobSpec spec;
  spec.gpus = spec.min_gpus = spec.max_gpus = gpus;
  spec.total_work = work;
  return spec;
}

}  // namespace

TEST_CASE("restored jobs keep their counters; adopted ones run on, without a new start or attempt") {
  const std::vector<NodeSpec> node{NodeSpec{"n0", "v100", 4, 32, 256, 0}};
  auto before = scheduler(node);
  before->submit(job(2, 100), 0);
  before->submit(job(2, 100), 0);
  before->submit(job(2, 100), 0);
  before->submit(job(1, 100), 0);
  RoundOutcome first = before->run_round(0);
  REQUIRE(first.started == std::vector<JobId>{0, 1});
  before->report_progress(0, 40, 10);
  before->complete(3, 10, JobStatus::failed);  // cancelled while pending: it leaves the queue
  CHECK(before->pending().empty());

  // The daemon restarts: the same jobs, in id order; nodes come back later.
  auto after = scheduler(node);
  for (const JobState* saved : before->jobs()) after->restore(*saved);
  CHECK(after->job(0).status == JobStatus::preempted);  // was running: waits until adopted
  CHECK(after->job(0).executed_work == 40);
  CHECK(after->job(0).attempts == 1);
  CHECK(after->job(2).status == JobStatus::queued);
  CHECK(after->job(3).status == JobStatus::failed);
  CHECK(after->running_count() == 0);

  // Job 0 still runs where it ran; job 1 ended while the daemon was down.
  after->adopt(0, before->job(0).allocation, 20);
  after->complete(1, 20, JobStatus::finished);
  CHECK(after->job(0).running());
  CHECK(after->job(0).attempts == 1);  // the same attempt
  CHECK(after->job(1).finish == 20);
  CHECK(after->cluster().free_gpus() == 2);

  const RoundOutcome next = after->run_round(21);
  CHECK(next.started == std::vector<JobId>{2});  // not job 0: it never stopped
  CHECK(next.preempted.empty());
  after->complete(0, 30, JobStatus::finished);
  CHECK(after->job(0).gpu_seconds == doctest::Approx(before->job(0).gpu_seconds + 2 * 10));
  CHECK_THROWS_AS(after->complete(0, 31), std::logic_error);  // already done
}

TEST_CASE("in a growing cluster a job larger than today's waits for nodes instead of being rejected") {
  auto fixed = scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  CHECK(fixed->submit(job(8, 10), 0).status == JobStatus::rejected);

  auto growing = scheduler({});
  growing->expect_growing_cluster();
  CHECK(growing->submit(job(8, 10), 0).status == JobStatus::pending);
  CHECK(growing->run_round(1).started.empty());
  growing->add_node(NodeSpec{"n0", "v100", 4, 32, 256, 0});
  CHECK(growing->run_round(2).started.empty());
  growing->add_node(NodeSpec{"n1", "v100", 4, 32, 256, 0});
  CHECK(growing->run_round(3).started == std::vector<JobId>{0});
}

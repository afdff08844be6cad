// Issue 17, memory: a million jobs must not be held twice. The scheduler's
// JobStore keeps jobs at fixed addresses in blocks that a run's end frees
// as it makes their rows; a simulation drops a block of the workload's
// specs once all its jobs have arrived. These tests pin what those must
// keep: every job, in id order, unmoved, with the spec the workload gave it.
#include <doctest/doctest.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "plugins/registry.hpp"
#include "scheduler/job_store.hpp"
#include "simulation.hpp"
#include "workloads/workload.hpp"

using namespace tessel;

namespace {

JobState numbered(JobId id) {
  JobState job;
  job.spec.id = id;
  job.spec.model = "model-with-a-name-longer-than-fifteen-" + std::to_string(id);  // on the heap
  return job;
}

}  // namespace

TEST_CASE("a JobStore keeps its jobs where they are while its blocks grow, and releases them in order") {
  // Past the first blocks (256, 512, 1024, 2048 jobs), so that several are allocated.
  constexpr std::size_t kJobs = 5000;
  JobStore store;
  std::vector<const JobState*> addresses;
  for (std::size_t id = 0; id < kJobs; ++id) addresses.push_back(&store.emplace_back(numbered(static_cast<JobId>(id))));
  CHECK(store.size() == kJobs);
  for (std::size_t id = 0; id < kJobs; ++id) {
    REQUIRE(addresses[id]->spec.id == id);
    REQUIRE(addresses[id]->spec.model == "model-with-a-name-longer-than-fifteen-" + std::to_string(id));
  }
  std::vector<JobId> taken;
  store.release([&](const JobState& job) {
    REQUIRE(&job == addresses[taken.size()]);
    taken.push_back(job.spec.id);
  });
  CHECK(taken.size() == kJobs);
  for (std::size_t i = 0; i < taken.size(); ++i) REQUIRE(taken[i] == i);
  CHECK(store.size() == 0);
}

TEST_CASE("a JobStore whose taker throws keeps the jobs not yet taken, and gives them next time") {
  JobStore store;
  for (JobId id = 0; id < 700; ++id) store.emplace_back(numbered(id));
  std::vector<JobId> taken;
  CHECK_THROWS_AS(store.release([&](const JobState& job) {
    if (job.spec.id == 400) throw std::runtime_error("full");
    taken.push_back(job.spec.id);
  }),
                  std::runtime_error);
  CHECK(taken.size() == 400);
  CHECK(store.size() == 300);
  store.release([&](const JobState& job) { taken.push_back(job.spec.id); });
  REQUIRE(taken.size() == 700);
  for (std::size_t i = 0; i < taken.size(); ++i) REQUIRE(taken[i] == i);
}

TEST_CASE("a simulation over several blocks of its workload gives every job the spec the workload made") {
  // 9,000 jobs: two whole blocks of 4,096 specs and a part of a third, each
  // dropped as its last job arrives.
  const std::string toml = R"([cluster]
nodes = 16
gpus_per_node = 8
[workload]
kind = "synthetic"
seed = 3
jobs = 9000
jobs_per_hour = 40
[scheduler]
round_seconds = 300
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
)";
  const ExperimentConfig config =
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "job_memory.toml")));
  PluginRegistry registry(std::vector<std::string>{});
  Simulation simulation(config, registry);
  REQUIRE(simulation.job_count() == 9000);
  const RunResults results = simulation.run();
  const Workload workload = build_workload(config.workload, ClusterState(config.cluster.nodes));
  REQUIRE(results.jobs.size() == workload.jobs.size());
  for (std::size_t i = 0; i < workload.jobs.size(); ++i) {
    const JobSpec& spec = workload.jobs[i];
    const JobRecord& job = results.jobs[i];
    REQUIRE(job.id == i);
    REQUIRE(job.arrival == spec.arrival);
    REQUIRE(job.gpus == spec.gpus);
    REQUIRE(job.total_work == spec.total_work);
    REQUIRE(job.model == spec.model);
    REQUIRE(job.tenant == spec.tenant);
    REQUIRE(job.status == "finished");
    REQUIRE(job.executed_work == doctest::Approx(spec.total_work));
  }
  // The run freed its jobs as it made their rows: a second run is refused,
  // not run over freed state.
  CHECK_THROWS_AS(simulation.run(), std::logic_error);
}

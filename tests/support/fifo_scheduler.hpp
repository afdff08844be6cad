// A FIFO scheduler over nodes a test gives, composed as a run composes it
// (fifo with backfill, first_fit), for tests of the core's own API: recovery,
// forks.
#pragma once

#include <memory>
#include <vector>

#include "config/experiment.hpp"
#include "models/models.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "scheduler/scheduler.hpp"

namespace tessel::test {

inline const ExperimentConfig& fifo_experiment() {
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
)", "fifo.toml")));
  return config;
}

// The plugins of fifo_experiment(), found on the default plugin path.
inline ComposedScheduler fifo_plugins() {
  PluginRegistry registry(std::vector<std::string>{});
  return compose_scheduler(fifo_experiment().scheduler, registry, 1);
}

inline std::unique_ptr<Scheduler> fifo_scheduler(const std::vector<NodeSpec>& nodes) {
  const ExperimentConfig& config = fifo_experiment();
  return std::make_unique<Scheduler>(fifo_plugins(), ClusterState(nodes), build_throughput_model(config.workload.model),
                                     config.scheduler.settings);
}

// A job of exactly `gpus` GPUs and `work` units of work.
inline JobSpec rigid_job(int gpus, double work) {
  JobSpec spec;
  spec.gpus = spec.min_gpus = spec.max_gpus = gpus;
  spec.total_work = work;
  return spec;
}

}  // namespace tessel::test

// The gavel tests' small worlds: one-GPU nodes of two types, "fast" then
// "slow", jobs named by a profile digit ("0", "1", ...) that a test's
// throughput model prices by, and an allocation plugin's plan at time 0.
#pragma once

#include <string>
#include <vector>

#include "plugins/registry.hpp"
#include "tessel/tessel.hpp"

namespace tessel::test {

inline int profile(const JobSpec& job) { return job.model[0] - '0'; }
inline int type_index(const Shape& shape) { return shape.gpu_type == "fast" ? 0 : 1; }

inline ClusterState two_type_cluster(int fast, int slow) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < fast + slow; ++i) {
    NodeSpec node;
    node.name = "n" + std::to_string(i);
    node.gpu_type = i < fast ? "fast" : "slow";
    node.gpus = 1;
    nodes.push_back(node);
  }
  return ClusterState(nodes);
}

// `plugin_name`'s plan at time 0 for every job of `jobs` (the waiting ones
// queued), with `args` (all of them).
inline AllocationPlan plan_at_zero(const std::string& plugin_name, const PluginArgs& args, const ClusterState& cluster,
                                   const std::vector<JobState*>& jobs, const ThroughputModel& model) {
  // Kept loaded for the whole run: the jobs' slots hold the plugin's records.
  static PluginRegistry registry;
  SlotRegistry slots;
  const PluginPtr<Plugin> plugin =
      PluginRegistry::create(registry.find(PluginKind::allocation, plugin_name), PluginContext(args, 1, slots));
  auto& policy = dynamic_cast<AllocationPolicy&>(*plugin);
  const SchedulerSettings settings;
  std::vector<JobState*> active = jobs, waiting;
  for (JobState* job : active)
    if (job->waiting()) waiting.push_back(job);
  const SchedulerView view(settings, cluster, model, jobs, {}, active, waiting, 0);
  return policy.allocate(view);
}

}  // namespace tessel::test

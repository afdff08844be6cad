// For allocation plugins: what a job runs on if it runs now, a denial, the
// cluster's capacity, and dense indices for tenant and VC names.
// Header-only, so each plugin library stays self-contained.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/rng.hpp"
#include "tessel/stages.hpp"

namespace tessel::allocation {

// A running job keeps what it holds (an elasticity plugin may have resized
// it); a waiting one asks for its request.
inline Resources current_or_requested(const JobState& job) {
  return job.running() ? job.held() : job.spec.request();
}

// "Not this round". The core requires the job's own GPU share even here.
inline Grant deny(const JobState& job, Reason reason) {
  Resources none;
  none.gpus = 0;
  none.gpu_milli = job.spec.gpu_milli;
  return {job.spec.id, none, std::move(reason)};
}

// What the nodes that are up offer.
struct Capacity {
  double gpus = 0;
  double cpus = 0;
  double mem_gb = 0;
};

inline Capacity capacity_of(const ClusterState& cluster) {
  Capacity total;
  total.gpus = cluster.total_gpus();
  for (const Node& node : cluster.nodes()) {
    if (!node.up) continue;
    total.cpus += node.spec.cpus;
    total.mem_gb += node.spec.mem_gb;
  }
  return total;
}

// GPUs a grant occupies, counting fractional shares as fractions.
inline double gpu_count(const Resources& resources) {
  return resources.gpus * (resources.gpu_milli / 1000.0);
}

// Dense indices for names (tenants, VCs) in order of first appearance. Each
// job's index is remembered in a slot, so a name is looked up once per job,
// not once per round.
class NameIndex {
 public:
  explicit NameIndex(const PluginContext& context) : cached_(context.job_slot<std::uint32_t>()) {}

  // The index of `name`, added if new.
  std::size_t add(std::string_view name) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    names_.emplace_back(name);
    index_.emplace(names_.back(), names_.size() - 1);
    return names_.size() - 1;
  }

  // The index of `name`, the name `job` is known by (its tenant or its VC).
  std::size_t of(const JobState& job, std::string_view name) {
    std::uint32_t& cached = cached_(job.slots);  // index + 1; 0 = not looked up yet
    if (cached == 0) cached = static_cast<std::uint32_t>(add(name)) + 1;
    return cached - 1;
  }

  const std::string& name(std::size_t index) const { return names_[index]; }
  std::size_t size() const { return names_.size(); }

 private:
  Slot<std::uint32_t> cached_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::vector<std::string> names_;
};

}  // namespace tessel::allocation

// best_fit: put a job on the node it leaves with the least room unused.
//
// Source: the BestFit baseline of Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
// (USENIX ATC'23), as its simulator implements it
// (hkust-adsl/kubernetes-scheduler-simulator: the node score in
// pkg/simulator/plugin/best_fit_score.go, the GPU choice in
// allocateGpuIdBasedOnBestFit, pkg/simulator/plugin/open_gpu_share.go).
//
// The rule as implemented:
// - Each node that can take the whole job is scored by what it keeps free
//   after it, CPU and GPU together:
//     left = w * (free CPUs - job's CPUs) / largest node's CPUs
//          + (1 - w) * (free GPU milli - job's GPU milli) / largest node's GPU milli
//   where the free GPU milli is the node's, all GPUs together, and w is
//   `cpu_weight` (0.5 in the simulator; 0 counts GPUs only). The score is
//   the integer part of 100 * (1 - left); the highest wins, equal scores go
//   to the node first in the run's random node order (kube_score.hpp).
// - On the node, the tightest GPUs: a fractional job takes the GPU with the
//   least free milli that fits, a whole-GPU job the lowest-numbered free GPUs.
// - No node can take the whole job: with `span_nodes` (default), spread it
//   over the fewest nodes (the roomiest whole, the rest on the tightest fit);
//   without, it waits, as a Kubernetes pod does.
//
// Simplifications: the simulator normalizes by constants, 128 CPUs and 8
// GPUs, the largest node of its cluster; here, the largest node of the
// cluster at hand (the same numbers on the openb cluster). Memory only
// decides whether a node fits (ClusterState::fits_on), as in the simulator,
// whose scores do not count it.
#include <cstdint>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/kube_score.hpp>

namespace {

using tessel::gpu_choice::NodeRoom;

constexpr tessel::ArgSpec kArgs[] = {
    {"cpu_weight", tessel::ArgType::number, "0.5",
     "weight of the CPUs left in a node's score; the GPUs left weigh the rest"},
    {"span_nodes", tessel::ArgType::boolean, "true", tessel::kube_score::kSpanNodesHelp},
};

class BestFit final : public tessel::PlacementPolicy {
 public:
  explicit BestFit(const tessel::PluginContext& context)
      : seed_(context.seed()), cpu_weight_(context.args().number("cpu_weight")),
        span_nodes_(context.args().boolean("span_nodes")) {
    if (!(cpu_weight_ >= 0 && cpu_weight_ <= 1)) throw tessel::ArgumentError("cpu_weight", "must be in [0, 1]");
  }

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    const tessel::kube_score::LargestNode largest(cluster);
    return tessel::kube_score::place_by_score(view, want, seed_, span_nodes_, rooms_, "best fit",
                                              "what it keeps free",
                                              [&](tessel::NodeId node) { return score(cluster, largest, node, want); });
  }

 private:
  std::int64_t score(const tessel::ClusterState& cluster, const tessel::kube_score::LargestNode& largest,
                     tessel::NodeId id, const tessel::Resources& want) const {
    const double cpus_left = cluster.node(id).free_cpus - want.cpus;
    const double milli_left =
        tessel::kube_score::free_milli(cluster, id) - static_cast<double>(want.gpus) * want.gpu_milli;
    double left = 0;
    if (largest.cpus > 0) left += cpu_weight_ * cpus_left / largest.cpus;
    if (largest.gpu_milli > 0) left += (1 - cpu_weight_) * milli_left / largest.gpu_milli;
    return static_cast<std::int64_t>((1 - left) * 100);  // truncated, as Go's int64() does
  }

  std::uint64_t seed_;
  double cpu_weight_;
  bool span_nodes_;
  std::vector<NodeRoom> rooms_;  // reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(BestFit, placement, "best_fit", "2.0",
                        "FGD's BestFit: the node that keeps the least CPU and GPU free after the job (integer "
                        "scores, ties in the run's node order); the tightest GPUs on it",
                        kArgs)

// dot_product: the node whose free resources align least with the job's
// request, the Tetris-style packing baseline.
//
// Source: the DotProd baseline of Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
// (USENIX ATC'23), after Tetris (SIGCOMM'14), as its simulator implements
// it (hkust-adsl/kubernetes-scheduler-simulator,
// pkg/simulator/plugin/dot_product_score.go with utils.
// GenerateSchedulingMatchGroups; generate_run_scripts.py runs it with
// dimension method "merge", normalization "max" and the best-fit GPU choice).
//
// The rule as implemented: each node that can take the whole job is scored
// from two vectors normalized by the largest node (128 CPUs and 8 GPUs in the
// simulator): the node's free [CPUs, GPU milli of all its GPUs] and the job's
// request [CPUs, GPUs x milli]. Their dot product d, halved, is subtracted
// from 1; the score is the integer part of 100 * (1 - d / 2). The highest
// wins (the least aligned: packing the node the job fills most), equal
// scores go to the node first in the run's random node order
// (kube_score.hpp). On the node, the tightest GPUs
// (a fractional job the GPU with the least free milli that fits, a whole-GPU
// job the lowest-numbered idle GPUs). `span_nodes` decides what happens to a
// job no node can take whole.
//
// Simplifications: none in the rule. Kubernetes prices a pod that requests
// no CPU at 0.1 CPU in the scores (GetNonzeroRequests); here a job's CPUs
// count as declared (every GPU pod of the openb trace declares some).
#include <cstdint>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/kube_score.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"span_nodes", tessel::ArgType::boolean, "true", tessel::kube_score::kSpanNodesHelp},
};

class DotProduct final : public tessel::PlacementPolicy {
 public:
  explicit DotProduct(const tessel::PluginContext& context)
      : seed_(context.seed()), span_nodes_(context.args().boolean("span_nodes")) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    const tessel::kube_score::LargestNode largest(cluster);
    return tessel::kube_score::place_by_score(
        view, want, seed_, span_nodes_, rooms_, "dot product", "1 - half the dot product of free and asked",
        [&](tessel::NodeId node) { return score(cluster, largest, node, want); });
  }

 private:
  static std::int64_t score(const tessel::ClusterState& cluster, const tessel::kube_score::LargestNode& largest,
                            tessel::NodeId id, const tessel::Resources& want) {
    double dot = 0;
    if (largest.cpus > 0) dot += (cluster.node(id).free_cpus / largest.cpus) * (want.cpus / largest.cpus);
    if (largest.gpu_milli > 0)
      dot += (tessel::kube_score::free_milli(cluster, id) / largest.gpu_milli) *
             (static_cast<double>(want.gpus) * want.gpu_milli / largest.gpu_milli);
    return static_cast<std::int64_t>(100 * (1 - dot / 2));  // truncated, as Go's int64() does
  }

  std::uint64_t seed_;
  bool span_nodes_;
  std::vector<tessel::gpu_choice::NodeRoom> rooms_;  // reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(DotProduct, placement, "dot_product", "1.0",
                        "FGD's DotProd (Tetris): the node whose free CPU and GPU align least with the request "
                        "(integer scores, ties in the run's node order); the tightest GPUs on it",
                        kArgs)

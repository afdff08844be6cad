// gpu_packing: fill GPUs already in use, then nodes already in use, and open
// an idle node last.
//
// Source: the GpuPacking baseline of Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
// (USENIX ATC'23), as its simulator implements it
// (hkust-adsl/kubernetes-scheduler-simulator,
// pkg/simulator/plugin/gpu_packing_score.go; GPU choice best-fit, as
// generate_run_scripts.py configures it).
//
// The rule as implemented. Each node that can take the whole job gets an
// integer score; the highest wins, equal scores go to the node first in
// the run's random node order (kube_score.hpp):
// - every GPU of the node idle: 33 - its GPUs (at least its GPUs: the
//   simulator's cap), so smaller idle nodes first;
// - otherwise, take the job's GPUs among those with room, least free milli
//   first. If that uses k idle GPUs: 50 - k (at least 33). If it uses only
//   GPUs already shared: 100 - (sum over them of their free milli * 100 /
//   1000, each rounded down) / 10 (at least 50), so the tightest shared GPU
//   scores highest, in steps of 100 milli.
// On the node, the tightest GPUs (a fractional job the GPU with the least
// free milli that fits, a whole-GPU job the lowest-numbered idle GPUs).
// `span_nodes` decides what happens to a job no node can take whole.
//
// A job of share 0 (a CPU-only pod) scores 0 everywhere, as in the
// simulator, so it goes to the first node that fits in the run's node order.
//
// Simplifications: none in the rule.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/kube_score.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"span_nodes", tessel::ArgType::boolean, "true", tessel::kube_score::kSpanNodesHelp},
};

class GpuPacking final : public tessel::PlacementPolicy {
 public:
  explicit GpuPacking(const tessel::PluginContext& context)
      : seed_(context.seed()), span_nodes_(context.args().boolean("span_nodes")) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    return tessel::kube_score::place_by_score(view, want, seed_, span_nodes_, rooms_, "gpu packing",
                                              "shared GPUs, then used nodes, then idle nodes",
                                              [&](tessel::NodeId node) { return score(cluster, node, want); });
  }

 private:
  std::int64_t score(const tessel::ClusterState& cluster, tessel::NodeId id, const tessel::Resources& want) {
    if (want.gpu_milli == 0) return 0;
    const auto gpus = cluster.gpus_of(id);
    const auto idle = static_cast<std::int64_t>(std::count_if(gpus.begin(), gpus.end(),
                                                              [](const tessel::Gpu& gpu) { return gpu.free(); }));
    if (idle == static_cast<std::int64_t>(gpus.size())) return std::max<std::int64_t>(100 / 3 - idle, idle);

    free_.clear();
    for (const tessel::Gpu& gpu : gpus) free_.push_back(gpu.free_milli());
    std::sort(free_.begin(), free_.end());
    int needed = want.gpus;
    std::int64_t idle_used = 0, free_percent = 0;
    for (int milli : free_) {
      if (needed == 0) break;
      if (milli < want.gpu_milli) continue;
      --needed;
      if (milli == 1000) ++idle_used;
      free_percent += milli * 100 / 1000;
    }
    if (idle_used > 0) return std::max<std::int64_t>(100 / 2 - idle_used, 100 / 3);
    return std::max<std::int64_t>(100 - free_percent / 10, 100 / 2);
  }

  std::uint64_t seed_;
  bool span_nodes_;
  std::vector<tessel::gpu_choice::NodeRoom> rooms_;  // reused across calls
  std::vector<int> free_;                            // reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(GpuPacking, placement, "gpu_packing", "1.0",
                        "FGD's GpuPacking: shared GPUs first, then GPUs of used nodes, idle nodes last (integer "
                        "scores, ties in the run's node order)",
                        kArgs)

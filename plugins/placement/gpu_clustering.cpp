// gpu_clustering: put a job with jobs of its own kind.
//
// Source: the GpuClustering baseline of Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent" (USENIX ATC'23), as its simulator implements it
// (hkust-adsl/kubernetes-scheduler-simulator,
// pkg/simulator/plugin/gpu_clustering_score.go; the kinds are
// GetGpuAffinityFromPodAnnotation in pkg/type/open-gpu-share/utils/pod.go;
// GPU choice best-fit, as generate_run_scripts.py configures it).
//
// A job's kind: "shared" for a fractional job, "k GPUs" for a job of k whole
// GPUs. A node's kinds: those of the jobs on its GPUs. The rule as
// implemented: each node that can take the whole job gets an integer score,
// a band by kinds plus a quarter of the band for how full the node is:
//   only jobs of the job's kind on it        75 + q
//   jobs of its kind and of others           50 + q
//   no job on it                             25 + q
//   only jobs of other kinds                  0 + q
// with q = 25 * (G - free milli of the node) / G rounded down, G the GPU
// milli of the largest node (8,000 in the simulator). The highest wins,
// equal scores go to the node first in the run's random node order (kube_score.hpp). On the node, the
// tightest GPUs (a fractional job the GPU with the least free milli that
// fits, a whole-GPU job the lowest-numbered idle GPUs). `span_nodes` decides
// what happens to a job no node can take whole.
//
// A job of share 0 (a CPU-only pod) has no kind: it scores 0 everywhere, as
// in the simulator (the first node that fits in the run's node order), and does not
// count among a node's kinds.
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

// 0 for a fractional job, else its GPU count; kNoKind for a job of share 0.
constexpr int kNoKind = -1;
int kind_of(int gpus, int gpu_milli) { return gpu_milli == 0 ? kNoKind : gpu_milli < 1000 ? 0 : gpus; }

class GpuClustering final : public tessel::PlacementPolicy {
 public:
  explicit GpuClustering(const tessel::PluginContext& context)
      : seed_(context.seed()), span_nodes_(context.args().boolean("span_nodes")) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    const tessel::kube_score::LargestNode largest(cluster);
    const int kind = kind_of(want.gpus, want.gpu_milli);
    return tessel::kube_score::place_by_score(
        view, want, seed_, span_nodes_, rooms_, "gpu clustering", "jobs of its kind there, and how full",
        [&](tessel::NodeId node) { return score(view, largest, node, kind); });
  }

 private:
  std::int64_t score(const tessel::SchedulerView& view, const tessel::kube_score::LargestNode& largest,
                     tessel::NodeId id, int kind) {
    if (kind == kNoKind) return 0;
    kinds_.clear();
    for (const tessel::Gpu& gpu : view.cluster().gpus_of(id))
      for (tessel::JobId tenant : gpu.jobs) {
        // By the GPUs it holds (an elastic job may have resized), or asked for
        // while the scheduler only tries it there.
        const tessel::JobState& other_job = view.job(tenant);
        const int gpus = other_job.allocation.empty() ? other_job.spec.gpus : other_job.allocation.gpu_count();
        const int other = kind_of(gpus, other_job.spec.gpu_milli);
        if (other != kNoKind && std::find(kinds_.begin(), kinds_.end(), other) == kinds_.end()) kinds_.push_back(other);
      }
    const auto capacity = static_cast<std::int64_t>(largest.gpu_milli);
    const std::int64_t fullness =
        capacity > 0 ? 25 * (capacity - tessel::kube_score::free_milli(view.cluster(), id)) / capacity : 0;
    const bool same_kind = std::find(kinds_.begin(), kinds_.end(), kind) != kinds_.end();
    if (same_kind) return (kinds_.size() == 1 ? 75 : 50) + fullness;
    return (kinds_.empty() ? 25 : 0) + fullness;
  }

  std::uint64_t seed_;
  bool span_nodes_;
  std::vector<tessel::gpu_choice::NodeRoom> rooms_;  // reused across calls
  std::vector<int> kinds_;                           // reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(GpuClustering, placement, "gpu_clustering", "1.0",
                        "FGD's GpuClustering: nodes holding only jobs of the job's kind (shared, or k whole GPUs) "
                        "first, fuller nodes first within a band (integer scores, ties in the run's node order)",
                        kArgs)

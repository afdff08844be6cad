// best_fit: put a job where it leaves the least room unused.
//
// Source: best-fit bin packing, in the form the BestFit baseline of Weng et
// al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
// Fragmentation Gradient Descent" (USENIX ATC'23) uses for GPU sharing
// (hkust-adsl/kubernetes-scheduler-simulator: the node choice in
// pkg/simulator/plugin/best_fit_score.go, the GPU choice in
// allocateGpuIdBasedOnBestFit, pkg/simulator/plugin/open_gpu_share.go).
//
// The rule as implemented:
// - Whole GPUs: among the nodes that can take all of the job's GPUs, the one
//   that keeps the fewest free GPUs afterwards; the lowest node id among
//   equals. On it, the lowest-numbered free GPUs.
// - Fractional GPUs (gpu_milli < 1000): the node whose chosen GPUs keep the
//   least milli free after the job's share, where a node's chosen GPUs are
//   its tightest ones (least free milli that still fits). For a one-GPU job
//   that is the GPU with the least free milli that fits, cluster-wide.
// - No node can take the whole job: spread it over the fewest nodes (the
//   roomiest ones whole, the rest on the tightest-fitting remaining node).
//
// Simplifications: the simulator's BestFit scores a node by the leftover of
// CPU and GPU together (half weight each, normalized by the largest node);
// here only GPUs count, and CPU and memory only decide whether a node fits
// (ClusterState::fits_on). Ties go to the lowest node id, not to a random
// one as in the Kubernetes scheduler.
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include "gpu_choice.hpp"

namespace {

using tessel::gpu_choice::NodeRoom;

class BestFit final : public tessel::PlacementPolicy {
 public:
  explicit BestFit(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    const bool fractional = want.gpu_milli < 1000;
    const int total = tessel::gpu_choice::rooms_for(cluster, want, rooms_);
    if (total < want.gpus) {
      choice.reason = fractional ? tessel::Reason("needs {} GPUs with {} milli free, {} usable in the cluster",
                                                  want.gpus, want.gpu_milli, total)
                                 : tessel::Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
      return choice;
    }

    // The node that keeps the least free after taking the whole job.
    const NodeRoom* best = nullptr;
    int best_left = 0;
    for (const NodeRoom& room : rooms_) {
      if (room.gpus < want.gpus) continue;
      const int left = fractional ? milli_left(cluster, room.node, want)
                                  : cluster.node(room.node).free_gpus - want.gpus;
      if (best == nullptr || left < best_left) {
        best = &room;
        best_left = left;
      }
    }
    if (best != nullptr) {
      tessel::gpu_choice::take_tightest(cluster, best->node, want, want.gpus, choice.gpus);
      const std::string& node = cluster.node(best->node).spec.name;
      if (!fractional)
        choice.reason = tessel::Reason::text("best fit: node " + node + " keeps " + std::to_string(best_left) +
                                             (best_left == 1 ? " GPU free" : " GPUs free"));
      else if (want.gpus == 1)
        choice.reason = tessel::Reason::text("best fit: GPU " + std::to_string(gpu_index(cluster, choice.gpus[0])) +
                                             " of node " + node + " keeps " + std::to_string(best_left) +
                                             " milli free");
      else
        choice.reason = tessel::Reason::text("best fit: node " + node + ", whose chosen GPUs keep " +
                                             std::to_string(best_left) + " milli free");
      return choice;
    }

    const int nodes = tessel::gpu_choice::spread_over_fewest_nodes(cluster, want, rooms_, choice.gpus);
    choice.reason = tessel::Reason("no node can take all {} GPUs: spread over {} nodes, the fewest possible",
                                   want.gpus, nodes);
    return choice;
  }

 private:
  // Milli that the job's tightest GPUs on the node keep free after its share.
  int milli_left(const tessel::ClusterState& cluster, tessel::NodeId node, const tessel::Resources& want) {
    if (want.gpus == 1) {  // the common case, without sorting
      const int gpu = tessel::gpu_choice::tightest_gpu(cluster, node, want.gpu_milli);
      return cluster.gpus_of(node)[gpu].free_milli() - want.gpu_milli;
    }
    tessel::gpu_choice::tightest_gpus(cluster, node, want, gpus_);
    int left = 0;
    for (int i = 0; i < want.gpus; ++i) left += gpus_[i].free_milli - want.gpu_milli;
    return left;
  }

  static int gpu_index(const tessel::ClusterState& cluster, tessel::GpuId gpu) {
    return static_cast<int>(gpu - cluster.node(cluster.gpu(gpu).node).first_gpu);
  }

  std::vector<NodeRoom> rooms_;                     // reused across calls
  std::vector<tessel::gpu_choice::GpuRoom> gpus_;  // reused across calls
};

}  // namespace

TESSEL_PLUGIN(BestFit, placement, "best_fit", "1.0",
              "the node (and, for fractional jobs, the GPU) left with the least free room after placing")

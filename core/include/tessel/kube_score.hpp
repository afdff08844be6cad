// Node choice as the Kubernetes scheduler makes it, for the placement plugins
// that follow a score plugin of FGD's simulator (hkust-adsl/kubernetes-
// scheduler-simulator, pkg/simulator/plugin/*_score.go): each node that can
// take the whole job gets an integer score in 0..100 and the highest wins.
// Equal scores go to the node that comes first in a random order of the
// nodes, the same order for every job of a run: the simulator's Kubernetes
// (github.com/mental2008/kubernetes v1.20.5-minor, vendored) changes
// selectHost in generic_scheduler.go to take "the smallest lexicographical
// order if the score remains the same", and the simulator names its nodes
// after a random permutation ("%04d-" + name, rand.Perm in
// syncClusterResourceList, pkg/simulator/simulator.go). The integer scores
// and this order are part of the rule: nodes whose fits differ by less than
// a score step are equal, and equal nodes fill one after another, as in
// first fit, rather than spreading. (Stock Kubernetes draws among them at
// random; that spreads CPU-only pods over every node and costs GpuPacking
// and GpuClustering about 3 points of GPU allocation on the openb trace.)
//
// The order is a hash of the plugin's seed and the node id, so it needs no
// state and the same question gets the same answer (stages.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tessel/gpu_choice.hpp"
#include "tessel/rng.hpp"
#include "tessel/stages.hpp"

namespace tessel::kube_score {

// The highest integer score among the nodes offered; among equal scores, the
// node that comes first in a random order of the nodes drawn once per run.
class HighestScore {
 public:
  explicit HighestScore(std::uint64_t plugin_seed) : seed_(plugin_seed) {}

  void offer(NodeId node, std::int64_t score) {
    const std::uint64_t rank = derive_seed(seed_, node);  // the node's place in the run's random order
    if (tied_ == 0 || score > best_) {
      best_ = score;
      node_ = node;
      rank_ = rank;
      tied_ = 1;
    } else if (score == best_) {
      ++tied_;
      if (rank < rank_) {
        node_ = node;
        rank_ = rank;
      }
    }
  }

  bool found() const { return tied_ > 0; }
  NodeId node() const { return node_; }
  std::int64_t score() const { return best_; }
  std::uint64_t tied() const { return tied_; }  // nodes that had the best score

 private:
  std::uint64_t seed_;
  std::int64_t best_ = 0;
  NodeId node_ = 0;
  std::uint64_t rank_ = 0;
  std::uint64_t tied_ = 0;
};

// The simulator normalizes CPU and GPU amounts by the largest node of its
// cluster (MaxSpecCpu = 128 CPUs, MaxSpecGpu = 8 GPUs: the openb cluster's
// largest); here, the largest node of the cluster at hand.
struct LargestNode {
  double cpus = 0;
  double gpu_milli = 0;

  explicit LargestNode(const ClusterState& cluster) {
    for (const Node& node : cluster.nodes()) {
      cpus = std::max(cpus, node.spec.cpus);
      gpu_milli = std::max(gpu_milli, 1000.0 * node.spec.gpus);
    }
  }
};

// "best fit: node n3 scores 87 of 100 (what it keeps free), the highest,
// first of 4 equal in the run's node order".
inline Reason reason(const char* rule, const ClusterState& cluster, const HighestScore& best, const char* scored) {
  std::string text = std::string(rule) + ": node " + cluster.node(best.node()).spec.name + " scores " +
                     std::to_string(best.score()) + " of 100 (" + scored + "), the highest";
  if (best.tied() > 1) text += ", first of " + std::to_string(best.tied()) + " equal in the run's node order";
  return Reason::text(std::move(text));
}

// Free milli of all the node's GPUs together.
inline int free_milli(const ClusterState& cluster, NodeId id) {
  int total = 0;
  for (const Gpu& gpu : cluster.gpus_of(id)) total += gpu.free_milli();
  return total;
}

// The whole placement of a score plugin: the nodes that can take the whole
// job, each scored by `score(node)`, the highest (ties in the run's node
// order), and the tightest GPUs there (gpu_choice::take_tightest: the simulator's best-fit GPU
// choice, allocateGpuIdBasedOnBestFit, which all its baselines but Random and
// FGD use). A job no node can take whole is spread over the fewest nodes with
// `span_nodes`, and waits without, as a Kubernetes pod does.
template <class Score>
PlacementChoice place_by_score(const SchedulerView& view, const Resources& want, std::uint64_t seed, bool span_nodes,
                               std::vector<gpu_choice::NodeRoom>& rooms,
                               const char* rule, const char* scored, Score&& score) {
  const ClusterState& cluster = view.cluster();
  PlacementChoice choice;
  const int total = gpu_choice::rooms_for(cluster, want, rooms);
  if (total < want.gpus) {
    choice.reason = gpu_choice::too_few_gpus(want, total);
    return choice;
  }
  HighestScore best(seed);
  for (const gpu_choice::NodeRoom& room : rooms)
    if (room.gpus >= want.gpus) best.offer(room.node, score(room.node));
  if (best.found()) {
    gpu_choice::take_tightest(cluster, best.node(), want, want.gpus, choice.gpus);
    choice.reason = reason(rule, cluster, best, scored);
    return choice;
  }
  return gpu_choice::across_nodes(cluster, want, rooms, span_nodes);
}

// The argument every score plugin takes for jobs no node can take whole.
inline constexpr const char* kSpanNodesHelp =
    "spread a job no single node can take over the fewest nodes (false: it waits, as a Kubernetes pod does)";

}  // namespace tessel::kube_score

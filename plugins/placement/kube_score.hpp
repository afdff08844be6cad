// Node choice as the Kubernetes scheduler makes it, for the placement plugins
// that follow a score plugin of FGD's simulator (hkust-adsl/kubernetes-
// scheduler-simulator, pkg/simulator/plugin/*_score.go): each node that can
// take the whole job gets an integer score in 0..100, the highest wins, and
// equal scores are broken uniformly at random (selectHost in
// kube-scheduler's generic_scheduler.go: reservoir sampling over the nodes
// in order). The integer scores are part of the rule: they make nodes whose
// fits differ by less than a score step equal, and the draw among them
// spreads jobs where a deterministic tie-break would pack them.
//
// The draw is seeded with the plugin's seed, the job's id and the time, never
// from a generator that advances between calls, so the same question gets
// the same answer (the placement contract, stages.hpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include "gpu_choice.hpp"

namespace tessel::kube_score {

// The highest integer score among the nodes offered, ties drawn at random.
class HighestScore {
 public:
  HighestScore(std::uint64_t plugin_seed, const JobState& job, double now)
      : rng_(derive_seed(derive_seed(plugin_seed, job.spec.id), std::bit_cast<std::uint64_t>(now))) {}

  void offer(NodeId node, std::int64_t score) {
    if (tied_ == 0 || score > best_) {
      best_ = score;
      node_ = node;
      tied_ = 1;
    } else if (score == best_) {
      ++tied_;
      if (rng_.below(tied_) == 0) node_ = node;
    }
  }

  bool found() const { return tied_ > 0; }
  NodeId node() const { return node_; }
  std::int64_t score() const { return best_; }
  std::uint64_t tied() const { return tied_; }  // nodes that had the best score

 private:
  Rng rng_;
  std::int64_t best_ = 0;
  NodeId node_ = 0;
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

// "best fit: node n3 scores 87 of 100 (what it keeps free), drawn among 4 equal".
inline Reason reason(const char* rule, const ClusterState& cluster, const HighestScore& best, const char* scored) {
  std::string text = std::string(rule) + ": node " + cluster.node(best.node()).spec.name + " scores " +
                     std::to_string(best.score()) + " of 100 (" + scored + "), the highest";
  if (best.tied() > 1) text += ", drawn among " + std::to_string(best.tied()) + " equal";
  return Reason::text(std::move(text));
}

// Free milli of all the node's GPUs together.
inline int free_milli(const ClusterState& cluster, NodeId id) {
  int total = 0;
  for (const Gpu& gpu : cluster.gpus_of(id)) total += gpu.free_milli();
  return total;
}

// The whole placement of a score plugin: the nodes that can take the whole
// job, each scored by `score(node)`, the highest (ties at random), and the
// tightest GPUs there (gpu_choice::take_tightest: the simulator's best-fit GPU
// choice, allocateGpuIdBasedOnBestFit, which all its baselines but Random and
// FGD use). A job no node can take whole is spread over the fewest nodes with
// `span_nodes`, and waits without, as a Kubernetes pod does.
template <class Score>
PlacementChoice place_by_score(const SchedulerView& view, const JobState& job, const Resources& want,
                               std::uint64_t seed, bool span_nodes, std::vector<gpu_choice::NodeRoom>& rooms,
                               const char* rule, const char* scored, Score&& score) {
  const ClusterState& cluster = view.cluster();
  PlacementChoice choice;
  const int total = gpu_choice::rooms_for(cluster, want, rooms);
  if (total < want.gpus) {
    choice.reason = want.gpu_milli < 1000 ? Reason("needs {} GPUs with {} milli free, {} usable in the cluster",
                                                   want.gpus, want.gpu_milli, total)
                                          : Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
    return choice;
  }
  HighestScore best(seed, job, view.now());
  for (const gpu_choice::NodeRoom& room : rooms)
    if (room.gpus >= want.gpus) best.offer(room.node, score(room.node));
  if (best.found()) {
    gpu_choice::take_tightest(cluster, best.node(), want, want.gpus, choice.gpus);
    choice.reason = reason(rule, cluster, best, scored);
    return choice;
  }
  if (!span_nodes) {
    choice.reason = Reason("no node can take all {} GPUs, and the job may not span nodes", want.gpus);
    return choice;
  }
  const int nodes = gpu_choice::spread_over_fewest_nodes(cluster, want, rooms, choice.gpus);
  choice.reason = Reason("no node can take all {} GPUs: spread over {} nodes, the fewest possible", want.gpus, nodes);
  return choice;
}

// The argument every score plugin takes for jobs no node can take whole.
inline constexpr const char* kSpanNodesHelp =
    "spread a job no single node can take over the fewest nodes (false: it waits, as a Kubernetes pod does)";

}  // namespace tessel::kube_score

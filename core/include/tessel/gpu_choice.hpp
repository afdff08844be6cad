// For placement plugins: which nodes can take a job now, the tightest GPUs
// of a node, and spreading a job over the fewest nodes when no single node
// can take it.
//
// Everything here reads the cluster and writes only its output arguments, so
// the plugins built on it stay pure functions of the view, as the placement
// contract asks (stages.hpp).
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "tessel/rng.hpp"
#include "tessel/stages.hpp"

namespace tessel::gpu_choice {

// A node that can take `gpus` of the job's GPUs now.
struct NodeRoom {
  NodeId node = 0;
  int gpus = 0;
};

// Every node that can take at least one of the job's GPUs, in id order.
// Returns how many GPUs they can take together.
inline int rooms_for(const ClusterState& cluster, const Resources& want, std::vector<NodeRoom>& rooms) {
  rooms.clear();
  int total = 0;
  for (const Node& node : cluster.nodes()) {
    const int gpus = cluster.fits_on(node.id, want);
    if (gpus == 0) continue;
    rooms.push_back({node.id, gpus});
    total += gpus;
  }
  return total;
}

// Why a job waits when rooms_for() found fewer than want.gpus GPUs for it.
inline Reason too_few_gpus(const Resources& want, int total) {
  return want.gpu_milli < 1000
             ? Reason("needs {} GPUs with {} milli free, {} usable in the cluster", want.gpus, want.gpu_milli, total)
             : Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
}

// What take_in_node_order() took: GPUs and the nodes they are on.
struct InNodeOrder {
  int gpus = 0;
  int nodes = 0;
};

// The first GPUs in node order, each node giving as many as it has room for
// with their share of CPUs and memory, until the job has want.gpus (the
// `first_fit` plugin's rule, and Synergy's placement without +place). When
// fewer fit, `out` is left as it was and `gpus` says how many did.
inline InNodeOrder take_in_node_order(const ClusterState& cluster, const Resources& want, std::vector<GpuId>& out) {
  const std::size_t before = out.size();
  InNodeOrder taken;
  for (const Node& node : cluster.nodes()) {
    const int here = std::min(want.gpus - taken.gpus, cluster.fits_on(node.id, want));
    if (here == 0) continue;
    cluster.take(node.id, want, here, out);
    taken.gpus += here;
    ++taken.nodes;
    if (taken.gpus == want.gpus) return taken;
  }
  out.resize(before);
  return taken;
}

// A GPU of a node that can take the job's share, with what it has free.
struct GpuRoom {
  GpuId gpu = 0;
  int free_milli = 0;
};

// The GPUs of node `id` that can take `want.gpu_milli`, tightest first (least
// free milli), lowest id among equals. For whole GPUs that is the node's free
// GPUs in id order.
inline void tightest_gpus(const ClusterState& cluster, NodeId id, const Resources& want,
                          std::vector<GpuRoom>& out) {
  out.clear();
  const Node& node = cluster.node(id);
  const std::span<const Gpu> gpus = cluster.gpus_of(id);
  for (std::size_t i = 0; i < gpus.size(); ++i)
    if (gpus[i].free_milli() >= want.gpu_milli)
      out.push_back({node.first_gpu + static_cast<GpuId>(i), gpus[i].free_milli()});
  std::stable_sort(out.begin(), out.end(),
                   [](const GpuRoom& a, const GpuRoom& b) { return a.free_milli < b.free_milli; });
}

// The GPU of node `id` with the least free milli that still takes
// `gpu_milli`, the lowest-numbered among equals; -1 if none can.
inline int tightest_gpu(const ClusterState& cluster, NodeId id, int gpu_milli) {
  const std::span<const Gpu> gpus = cluster.gpus_of(id);
  int tightest = -1;
  for (std::size_t i = 0; i < gpus.size(); ++i)
    if (gpus[i].free_milli() >= gpu_milli && (tightest < 0 || gpus[i].free_milli() < gpus[tightest].free_milli()))
      tightest = static_cast<int>(i);
  return tightest;
}

// Appends `count` GPUs of node `id` for the job, tightest first, so that a
// fractional share fills a partly used GPU before it opens a free one.
// Returns the milli the chosen GPUs keep free after the job's share.
inline int take_tightest(const ClusterState& cluster, NodeId id, const Resources& want, int count,
                         std::vector<GpuId>& out) {
  if (want.gpu_milli == 1000) {  // only free GPUs qualify, all alike
    cluster.take(id, want, count, out);
    return 0;
  }
  if (count == 1) {  // the usual fractional job, without sorting
    const int gpu = tightest_gpu(cluster, id, want.gpu_milli);
    if (gpu < 0) return 0;
    out.push_back(cluster.node(id).first_gpu + static_cast<GpuId>(gpu));
    return cluster.gpus_of(id)[gpu].free_milli() - want.gpu_milli;
  }
  std::vector<GpuRoom> rooms;
  tightest_gpus(cluster, id, want, rooms);
  int left = 0;
  for (int i = 0; i < count && i < static_cast<int>(rooms.size()); ++i) {
    out.push_back(rooms[i].gpu);
    left += rooms[i].free_milli - want.gpu_milli;
  }
  return left;
}

// The order split_over_fewest_nodes needs: roomiest first, lower node id among equals.
inline void sort_roomiest_first(std::span<NodeRoom> rooms) {
  std::sort(rooms.begin(), rooms.end(), [](const NodeRoom& a, const NodeRoom& b) {
    return a.gpus != b.gpus ? a.gpus > b.gpus : a.node < b.node;
  });
}

// Splits `gpus` over as few of `rooms` as possible: the roomiest nodes whole
// while even the roomiest is too small for what remains, then the rest on the
// remaining node that fits it most tightly (the first of equals). `rooms`
// must be sorted roomiest first, lower node id among equals, and hold at
// least `gpus` together. Calls take(room, count) for each node used, in that
// order; returns the number of nodes used. For placements
// (spread_over_fewest_nodes, consolidated) and for pricing the shape a job
// would get (themis's bids on the offered GPUs).
template <class Take>
int split_over_fewest_nodes(std::span<const NodeRoom> rooms, int gpus, Take&& take) {
  std::size_t next = 0;
  while (gpus > rooms[next].gpus) {
    take(rooms[next], rooms[next].gpus);
    gpus -= rooms[next].gpus;
    ++next;
  }
  std::size_t last = next;  // rooms are sorted roomiest first: the tightest fit is the last that fits
  for (std::size_t i = next + 1; i < rooms.size() && rooms[i].gpus >= gpus; ++i)
    if (rooms[i].gpus < rooms[last].gpus) last = i;
  take(rooms[last], gpus);
  return static_cast<int>(next) + 1;
}

// Places the job on as few of `rooms` as possible (split_over_fewest_nodes).
// Needs the rooms to hold at least want.gpus GPUs together; reorders `rooms`.
// Returns the number of nodes used.
inline int spread_over_fewest_nodes(const ClusterState& cluster, const Resources& want,
                                    std::vector<NodeRoom>& rooms, std::vector<GpuId>& out) {
  sort_roomiest_first(rooms);
  return split_over_fewest_nodes(rooms, want.gpus, [&](const NodeRoom& room, int count) {
    take_tightest(cluster, room.node, want, count, out);
  });
}

// For a job no single node can take whole (and `rooms` can hold): with
// `span_nodes`, its GPUs over the fewest nodes; without, it waits, as a
// Kubernetes pod does. Reorders `rooms`.
inline PlacementChoice across_nodes(const ClusterState& cluster, const Resources& want,
                                    std::vector<NodeRoom>& rooms, bool span_nodes) {
  PlacementChoice choice;
  if (!span_nodes) {
    choice.reason = Reason("no node can take all {} GPUs, and the job may not span nodes", want.gpus);
    return choice;
  }
  const int nodes = spread_over_fewest_nodes(cluster, want, rooms, choice.gpus);
  choice.reason = Reason("no node can take all {} GPUs: spread over {} nodes, the fewest possible", want.gpus, nodes);
  return choice;
}

// The fewest nodes `rooms` can hold the job on (0 if they cannot hold it).
// Reorders `rooms`.
inline int fewest_nodes(std::span<NodeRoom> rooms, int gpus) {
  std::sort(rooms.begin(), rooms.end(), [](const NodeRoom& a, const NodeRoom& b) { return a.gpus > b.gpus; });
  int nodes = 0;
  for (const NodeRoom& room : rooms) {
    if (gpus <= 0) break;
    gpus -= room.gpus;
    ++nodes;
  }
  return gpus <= 0 ? nodes : 0;
}

// The fewest nodes a job of `gpus` GPUs can ever need on this cluster: its
// GPUs over the largest node that could hold them.
inline int fewest_nodes_possible(const ClusterState& cluster, const Resources& want) {
  int largest = 0;
  for (const Node& node : cluster.nodes())
    if (want.gpu_type == kAnyGpuType || want.gpu_type == node.type) largest = std::max(largest, node.spec.gpus);
  return largest == 0 ? 0 : (want.gpus + largest - 1) / largest;
}

}  // namespace tessel::gpu_choice

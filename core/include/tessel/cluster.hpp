// The cluster data model: nodes, their GPUs, and who holds each GPU.
//
// ClusterState answers the questions placement asks on every call (free GPUs
// per node, largest free block) in O(1) or O(GPUs per node). Only the core
// mutates it; plugins receive `const ClusterState&` through the view.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/ids.hpp"
#include "tessel/job.hpp"
#include "tessel/slots.hpp"

namespace tessel {

struct NodeSpec {
  std::string name;
  std::string gpu_type = "v100";
  int gpus = 4;
  double cpus = 32;
  double mem_gb = 256;
  int rack = 0;  // rack or switch; jobs spanning racks may run slower
  double gpu_mem_gb = 32;  // memory of each GPU
};

struct Node {
  NodeId id = 0;
  NodeSpec spec;
  int type = 0;  // index of spec.gpu_type in ClusterState::gpu_types()
  bool up = true;
  GpuId first_gpu = 0;  // this node's GPUs are [first_gpu, first_gpu + spec.gpus)
  int free_gpus = 0;    // whole GPUs with no tenant
  double free_cpus = 0;
  double free_mem_gb = 0;
  SlotStorage slots;  // plugin-owned, see slots.hpp
};

struct Gpu {
  NodeId node = 0;
  int used_milli = 0;       // sum of the tenants' shares, at most 1000
  std::vector<JobId> jobs;  // tenants; more than one for fractional shares or space sharing
  // Whole-GPU jobs beyond the first that space-share this GPU (a policy
  // granted them its GPUs, Grant::share_with); they take none of used_milli.
  int sharers = 0;

  bool free() const { return used_milli == 0; }
  int free_milli() const { return 1000 - used_milli; }
};

// The shape of an allocation, which is what throughput models price.
struct Shape {
  int gpus = 0;
  std::string gpu_type;  // of the first GPU; placements should not mix types
  int nodes = 1;
  int racks = 1;
  int gpu_milli = 1000;
  double cpus = 0;
  double mem_gb = 0;
  double gpu_mem_gb = 0;  // of the first GPU
  JobLayout layout;
  // GPUs on each node, in the order the allocation first names the node
  // (its placement); packed_shape's are full nodes then the rest. Models
  // that price the exact placement read it (pollux-apps, `placement =
  // "exact"`); empty in a shape built by hand, where `nodes` is all there is.
  std::vector<int> node_gpus;
};

class ClusterState {
 public:
  ClusterState() = default;
  explicit ClusterState(const std::vector<NodeSpec>& nodes);

  std::span<const Node> nodes() const { return nodes_; }
  const Node& node(NodeId id) const { return nodes_[id]; }
  std::span<const Gpu> gpus() const { return gpus_; }
  const Gpu& gpu(GpuId id) const { return gpus_[id]; }
  std::span<const Gpu> gpus_of(NodeId id) const {
    return std::span<const Gpu>(gpus_).subspan(nodes_[id].first_gpu, nodes_[id].spec.gpus);
  }

  int installed_gpus() const { return static_cast<int>(gpus_.size()); }  // up or down
  int total_gpus() const { return total_gpus_; }  // on nodes that are up
  int free_gpus() const { return free_gpus_; }    // whole free GPUs on nodes that are up
  int largest_free_block() const;                 // most whole free GPUs on one node
  int shared_gpus() const { return shared_gpus_; }  // GPUs space-shared by several whole-GPU jobs
  int max_gpus_per_node() const { return static_cast<int>(nodes_with_free_.size()) - 1; }
  int rack_count() const { return rack_count_; }
  // Distinct GPU types, in order of first appearance.
  const std::vector<std::string>& gpu_types() const { return gpu_types_; }
  // Index of a GPU type in gpu_types(), or kAnyGpuType if the cluster has none of it.
  int type_index(std::string_view gpu_type) const;

  Shape shape_of(const Allocation& allocation) const;
  // The shape of `gpus` GPUs packed onto as few nodes as possible, of
  // `gpu_type` (default: the first type): the reference for trace durations
  // and the usual oracle shape for ordering policies.
  Shape packed_shape(const JobSpec& job, int gpus, std::string_view gpu_type = {}) const;

  // How many of the job's GPUs node `id` could take now: GPUs with at least
  // `want.gpu_milli` free, limited by the node's free CPU and memory for the
  // job's per-GPU share of `want.cpus` and `want.mem_gb`. 0 if the node is
  // down or of another GPU type than `want.gpu_type` asks for.
  int fits_on(NodeId id, const Resources& want) const;
  // The up node with the fewest whole free GPUs among those with at least
  // `gpus` (the lowest id among ties), or none: what a scan of fits_on finds
  // for a whole-GPU request of any type and no CPUs or memory, from an index
  // of the nodes by free GPUs rather than a pass over every node.
  std::optional<NodeId> tightest_node(int gpus) const;
  // Appends `count` GPUs of node `id` that can take `want.gpu_milli`, lowest first.
  void take(NodeId id, const Resources& want, int count, std::vector<GpuId>& out) const;

  // Would `allocation` fit in what is free now? Reports the first obstacle.
  bool can_assign(const Allocation& allocation, std::string* why = nullptr) const;

  // Could whole-GPU `allocation` space-share GPUs that whole-GPU jobs hold
  // now, each GPU then holding at most `most_jobs`? Reports the first obstacle.
  bool can_share(const Allocation& allocation, int most_jobs, std::string* why = nullptr) const;

  // --- mutation: the core only ---
  void assign(JobId job, const Allocation& allocation);
  // Adds `job` to the tenants of GPUs that whole-GPU jobs hold (space
  // sharing): the GPUs stay as busy as they are, the nodes give up the
  // job's CPUs and memory. release() undoes either.
  void share(JobId job, const Allocation& allocation, int most_jobs);
  void release(JobId job, const Allocation& allocation);
  void set_up(NodeId id, bool up);
  NodeId add_node(const NodeSpec& spec);

 private:
  void count_free(const Node& node, int delta);
  // Whether each node the allocation touches has its share of CPUs and memory free.
  bool node_shares_fit(const Allocation& allocation, std::string* why) const;

  std::vector<Node> nodes_;
  std::vector<Gpu> gpus_;
  std::vector<int> nodes_with_free_;  // [k] = up nodes with exactly k free GPUs
  std::vector<std::vector<std::uint64_t>> nodes_by_free_;  // [k]: bit set of those nodes, by id
  std::vector<std::string> gpu_types_;
  std::vector<int> largest_node_of_type_;  // most GPUs on one node, by type
  int total_gpus_ = 0;
  int free_gpus_ = 0;
  int rack_count_ = 0;
  int shared_gpus_ = 0;
};

// The GPUs on nodes that are up, by type (indexed as gpu_types()), into
// `out`: the capacity per type that type-aware allocation plans against.
inline void gpus_up_by_type(const ClusterState& cluster, std::vector<int>& out) {
  out.assign(cluster.gpu_types().size(), 0);
  for (const Node& node : cluster.nodes())
    if (node.up) out[static_cast<std::size_t>(node.type)] += node.spec.gpus;
}

}  // namespace tessel

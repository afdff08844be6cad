#include "tessel/cluster.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tessel {

ClusterState::ClusterState(const std::vector<NodeSpec>& nodes) {
  nodes_.reserve(nodes.size());
  for (const NodeSpec& spec : nodes) add_node(spec);
}

NodeId ClusterState::add_node(const NodeSpec& spec) {
  if (spec.gpus < 0) throw std::invalid_argument("node '" + spec.name + "' has a negative GPU count");
  Node node;
  node.id = static_cast<NodeId>(nodes_.size());
  node.spec = spec;
  if (node.spec.name.empty()) node.spec.name = "node" + std::to_string(node.id);
  node.first_gpu = static_cast<GpuId>(gpus_.size());
  node.free_gpus = spec.gpus;
  node.free_cpus = spec.cpus;
  node.free_mem_gb = spec.mem_gb;
  for (int i = 0; i < spec.gpus; ++i) gpus_.push_back(Gpu{node.id, 0, {}});
  if (static_cast<int>(nodes_with_free_.size()) <= spec.gpus) nodes_with_free_.resize(spec.gpus + 1, 0);
  if (nodes_by_free_.size() < nodes_with_free_.size()) nodes_by_free_.resize(nodes_with_free_.size());
  const std::size_t words = node.id / 64 + 1;
  for (std::vector<std::uint64_t>& bits : nodes_by_free_)
    if (bits.size() < words) bits.resize(words, 0);
  auto type = std::find(gpu_types_.begin(), gpu_types_.end(), spec.gpu_type);
  if (type == gpu_types_.end()) {
    gpu_types_.push_back(spec.gpu_type);
    largest_node_of_type_.push_back(0);
    type = gpu_types_.end() - 1;
  }
  node.type = static_cast<int>(type - gpu_types_.begin());
  int& largest = largest_node_of_type_[node.type];
  largest = std::max(largest, spec.gpus);
  rack_count_ = std::max(rack_count_, spec.rack + 1);
  nodes_.push_back(std::move(node));
  count_free(nodes_.back(), +1);
  return nodes_.back().id;
}

void ClusterState::count_free(const Node& node, int delta) {
  if (!node.up) return;
  nodes_with_free_[node.free_gpus] += delta;
  std::uint64_t& word = nodes_by_free_[node.free_gpus][node.id / 64];
  const std::uint64_t bit = std::uint64_t{1} << (node.id % 64);
  word = delta > 0 ? word | bit : word & ~bit;
  free_gpus_ += delta * node.free_gpus;
  total_gpus_ += delta * node.spec.gpus;
}

std::optional<NodeId> ClusterState::tightest_node(int gpus) const {
  for (std::size_t k = static_cast<std::size_t>(std::max(gpus, 1)); k < nodes_by_free_.size(); ++k) {
    if (nodes_with_free_[k] == 0) continue;
    const std::vector<std::uint64_t>& bits = nodes_by_free_[k];
    for (std::size_t w = 0; w < bits.size(); ++w)
      if (bits[w] != 0) return static_cast<NodeId>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits[w])));
  }
  return std::nullopt;
}

int ClusterState::largest_free_block() const {
  for (int k = static_cast<int>(nodes_with_free_.size()) - 1; k > 0; --k)
    if (nodes_with_free_[k] > 0) return k;
  return 0;
}

Shape ClusterState::shape_of(const Allocation& allocation) const {
  Shape shape;
  shape.gpus = allocation.gpu_count();
  shape.gpu_milli = allocation.gpu_milli;
  shape.cpus = allocation.cpus;
  shape.mem_gb = allocation.mem_gb;
  shape.layout = allocation.layout;
  if (allocation.empty()) return shape;
  shape.gpu_type = nodes_[gpus_[allocation.gpus.front()].node].spec.gpu_type;
  shape.gpu_mem_gb = nodes_[gpus_[allocation.gpus.front()].node].spec.gpu_mem_gb;
  // Allocations are small (a handful of GPUs), so counting distinct nodes and
  // racks by scanning beats any set.
  NodeId seen_nodes[64];
  int seen_racks[64];
  int node_count = 0, rack_count = 0;
  for (GpuId id : allocation.gpus) {
    const NodeId n = gpus_[id].node;
    const NodeId* seen = std::find(seen_nodes, seen_nodes + node_count, n);
    if (seen != seen_nodes + node_count) {
      ++shape.node_gpus[static_cast<std::size_t>(seen - seen_nodes)];
    } else {
      if (node_count < 64) {
        seen_nodes[node_count++] = n;
        shape.node_gpus.push_back(1);
      }
      const int rack = nodes_[n].spec.rack;
      if (std::find(seen_racks, seen_racks + rack_count, rack) == seen_racks + rack_count &&
          rack_count < 64)
        seen_racks[rack_count++] = rack;
    }
  }
  shape.nodes = node_count;
  shape.racks = rack_count;
  return shape;
}

Shape ClusterState::packed_shape(const JobSpec& job, int gpus, std::string_view gpu_type) const {
  Shape shape;
  shape.gpus = gpus;
  shape.gpu_milli = job.gpu_milli;
  shape.cpus = job.cpus;
  shape.mem_gb = job.mem_gb;
  shape.gpu_type = !gpu_type.empty() ? std::string(gpu_type) : gpu_types_.empty() ? "" : gpu_types_.front();
  int per_node = 1;
  for (std::size_t t = 0; t < gpu_types_.size(); ++t)
    if (gpu_types_[t] == shape.gpu_type) per_node = std::max(1, largest_node_of_type_[t]);
  for (const Node& node : nodes_)
    if (node.spec.gpu_type == shape.gpu_type) {
      shape.gpu_mem_gb = node.spec.gpu_mem_gb;
      break;
    }
  shape.nodes = std::max(1, (gpus + per_node - 1) / per_node);
  for (int left = gpus; left > 0; left -= per_node) shape.node_gpus.push_back(std::min(left, per_node));
  return shape;
}

namespace {
// Visits each node of an allocation once with the number of its GPUs there.
template <class F>
void for_each_node_share(const std::vector<Gpu>& gpus, const Allocation& allocation, F&& visit) {
  std::vector<std::pair<NodeId, int>> counts;
  for (GpuId id : allocation.gpus) {
    const NodeId n = gpus[id].node;
    auto it = std::find_if(counts.begin(), counts.end(), [n](auto& c) { return c.first == n; });
    if (it == counts.end())
      counts.emplace_back(n, 1);
    else
      ++it->second;
  }
  for (auto [node, count] : counts) visit(node, count);
}
}  // namespace

int ClusterState::type_index(std::string_view gpu_type) const {
  for (std::size_t t = 0; t < gpu_types_.size(); ++t)
    if (gpu_types_[t] == gpu_type) return static_cast<int>(t);
  return kAnyGpuType;
}

int ClusterState::fits_on(NodeId id, const Resources& want) const {
  const Node& node = nodes_[id];
  if (!node.up || want.gpus <= 0) return 0;
  if (want.gpu_type != kAnyGpuType && want.gpu_type != node.type) return 0;
  int gpus = node.free_gpus;
  if (want.gpu_milli < 1000) {
    gpus = 0;
    for (const Gpu& gpu : gpus_of(id)) gpus += gpu.free_milli() >= want.gpu_milli;
  }
  if (want.cpus > 0) {
    const double per_gpu = want.cpus / want.gpus;
    gpus = std::min(gpus, static_cast<int>(std::floor(node.free_cpus / per_gpu + 1e-9)));
  }
  if (want.mem_gb > 0) {
    const double per_gpu = want.mem_gb / want.gpus;
    gpus = std::min(gpus, static_cast<int>(std::floor(node.free_mem_gb / per_gpu + 1e-9)));
  }
  return gpus;
}

void ClusterState::take(NodeId id, const Resources& want, int count, std::vector<GpuId>& out) const {
  const Node& node = nodes_[id];
  for (int i = 0; i < node.spec.gpus && count > 0; ++i) {
    if (gpus_[node.first_gpu + i].free_milli() >= want.gpu_milli) {
      out.push_back(node.first_gpu + static_cast<GpuId>(i));
      --count;
    }
  }
}

bool ClusterState::can_assign(const Allocation& allocation, std::string* why) const {
  auto fail = [why](std::string message) {
    if (why) *why = std::move(message);
    return false;
  };
  // A share of 0 is a job that uses none of its GPU's time (a CPU-only pod
  // of the openb trace): the GPU only ties it to a node.
  if (allocation.gpu_milli < 0 || allocation.gpu_milli > 1000)
    return fail("GPU share " + std::to_string(allocation.gpu_milli) + " is outside 0..1000");
  for (std::size_t i = 0; i < allocation.gpus.size(); ++i) {
    const GpuId id = allocation.gpus[i];
    if (id >= gpus_.size()) return fail("GPU " + std::to_string(id) + " does not exist");
    if (std::find(allocation.gpus.begin(), allocation.gpus.begin() + i, id) !=
        allocation.gpus.begin() + i)
      return fail("GPU " + std::to_string(id) + " is chosen twice");
    const Gpu& gpu = gpus_[id];
    if (!nodes_[gpu.node].up)
      return fail("GPU " + std::to_string(id) + " is on node " + nodes_[gpu.node].spec.name +
                  ", which is down");
    if (gpu.free_milli() < allocation.gpu_milli)
      return fail("GPU " + std::to_string(id) + " is held by job " + std::to_string(gpu.jobs.front()));
  }
  return node_shares_fit(allocation, why);
}

bool ClusterState::node_shares_fit(const Allocation& allocation, std::string* why) const {
  auto fail = [why](std::string message) {
    if (why) *why = std::move(message);
    return false;
  };
  bool fits = true;
  std::string message;
  const double total = static_cast<double>(allocation.gpus.size());
  for_each_node_share(gpus_, allocation, [&](NodeId n, int count) {
    const Node& node = nodes_[n];
    const double cpus = allocation.cpus * count / total, mem = allocation.mem_gb * count / total;
    if (fits && (cpus > node.free_cpus + 1e-9 || mem > node.free_mem_gb + 1e-9)) {
      fits = false;
      message = "node " + node.spec.name + " lacks CPU or memory for the job's share";
    }
  });
  return fits ? true : fail(message);
}

bool ClusterState::can_share(const Allocation& allocation, int most_jobs, std::string* why) const {
  auto fail = [why](std::string message) {
    if (why) *why = std::move(message);
    return false;
  };
  if (allocation.gpu_milli != 1000) return fail("only jobs of whole GPUs space-share");
  for (const GpuId id : allocation.gpus) {
    if (id >= gpus_.size()) return fail("GPU " + std::to_string(id) + " does not exist");
    const Gpu& gpu = gpus_[id];
    if (!nodes_[gpu.node].up)
      return fail("GPU " + std::to_string(id) + " is on node " + nodes_[gpu.node].spec.name + ", which is down");
    // Every tenant a whole-GPU job: none fractional, none of share 0.
    if (gpu.used_milli != 1000 || static_cast<int>(gpu.jobs.size()) != gpu.sharers + 1)
      return fail("GPU " + std::to_string(id) + " is not held by whole-GPU jobs alone");
    if (static_cast<int>(gpu.jobs.size()) >= most_jobs)
      return fail("GPU " + std::to_string(id) + " already holds " + std::to_string(gpu.jobs.size()) +
                  " jobs, the most the throughput model prices together");
  }
  return node_shares_fit(allocation, why);
}

void ClusterState::share(JobId job, const Allocation& allocation, int most_jobs) {
  std::string why;
  if (!can_share(allocation, most_jobs, &why))
    throw std::logic_error("cannot share GPUs with job " + std::to_string(job) + ": " + why);
  const double total = static_cast<double>(allocation.gpus.size());
  for_each_node_share(gpus_, allocation, [&](NodeId n, int count) {
    Node& node = nodes_[n];
    for (GpuId id : allocation.gpus) {
      Gpu& gpu = gpus_[id];
      if (gpu.node != n) continue;
      if (gpu.sharers++ == 0) ++shared_gpus_;
      gpu.jobs.push_back(job);
    }
    node.free_cpus -= allocation.cpus * count / total;
    node.free_mem_gb -= allocation.mem_gb * count / total;
  });
}

void ClusterState::assign(JobId job, const Allocation& allocation) {
  std::string why;
  if (!can_assign(allocation, &why)) throw std::logic_error("cannot assign job " + std::to_string(job) + ": " + why);
  const double total = static_cast<double>(allocation.gpus.size());
  for_each_node_share(gpus_, allocation, [&](NodeId n, int count) {
    Node& node = nodes_[n];
    count_free(node, -1);
    for (GpuId id : allocation.gpus) {
      Gpu& gpu = gpus_[id];
      if (gpu.node != n) continue;
      if (gpu.used_milli == 0 && allocation.gpu_milli > 0) --node.free_gpus;
      gpu.used_milli += allocation.gpu_milli;
      gpu.jobs.push_back(job);
    }
    node.free_cpus -= allocation.cpus * count / total;
    node.free_mem_gb -= allocation.mem_gb * count / total;
    count_free(node, +1);
  });
}

void ClusterState::release(JobId job, const Allocation& allocation) {
  const double total = static_cast<double>(allocation.gpus.size());
  for_each_node_share(gpus_, allocation, [&](NodeId n, int count) {
    Node& node = nodes_[n];
    count_free(node, -1);
    for (GpuId id : allocation.gpus) {
      Gpu& gpu = gpus_[id];
      if (gpu.node != n) continue;
      // A whole-GPU job leaving a GPU it space-shared leaves it busy.
      if (allocation.gpu_milli == 1000 && gpu.sharers > 0)
        shared_gpus_ -= --gpu.sharers == 0;
      else
        gpu.used_milli -= allocation.gpu_milli;
      auto tenant = std::find(gpu.jobs.begin(), gpu.jobs.end(), job);
      if (tenant == gpu.jobs.end())
        throw std::logic_error("job " + std::to_string(job) + " does not hold GPU " + std::to_string(id));
      gpu.jobs.erase(tenant);
      if (gpu.used_milli == 0 && allocation.gpu_milli > 0) ++node.free_gpus;
    }
    node.free_cpus += allocation.cpus * count / total;
    node.free_mem_gb += allocation.mem_gb * count / total;
    count_free(node, +1);
  });
}

void ClusterState::set_up(NodeId id, bool up) {
  Node& node = nodes_[id];
  if (node.up == up) return;
  count_free(node, -1);
  node.up = up;
  count_free(node, +1);
}

}  // namespace tessel

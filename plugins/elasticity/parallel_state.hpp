// Pieces shared by the elasticity plugins for jobs with 3D parallelism
// (tenplex, dp_only): their arguments, the throughput-best layout that fits
// in memory, where a job's state is and what moving it costs, and when a
// running job grows. Header-only, so each plugin library stays
// self-contained.
//
// The state. A job's training state, bytes_per_parameter x parameters bytes,
// is a grid of tp x pp shards: pipeline stage k holds layers [k/pp, (k+1)/pp)
// of the model, tensor slice j columns [j/tp, (j+1)/tp) of each of them (as
// Tenplex's parallelizable tensor collection splits every tensor). Each of
// the dp replicas holds the whole grid. Shards go to GPUs by rank, tensor
// fastest, then stage, then replica (so a tensor-parallel group shares a
// node, Megatron-LM's first takeaway, SC'21 §3.2), ranks following the
// allocation's GPUs in ascending id; ranks beyond dp x tp x pp hold nothing.
//
// A move from one allocation and layout to another: each GPU of the new one
// needs its new shard; what it held before and still needs stays, and every
// other piece (the intersection of its new shard with an old one) comes from
// the nearest GPU of the old allocation that held it and survives: on its own
// node over NVLink, else over the network, else (no survivor holds it) from
// the checkpoint in storage. GPUs receive in parallel, each at the per-GPU
// bandwidths, so the network part takes as long as the busiest receiver or,
// with `node_send_gb_per_s`, the busiest sending node if that is slower
// (Tenplex's measured transfers are limited by the nodes serving the state:
// its redeployment takes half as long from two nodes as from one, 13 s
// against 27 s for 6.7B, Fig. 10); storage is one shared service, so its
// part takes all bytes read from it over `storage_gb_per_s`. With
// `state_served_by = "first_node"` one node holds and sends the whole state,
// as Tenplex-Central, the paper's centralised baseline, does. The dataset is
// not moved: as in Tenplex (whose MLFS serves it), every GPU reads its
// samples from shared storage, and the position in the dataset is a few
// bytes.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tessel/tessel.hpp>

namespace tessel::elasticity {

// Both plugins' arguments, first in each plugin's table (a macro: the plugin
// macros take one array). The memory ones must match the throughput model's
// (parallel-3d reads the same keys with the same defaults).
#define TESSEL_PARALLEL_STATE_ARGS                                                                                 \
  {"intra_node_gb_per_s", ArgType::number, "150", "state moved between GPUs of one node (NVLink), GB/s per GPU"}, \
      {"inter_node_gb_per_s", ArgType::number, "12.5", "state moved between nodes, GB/s per GPU"},                \
      {"storage_gb_per_s", ArgType::number, "2", "checkpoint read from shared storage, GB/s for the whole job"},   \
      {"bytes_per_parameter", ArgType::number, "16",                                                              \
       "training state per parameter (16: mixed-precision Adam); as in the throughput model"},                    \
      {"activation_gb", ArgType::number, "4",                                                                     \
       "GPU memory each GPU reserves for activations; as in the throughput model"},                               \
      {"node_send_gb_per_s", ArgType::number, "0",                                                                \
       "state one node sends to other nodes during a move, GB/s for all its GPUs together; 0: senders do not "    \
       "limit"},                                                                                                  \
      {"state_served_by", ArgType::string, "\"holders\"",                                                         \
       "where a moved piece of state comes from: the nearest surviving GPU that holds it (holders), or the "      \
       "first node of the old allocation, which holds the whole state (first_node: Tenplex-Central)",             \
       "holders|first_node"}

struct ParallelStateSettings {
  double intra_node_bytes_per_s;
  double inter_node_bytes_per_s;
  double storage_bytes_per_s;
  double node_send_bytes_per_s;  // 0: unlimited
  bool served_by_first_node;
  ParallelMemory memory;

  explicit ParallelStateSettings(const PluginArgs& args)
      : intra_node_bytes_per_s(positive(args, "intra_node_gb_per_s") * 1e9),
        inter_node_bytes_per_s(positive(args, "inter_node_gb_per_s") * 1e9),
        storage_bytes_per_s(positive(args, "storage_gb_per_s") * 1e9),
        node_send_bytes_per_s(args.number("node_send_gb_per_s") * 1e9),
        served_by_first_node(args.string("state_served_by") == "first_node"),
        memory{positive(args, "bytes_per_parameter"), args.number("activation_gb")} {
    if (memory.activation_gb < 0) throw ArgumentError("activation_gb", "must not be negative");
    if (node_send_bytes_per_s < 0) throw ArgumentError("node_send_gb_per_s", "must be 0 (unlimited) or positive");
  }

  double state_bytes(const JobSpec& job) const { return memory.bytes_per_parameter * job.parameters; }

 private:
  static double positive(const PluginArgs& args, const char* name) {
    const double value = args.number(name);
    if (!(value > 0)) throw ArgumentError(name, "must be positive");
    return value;
  }
};

// ------------------------------------------------------------------ layouts

struct LayoutChoice {
  JobLayout layout;  // the job's own batch size; tp and pp chosen
  double rate = 0;   // by the throughput model
  bool fits = false;
};

// `layout` on `shape`, priced by the throughput model.
inline LayoutChoice priced(const SchedulerView& view, const JobSpec& job, Shape shape, const JobLayout& layout,
                           const ParallelMemory& memory) {
  shape.layout = layout;
  return {layout, view.throughput().rate(job, shape), memory.fits(job.parameters, layout, shape.gpu_mem_gb)};
}

// A (tp, pp) split as the plugins' arguments write it: "TPxPP", so "2x4" is
// tp 2, pp 4. `argument` names the argument an error reports.
inline JobLayout parse_split(std::string_view text, const std::string& argument) {
  const auto x = text.find('x');
  int tp = 0, pp = 0;
  auto number = [](std::string_view digits, int& out) {
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return error == std::errc{} && end == digits.data() + digits.size() && out >= 1;
  };
  if (x == std::string_view::npos || !number(text.substr(0, x), tp) || !number(text.substr(x + 1), pp))
    throw ArgumentError(argument, "'" + std::string(text) + "' is not a split TPxPP of positive integers, as \"2x4\"");
  return {0, tp, pp};
}

// The throughput-best layout of `shape` (its own layout ignored) that fits
// in GPU memory, probing the model with each candidate; ties go to the
// smaller tp, then pp. When none fits, the one needing least memory, marked
// as not fitting.
inline LayoutChoice best_layout(const SchedulerView& view, const JobSpec& job, Shape shape,
                                const ParallelMemory& memory) {
  shape.layout = JobLayout{};
  std::optional<LayoutChoice> fastest, smallest;
  for (const JobLayout& candidate : parallel_layouts(shape)) {
    shape.layout = candidate;
    const double rate = view.throughput().rate(job, shape);
    if (memory.fits(job.parameters, candidate, shape.gpu_mem_gb)) {
      if (!fastest || rate > fastest->rate) fastest = LayoutChoice{candidate, rate, true};
      continue;
    }
    const double need = memory.gb_per_gpu(job.parameters, candidate);
    const double least = smallest ? memory.gb_per_gpu(job.parameters, smallest->layout) : need;
    if (!smallest || need < least || (need == least && rate > smallest->rate))
      smallest = LayoutChoice{candidate, rate, false};
  }
  return fastest ? *fastest : smallest.value_or(LayoutChoice{});
}

// ------------------------------------------------------------------ state

// Where the state a move needs comes from.
struct StateTransfer {
  double intra_node_bytes = 0;       // over NVLink, all GPUs together
  double inter_node_bytes = 0;       // over the network, all GPUs together
  double storage_bytes = 0;          // from the checkpoint: no surviving GPU held it
  double busiest_gpu_seconds = 0;    // the receiver that takes longest, over NVLink and network
  double busiest_node_seconds = 0;   // the node that takes longest sending over the network (node_send_gb_per_s)

  // Receivers and senders work at once: the slower side sets the time.
  double seconds(const ParallelStateSettings& settings) const {
    return std::max(busiest_gpu_seconds, busiest_node_seconds) + storage_bytes / settings.storage_bytes_per_s;
  }
};

namespace detail {

// Shard (tensor slice, stage) of each GPU of `allocation`, in ascending GPU
// id; GPUs beyond dp x tp x pp get none.
struct ShardOwner {
  GpuId gpu;
  int tensor;
  int stage;
};

inline std::vector<ShardOwner> shard_owners(const Allocation& allocation) {
  std::vector<GpuId> gpus = allocation.gpus;
  std::sort(gpus.begin(), gpus.end());
  const int tp = allocation.layout.tensor_parallel, pp = allocation.layout.pipeline_parallel;
  const int ranks = data_parallel(allocation.layout, static_cast<int>(gpus.size())) * tp * pp;
  std::vector<ShardOwner> owners;
  for (int rank = 0; rank < ranks; ++rank) owners.push_back({gpus[rank], rank % tp, (rank / tp) % pp});
  return owners;
}

// Length of [a/n, (a+1)/n) ∩ [b/m, (b+1)/m).
inline double overlap(int a, int n, int b, int m) {
  const double low = std::max(static_cast<double>(a) / n, static_cast<double>(b) / m);
  const double high = std::min(static_cast<double>(a + 1) / n, static_cast<double>(b + 1) / m);
  return std::max(0.0, high - low);
}

}  // namespace detail

// What moving `state_bytes` of state from `from` to `to` (both with a
// layout naming tp and pp) transfers. GPUs of `from` on nodes that are down
// are lost, with their shards. A piece that crosses the network comes from
// the surviving holder's node that has sent least so far (so replicas share
// the sending); with `state_served_by = "first_node"` every piece a GPU
// lacks comes from the node of `from`'s first GPU instead, which holds the
// whole state (Tenplex-Central), or from storage if that node is down.
inline StateTransfer plan_transfer(const ClusterState& cluster, double state_bytes, const Allocation& from,
                                   const Allocation& to, const ParallelStateSettings& settings) {
  const int old_tp = from.layout.tensor_parallel, old_pp = from.layout.pipeline_parallel;
  const int new_tp = to.layout.tensor_parallel, new_pp = to.layout.pipeline_parallel;
  auto node_of = [&](GpuId gpu) { return cluster.gpu(gpu).node; };

  // Old shards that survive: the nodes holding each cell.
  std::vector<std::vector<NodeId>> holders(static_cast<std::size_t>(old_tp) * old_pp);
  std::vector<std::pair<GpuId, int>> own_cell;  // every old owner's cell, survivor or not
  for (const detail::ShardOwner& owner : detail::shard_owners(from)) {
    const int cell = owner.stage * old_tp + owner.tensor;
    own_cell.emplace_back(owner.gpu, cell);
    const NodeId node = node_of(owner.gpu);
    if (cluster.node(node).up && std::find(holders[cell].begin(), holders[cell].end(), node) == holders[cell].end())
      holders[cell].push_back(node);
  }
  const NodeId first_node = node_of(*std::min_element(from.gpus.begin(), from.gpus.end()));
  const bool first_node_up = cluster.node(first_node).up;

  std::map<NodeId, double> sent;  // over the network, by sending node
  auto least_sent = [&](const std::vector<NodeId>& nodes) {
    return *std::min_element(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) { return sent[a] < sent[b]; });
  };

  StateTransfer transfer;
  for (const detail::ShardOwner& owner : detail::shard_owners(to)) {
    const auto held = std::find_if(own_cell.begin(), own_cell.end(),
                                   [&](const auto& entry) { return entry.first == owner.gpu; });
    const int mine = held == own_cell.end() ? -1 : held->second;
    const NodeId here = node_of(owner.gpu);
    double intra = 0, inter = 0;
    for (int stage = 0; stage < old_pp; ++stage) {
      const double layers = detail::overlap(owner.stage, new_pp, stage, old_pp);
      if (layers == 0) continue;
      for (int tensor = 0; tensor < old_tp; ++tensor) {
        const double bytes = layers * detail::overlap(owner.tensor, new_tp, tensor, old_tp) * state_bytes;
        const int cell = stage * old_tp + tensor;
        if (bytes == 0 || cell == mine) continue;
        const std::vector<NodeId>& from_nodes = holders[cell];
        if (settings.served_by_first_node ? !first_node_up : from_nodes.empty()) {
          transfer.storage_bytes += bytes;
        } else if (settings.served_by_first_node ? first_node == here
                                                 : std::find(from_nodes.begin(), from_nodes.end(), here) !=
                                                       from_nodes.end()) {
          intra += bytes;
        } else {
          inter += bytes;
          sent[settings.served_by_first_node ? first_node : least_sent(from_nodes)] += bytes;
        }
      }
    }
    transfer.intra_node_bytes += intra;
    transfer.inter_node_bytes += inter;
    transfer.busiest_gpu_seconds =
        std::max(transfer.busiest_gpu_seconds,
                 intra / settings.intra_node_bytes_per_s + inter / settings.inter_node_bytes_per_s);
  }
  if (settings.node_send_bytes_per_s > 0)
    for (const auto& [node, bytes] : sent)
      transfer.busiest_node_seconds = std::max(transfer.busiest_node_seconds, bytes / settings.node_send_bytes_per_s);
  return transfer;
}

// Restarting from the checkpoint: every byte of state read from storage.
inline double restart_seconds(const SchedulerView& view, const JobSpec& job, const ParallelStateSettings& settings) {
  return view.settings().restart_seconds + settings.state_bytes(job) / settings.storage_bytes_per_s;
}

// ------------------------------------------------------------------ growth

// The shape of `gpus` GPUs, packed, of the type a running job holds.
inline Shape packed_like(const ClusterState& cluster, const JobState& job, int gpus) {
  const Node& node = cluster.node(cluster.gpu(job.allocation.gpus.front()).node);
  return cluster.packed_shape(job.spec, gpus, node.spec.gpu_type);
}

// How a plugin would run a running job on `gpus` GPUs (packed), and what
// moving there would cost; nullopt if it would not run it there.
struct GrowthOption {
  LayoutChoice choice;
  double move_seconds = 0;
};
using GrowthOptions = std::function<std::optional<GrowthOption>(const JobState& job, int gpus)>;

// The estimated cost of growing into `layout` by moving state: the restart
// plus each new GPU pulling a whole shard over the network (the GPUs are not
// chosen yet).
inline double estimated_move_seconds(const SchedulerView& view, const JobSpec& job, const JobLayout& layout,
                                     const ParallelStateSettings& settings) {
  return view.settings().restart_seconds + settings.state_bytes(job) /
                                               (layout.tensor_parallel * layout.pipeline_parallel) /
                                               settings.inter_node_bytes_per_s;
}

// The growth rule. Only when no admitted job waits (growing never delays the
// queue), running elastic jobs, in arrival order, take GPUs still free after
// placement: each grows to the count in (held, max_gpus], within what is
// free, at which it fits in memory and saves the most time on its remaining
// work net of the move's estimated cost (fewest GPUs on ties), if that is
// positive. Jobs that shrank after a loss so grow back when nodes return.
inline std::vector<ResizeProposal> grow_into_free_gpus(const SchedulerView& view, const GrowthOptions& options) {
  std::vector<ResizeProposal> proposals;
  for (const JobState* job : view.active())
    if (job->waiting()) return proposals;
  int free = view.cluster().free_gpus();
  for (const JobState* job : view.active()) {
    if (free == 0) break;
    const int held = job->allocation.gpu_count();
    if (!job->running() || !job->spec.elastic() || held >= job->spec.max_gpus) continue;
    const double rate_now = view.throughput().rate(job->spec, view.cluster().shape_of(job->allocation));
    const double seconds_now = job->remaining_work() / rate_now;
    double best_net = 0, best_rate = rate_now;
    int best_gpus = held;
    for (int gpus = held + 1; gpus <= std::min(job->spec.max_gpus, held + free); ++gpus) {
      const std::optional<GrowthOption> option = options(*job, gpus);
      if (!option || !option->choice.fits) continue;
      const double net = seconds_now - job->remaining_work() / option->choice.rate - option->move_seconds;
      if (net > best_net) {
        best_net = net;
        best_rate = option->choice.rate;
        best_gpus = gpus;
      }
    }
    if (best_gpus == held) continue;
    proposals.push_back({job->spec.id, best_gpus, JobLayout{},
                         Reason("{} GPUs free and no job waiting: {} to {} GPUs trains {}% faster", free, held,
                                best_gpus, std::round(100 * (best_rate / rate_now - 1)))});
    free -= best_gpus - held;
  }
  return proposals;
}

}  // namespace tessel::elasticity

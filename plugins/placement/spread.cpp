// spread: place a job on GPUs drawn at random among those that can take it.
//
// Sources: the `random` placement scheme of the Tiresias simulator
// (SymbioticLab/Tiresias, simulator/cluster.py, random_placement: each
// worker goes to a random node with a free GPU), and the Random baseline of
// Weng et al., "Beware of Fragmentation" (USENIX ATC'23), in
// hkust-adsl/kubernetes-scheduler-simulator (pkg/simulator/plugin/
// random_score.go picks one node at random among those that fit;
// allocateGpuIdBasedOnRandomFit picks a random GPU that fits a shared pod).
//
// The rule as implemented, by the argument `unit`:
// - "gpu" (default, Tiresias): each of the job's GPUs is drawn uniformly at
//   random, without replacement, among all GPUs that can take its share, at
//   most as many per node as the node's CPU and memory allow. Multi-GPU jobs
//   therefore spread over nodes.
// - "node" (ATC'23 Random): one node drawn uniformly among those that can
//   take the whole job, then its GPUs drawn at random on that node. When no
//   node can take the whole job, the GPUs are drawn as for "gpu", or, with
//   `span_nodes = false`, the job waits, as a Kubernetes pod does.
// Fractional shares only go to GPUs with that many milli free.
//
// The draws come from a generator seeded with the plugin's seed, the job's id
// and the time, never from a generator that advances between calls: the core
// may ask several times for one job in one round, on hypothetical states, and
// the same question must get the same answer. So placements are reproducible
// for a seed and change with it. Simplification: the Kubernetes scheduler
// draws from Go's global generator; the streams differ, only the rule is kept.
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/gpu_choice.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"unit", tessel::ArgType::string, "\"gpu\"",
     "what is drawn at random: each GPU (spreads jobs over nodes) or one node for the whole job", "gpu|node"},
    {"span_nodes", tessel::ArgType::boolean, "true",
     "with unit = \"node\": a job no single node can take has its GPUs drawn anywhere (false: it waits)"},
};

class Spread final : public tessel::PlacementPolicy {
 public:
  explicit Spread(const tessel::PluginContext& context)
      : seed_(context.seed()), whole_node_(context.args().string("unit") == "node"),
        span_nodes_(context.args().boolean("span_nodes")) {
    // Defaults are filled in before this runs, so only false can be told apart.
    if (!whole_node_ && !span_nodes_)
      throw tessel::ArgumentError("span_nodes", "applies only with unit = \"node\": GPUs drawn one by one "
                                                "always span nodes");
  }

  // Draws depend on the time, but whether a job fits does not: a round in
  // which nothing changed can place nothing new.
  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState& job,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    const int total = tessel::gpu_choice::rooms_for(cluster, want, rooms_);
    if (total < want.gpus) {
      choice.reason = tessel::gpu_choice::too_few_gpus(want, total);
      return choice;
    }
    tessel::Rng rng(tessel::derive_seed(tessel::derive_seed(seed_, job.spec.id),
                                        std::bit_cast<std::uint64_t>(view.now())));

    if (whole_node_) {
      std::size_t fitting = 0;
      for (const auto& room : rooms_) fitting += room.gpus >= want.gpus;
      if (fitting > 0) {
        std::size_t pick = rng.below(fitting);
        for (const auto& room : rooms_) {
          if (room.gpus < want.gpus) continue;
          if (pick-- > 0) continue;
          draw_on_node(cluster, room.node, want, rng, choice.gpus);
          choice.reason = tessel::Reason::text("random node " + cluster.node(room.node).spec.name + ", one of " +
                                               std::to_string(fitting) + " that can take the whole job");
          return choice;
        }
      }
      if (!span_nodes_) {
        choice.reason = tessel::Reason("no node can take all {} GPUs, and the job may not span nodes", want.gpus);
        return choice;
      }
    }

    const int nodes = draw_anywhere(cluster, want, rng, choice.gpus);
    choice.reason = tessel::Reason("{} GPUs drawn at random, on {} node(s)", want.gpus, nodes);
    return choice;
  }

 private:
  // Draws want.gpus of the node's GPUs that can take the share.
  void draw_on_node(const tessel::ClusterState& cluster, tessel::NodeId node, const tessel::Resources& want,
                    tessel::Rng& rng, std::vector<tessel::GpuId>& out) {
    candidates_.clear();
    append_usable(cluster, node, want, candidates_);
    for (int i = 0; i < want.gpus; ++i) {
      const std::size_t remaining = candidates_.size() - i;
      std::swap(candidates_[i], candidates_[i + rng.below(remaining)]);
      out.push_back(candidates_[i]);
    }
  }

  // Draws GPUs one at a time among all usable ones (partial Fisher-Yates),
  // skipping those of nodes that already took all the job's GPUs their CPU
  // and memory allow. Returns the number of nodes used.
  int draw_anywhere(const tessel::ClusterState& cluster, const tessel::Resources& want, tessel::Rng& rng,
                    std::vector<tessel::GpuId>& out) {
    candidates_.clear();
    room_left_.resize(cluster.nodes().size(), 0);
    for (const auto& room : rooms_) {
      append_usable(cluster, room.node, want, candidates_);
      room_left_[room.node] = room.gpus;
    }
    int nodes = 0;
    std::size_t next = 0;
    while (static_cast<int>(out.size()) < want.gpus) {
      std::swap(candidates_[next], candidates_[next + rng.below(candidates_.size() - next)]);
      const tessel::GpuId gpu = candidates_[next++];
      int& left = room_left_[cluster.gpu(gpu).node];
      if (left == 0) continue;  // the node's CPU or memory is used up
      --left;
      out.push_back(gpu);
    }
    for (const auto& room : rooms_) {
      nodes += room_left_[room.node] < room.gpus;
      room_left_[room.node] = 0;
    }
    return nodes;
  }

  static void append_usable(const tessel::ClusterState& cluster, tessel::NodeId node, const tessel::Resources& want,
                            std::vector<tessel::GpuId>& out) {
    const tessel::GpuId first = cluster.node(node).first_gpu;
    const auto gpus = cluster.gpus_of(node);
    for (std::size_t i = 0; i < gpus.size(); ++i)
      if (gpus[i].free_milli() >= want.gpu_milli) out.push_back(first + static_cast<tessel::GpuId>(i));
  }

  std::uint64_t seed_;
  bool whole_node_;
  bool span_nodes_;
  std::vector<tessel::gpu_choice::NodeRoom> rooms_;  // reused across calls
  std::vector<tessel::GpuId> candidates_;            // reused across calls
  std::vector<int> room_left_;                       // by node; all zero between calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Spread, placement, "spread", "1.1",
                        "GPUs drawn at random (seeded) among those that fit: each GPU anywhere, or one random node",
                        kArgs)

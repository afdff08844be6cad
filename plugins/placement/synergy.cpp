// synergy: resource-aware placement, after Synergy (Mohan et al., OSDI'22).
//
// Source: msr-fiddle/synergy, simulator/resources/cluster.py,
// allocate_synergy_placement and _top_synergy_gpus_placement.
//
// The rule. A job's CPUs and memory come with its GPUs, an equal share per
// GPU (ClusterState::fits_on counts how many of the job's GPUs a node can
// take with their share of CPU and memory, of the granted GPU type if any).
// - A running job whose size is changing keeps its GPUs when they have room
//   for the new share: no move, as Synergy extends a job's lease on the same
//   GPUs.
// - Otherwise, if some node has room for all of the job's GPUs with their
//   CPU and memory, the job goes to the one with the fewest free GPUs,
//   packing jobs together so that whole nodes stay free for big jobs.
// - Otherwise the job is spread GPU by GPU from the nodes with the fewest
//   free GPUs first, each giving as many GPUs as it has CPU and memory for.
// Ties go to the lower-numbered node, as in Synergy's stable sorts.
//
// Synergy tries the single node only for multi-GPU jobs; for one GPU its
// GPU-by-GPU walk picks the same node, so one rule serves both.
//
// That is `rule = "fullest"` (the default), Synergy's placement for
// schedulers named `+place` (AllocationStrategy.SYNERGY_PLACEMENT).
// `rule = "first_fit"` is its placement without `+place`, the runner.py
// default (SYNERGY_RANDOM, _top_synergy_gpus): walking the free GPUs in
// order, node by node, a GPU is taken when its node still has room for one
// GPU's share of CPUs and memory, until the job has all its GPUs; a running
// job is not kept where it was (Synergy places every job afresh each
// round: pair it with [scheduler] placement_each_round = "every_round").
// The `synergy` allocation plugin decides whether demands fit with this
// same rule.
#include <algorithm>
#include <vector>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"rule", tessel::ArgType::string, "\"fullest\"",
     "where a job goes: the node with the fewest free GPUs that has room (Synergy's +place), or the first "
     "GPUs in order whose node has room (its default)",
     "fullest|first_fit"},
};

class SynergyPlacement final : public tessel::PlacementPolicy {
 public:
  explicit SynergyPlacement(const tessel::PluginContext& context)
      : first_fit_(context.args().string("rule") == "first_fit") {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState& job,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    if (first_fit_) return first_fit(cluster, want);
    tessel::PlacementChoice choice;
    if (keep_gpus(cluster, job, want)) {
      choice.gpus = job.allocation.gpus;
      choice.reason = tessel::Reason("keeps its {} GPUs: they have room for its new CPU and memory share", want.gpus);
      return choice;
    }

    const tessel::Node* best = nullptr;
    order_.clear();
    int usable = 0;
    for (const tessel::Node& node : cluster.nodes()) {
      const int fits = cluster.fits_on(node.id, want);
      if (fits == 0) continue;
      usable += fits;
      order_.push_back({node.free_gpus, node.id});
      if (fits >= want.gpus && (best == nullptr || node.free_gpus < best->free_gpus)) best = &node;
    }
    if (best != nullptr) {
      cluster.take(best->id, want, want.gpus, choice.gpus);
      choice.reason = tessel::Reason::text("on " + best->spec.name +
                                           ", the node with the fewest free GPUs that has room for all its GPUs "
                                           "with their CPUs and memory");
      return choice;
    }
    if (usable < want.gpus) {
      if (want.cpus > 0 || want.mem_gb > 0)
        choice.reason = tessel::Reason("needs {} GPUs with {} CPUs and {} GB each; {} such GPUs are free",
                                       want.gpus, want.cpus / want.gpus, want.mem_gb / want.gpus, usable);
      else
        choice.reason = tessel::Reason("needs {} GPUs, {} free", want.gpus, usable);
      return choice;
    }
    std::stable_sort(order_.begin(), order_.end(), [](auto& a, auto& b) { return a.first < b.first; });
    int needed = want.gpus, nodes = 0;
    for (auto [free_gpus, id] : order_) {
      (void)free_gpus;
      const int here = std::min(needed, cluster.fits_on(id, want));
      cluster.take(id, want, here, choice.gpus);
      needed -= here;
      ++nodes;
      if (needed == 0) break;
    }
    choice.reason = tessel::Reason("spread over {} nodes, the fullest first, each giving what its CPU and memory allow",
                                   nodes);
    return choice;
  }

 private:
  static tessel::PlacementChoice first_fit(const tessel::ClusterState& cluster, const tessel::Resources& want) {
    tessel::PlacementChoice choice;
    const auto taken = tessel::gpu_choice::take_in_node_order(cluster, want, choice.gpus);
    choice.reason =
        taken.gpus == want.gpus
            ? tessel::Reason("on the first {} node(s) in order with room for its GPUs' CPUs and memory", taken.nodes)
            : tessel::Reason("needs {} GPUs with {} CPUs and {} GB each; {} such GPUs are free", want.gpus,
                             want.cpus / want.gpus, want.mem_gb / want.gpus, taken.gpus);
    return choice;
  }

  // While the core resizes a running job, its GPUs are released for the
  // question; it keeps them if each node still has room for its share.
  static bool keep_gpus(const tessel::ClusterState& cluster, const tessel::JobState& job,
                        const tessel::Resources& want) {
    const std::vector<tessel::GpuId>& held = job.allocation.gpus;
    if (!job.running() || static_cast<int>(held.size()) != want.gpus) return false;
    for (tessel::GpuId gpu : held) {
      const tessel::Node& node = cluster.node(cluster.gpu(gpu).node);
      if (cluster.gpu(gpu).free_milli() < want.gpu_milli) return false;
      const auto on_node = std::count_if(held.begin(), held.end(),
                                         [&](tessel::GpuId other) { return cluster.gpu(other).node == node.id; });
      if (cluster.fits_on(node.id, want) < on_node) return false;
    }
    return true;
  }

  bool first_fit_;
  std::vector<std::pair<int, tessel::NodeId>> order_;  // (free GPUs, node), reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(SynergyPlacement, placement, "synergy", "1.0",
                        "Synergy's placement: the fullest node with room for the job's GPUs, CPUs and memory, or "
                        "the first GPUs in order whose node has room",
                        kArgs)

// consolidated: put a job on as few nodes as possible.
//
// If one node can take the whole job, use the one with the fewest GPUs to
// spare (best fit), leaving big blocks for big jobs. Otherwise fill the
// nodes with the most free GPUs first, which minimises the node count, and
// put the last piece on the best-fitting remaining node.
//
// With `migrate = true`, Gandiva's migration for defragmentation (Xiao et
// al., OSDI'18, §3-4: when a job waits for a consolidated placement and GPUs
// are free but scattered, jobs move to free a whole server): a job that no
// node has room for but that one node of the cluster could hold, and that the
// throughput model says runs slower spread than on one node (the job's rate
// at the spread shape below its rate at its packed shape), is not spread.
// The placement answers "does not fit"; the core then frees running jobs
// ranked below it, lowest first, until one node has room, preempts those on
// that node, and places again those of them the plan grants GPUs later in
// the round, elsewhere: a migration, each moved job charged `[simulation]
// preemption_overhead_seconds` (Gandiva's checkpoint and restore). Which jobs
// may move is thus the allocation's ranking; the placement decides only that
// the locality is worth a move. When spreading costs the job nothing (the
// `linear` model, or a job the model does not slow across nodes), moving
// others is not worth it and the job is spread at once, as without
// `migrate`. When no lower-ranked job frees a node, the job waits for the
// next round rather than spreading.
#include <algorithm>
#include <optional>
#include <vector>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"migrate", tessel::ArgType::boolean, "false",
     "a job that one node could hold but that would run slower spread waits for lower-ranked jobs to move off a "
     "node (Gandiva's defragmentation) instead of spreading"},
};

class Consolidated final : public tessel::PlacementPolicy {
 public:
  explicit Consolidated(const tessel::PluginContext& context) : migrate_(context.args().boolean("migrate")) {}

  bool time_sensitive() const override { return false; }
  bool reads_progress() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState& job,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    if (want.gpu_milli == 1000 && cluster.free_gpus() < want.gpus) {
      choice.reason = tessel::Reason("needs {} GPUs, {} free in the cluster", want.gpus, cluster.free_gpus());
      return choice;
    }
    // Whole GPUs alone: the index of nodes by free GPUs has the best single
    // node, as the pass below would find it.
    if (want.gpu_milli == 1000 && want.gpus > 0 && want.cpus <= 0 && want.mem_gb <= 0 &&
        want.gpu_type == tessel::kAnyGpuType)
      if (const std::optional<tessel::NodeId> node = cluster.tightest_node(want.gpus)) {
        cluster.take(*node, want, want.gpus, choice.gpus);
        choice.reason = tessel::Reason("best fit on one node, {} GPUs left there",
                                       cluster.node(*node).free_gpus - want.gpus);
        return choice;
      }
    // One pass finds the best single node; most jobs need nothing more.
    free_.clear();
    int total = 0;
    std::size_t best = 0;
    bool one_node = false;
    for (const tessel::Node& node : cluster.nodes()) {
      const int fits = cluster.fits_on(node.id, want);
      if (fits == 0) continue;
      total += fits;
      if (fits >= want.gpus && (!one_node || fits < free_[best].gpus)) {
        best = free_.size();
        one_node = true;
      }
      free_.push_back({node.id, fits});
    }
    if (one_node) {
      cluster.take(free_[best].node, want, want.gpus, choice.gpus);
      choice.reason = tessel::Reason("best fit on one node, {} GPUs left there", free_[best].gpus - want.gpus);
      return choice;
    }
    if (total < want.gpus) {
      choice.reason = tessel::Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
      return choice;
    }
    // The fewest nodes possible, each node's lowest GPUs that fit (not
    // spread_over_fewest_nodes's tightest GPUs within a node).
    tessel::gpu_choice::sort_roomiest_first(free_);
    const int nodes = tessel::gpu_choice::split_over_fewest_nodes(
        free_, want.gpus,
        [&](const tessel::gpu_choice::NodeRoom& room, int count) { cluster.take(room.node, want, count, choice.gpus); });
    if (migrate_)
      if (std::optional<tessel::Reason> wait = wait_for_migration(view, job, want, choice.gpus)) {
        choice.gpus.clear();
        choice.reason = *wait;
        return choice;
      }
    choice.reason = tessel::Reason("spread over {} nodes, the fewest possible", nodes);
    return choice;
  }

 private:
  // Why `job` should wait for a migration rather than take `spread`: one
  // node of the spread's GPU type could hold it, and the model prices it
  // slower spread than on one node of that type (the same type, so that
  // only the spreading is priced). Nothing when spreading costs it nothing
  // or no node is large enough.
  static std::optional<tessel::Reason> wait_for_migration(const tessel::SchedulerView& view,
                                                         const tessel::JobState& job, const tessel::Resources& want,
                                                         const std::vector<tessel::GpuId>& spread) {
    const tessel::ClusterState& cluster = view.cluster();
    const tessel::Shape spread_shape =
        cluster.shape_of(tessel::Allocation{spread, want.gpu_milli, want.cpus, want.mem_gb});
    const int type = cluster.node(cluster.gpu(spread.front()).node).type;
    const bool one_node_could = std::any_of(cluster.nodes().begin(), cluster.nodes().end(), [&](const tessel::Node& node) {
      return node.up && node.type == type && node.spec.gpus >= want.gpus;
    });
    if (!one_node_could) return std::nullopt;
    const double spread_rate = view.throughput().rate(job.spec, spread_shape);
    const double packed_rate =
        view.throughput().rate(job.spec, cluster.packed_shape(job.spec, want.gpus, cluster.gpu_types()[type]));
    if (!(spread_rate < packed_rate)) return std::nullopt;
    return tessel::Reason("free GPUs scattered: spread over {} nodes it would run at {} of its rate on one node; "
                          "waits for lower-ranked jobs to move off a node",
                          spread_shape.nodes, spread_rate / packed_rate);
  }

  bool migrate_;
  std::vector<tessel::gpu_choice::NodeRoom> free_;  // reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Consolidated, placement, "consolidated", "1.1",
                        "pack a job onto the fewest nodes, best-fitting the last one; with migrate, a job slowed by "
                        "spreading waits for lower-ranked jobs to move off a node (Gandiva's migration)",
                        kArgs)

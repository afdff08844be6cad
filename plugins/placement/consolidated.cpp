// consolidated: put a job on as few nodes as possible.
//
// If one node can take the whole job, use the one with the fewest GPUs to
// spare (best fit), leaving big blocks for big jobs. Otherwise fill the
// nodes with the most free GPUs first, which minimises the node count, and
// put the last piece on the best-fitting remaining node.
#include <algorithm>

#include <tessel/tessel.hpp>

namespace {

class Consolidated final : public tessel::PlacementPolicy {
 public:
  explicit Consolidated(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
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
      if (fits >= want.gpus && (!one_node || fits < free_[best].first)) {
        best = free_.size();
        one_node = true;
      }
      free_.push_back({fits, node.id});
    }
    if (one_node) {
      cluster.take(free_[best].second, want, want.gpus, choice.gpus);
      choice.reason = tessel::Reason("best fit on one node, {} GPUs left there", free_[best].first - want.gpus);
      return choice;
    }
    if (total < want.gpus) {
      choice.reason = tessel::Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
      return choice;
    }
    // Take the largest nodes whole while even the largest is too small for
    // what remains, then best-fit the rest: the fewest nodes possible.
    std::sort(free_.begin(), free_.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    int needed = want.gpus;
    std::size_t next = 0;
    while (needed > free_[next].first) {
      cluster.take(free_[next].second, want, free_[next].first, choice.gpus);
      needed -= free_[next].first;
      ++next;
    }
    best = next;
    for (std::size_t i = next + 1; i < free_.size() && free_[i].first >= needed; ++i)
      if (free_[i].first < free_[best].first) best = i;
    cluster.take(free_[best].second, want, needed, choice.gpus);
    choice.reason = tessel::Reason("spread over {} nodes, the fewest possible", next + 1);
    return choice;
  }

 private:
  std::vector<std::pair<int, tessel::NodeId>> free_;  // reused across calls
};

}  // namespace

TESSEL_PLUGIN(Consolidated, placement, "consolidated", "1.0",
              "pack a job onto the fewest nodes, best-fitting the last one")

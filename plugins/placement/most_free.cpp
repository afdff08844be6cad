// most_free: take GPUs from the node with the most free GPUs, then the next
// such node, until the job has enough (worst fit).
//
// Source: Pollux's simulator (petuum/adaptdl, branch osdi21-artifact),
// which places its Tiresias and Optimus baselines this way
// (simulator/tiresias.py and optimus.py: `free_gpus.most_common(1)` until
// the job has its GPUs). A job that fits on one node lands on the emptiest
// one, so small jobs break up whole nodes and later multi-GPU jobs may have
// to spread; `consolidated` keeps whole nodes for them instead.
//
// Ties go to the lowest-numbered node, as most_common keeps the nodes' order.
#include <tessel/tessel.hpp>

namespace {

class MostFree final : public tessel::PlacementPolicy {
 public:
  explicit MostFree(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    free_.clear();
    int total = 0;
    for (const tessel::Node& node : cluster.nodes()) {
      const int fits = cluster.fits_on(node.id, want);
      free_.push_back(fits);
      total += fits;
    }
    if (total < want.gpus) {
      choice.reason = tessel::Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
      return choice;
    }
    int needed = want.gpus;
    int nodes = 0;
    while (needed > 0) {
      std::size_t emptiest = 0;
      for (std::size_t n = 1; n < free_.size(); ++n)
        if (free_[n] > free_[emptiest]) emptiest = n;
      const int here = std::min(needed, free_[emptiest]);
      cluster.take(static_cast<tessel::NodeId>(emptiest), want, here, choice.gpus);
      free_[emptiest] = 0;
      needed -= here;
      ++nodes;
    }
    choice.reason = tessel::Reason("the emptiest nodes first: {} node(s)", nodes);
    return choice;
  }

 private:
  std::vector<int> free_;  // usable GPUs by node; reused across calls
};

}  // namespace

TESSEL_PLUGIN(MostFree, placement, "most_free", "1.0",
              "take GPUs from the node with the most free GPUs first (worst fit), as Pollux's simulator places "
              "its baselines")

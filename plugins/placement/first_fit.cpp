// first_fit: the lowest-numbered free GPUs, node after node, wherever they are.
#include <tessel/tessel.hpp>

namespace {

class FirstFit final : public tessel::PlacementPolicy {
 public:
  explicit FirstFit(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    int needed = want.gpus;
    int nodes = 0;
    for (const tessel::Node& node : cluster.nodes()) {
      const int here = std::min(needed, cluster.fits_on(node.id, want));
      if (here == 0) continue;
      cluster.take(node.id, want, here, choice.gpus);
      needed -= here;
      ++nodes;
      if (needed == 0) {
        choice.reason = tessel::Reason("first free GPUs, on {} node(s)", nodes);
        return choice;
      }
    }
    choice.gpus.clear();
    choice.reason = tessel::Reason("needs {} GPUs, {} free", want.gpus, want.gpus - needed);
    return choice;
  }
};

}  // namespace

TESSEL_PLUGIN(FirstFit, placement, "first_fit", "1.0", "take the lowest-numbered free GPUs, on any nodes")

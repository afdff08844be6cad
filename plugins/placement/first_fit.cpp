// first_fit: the lowest-numbered free GPUs, node after node, wherever they are.
#include <tessel/tessel.hpp>

namespace {

class FirstFit final : public tessel::PlacementPolicy {
 public:
  explicit FirstFit(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    tessel::PlacementChoice choice;
    const auto taken = tessel::gpu_choice::take_in_node_order(view.cluster(), want, choice.gpus);
    choice.reason = taken.gpus == want.gpus ? tessel::Reason("first free GPUs, on {} node(s)", taken.nodes)
                                            : tessel::Reason("needs {} GPUs, {} free", want.gpus, taken.gpus);
    return choice;
  }
};

}  // namespace

TESSEL_PLUGIN(FirstFit, placement, "first_fit", "1.0", "take the lowest-numbered free GPUs, on any nodes")

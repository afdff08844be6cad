// A placement that breaks its contract: it always answers GPU 0, even when
// that GPU is taken. The core must stop the run and name the plugin.
#include <tessel/tessel.hpp>

namespace {

class DoubleBooker final : public tessel::PlacementPolicy {
 public:
  explicit DoubleBooker(const tessel::PluginContext&) {}
  tessel::PlacementChoice place(const tessel::SchedulerView&, const tessel::JobState&,
                                const tessel::Resources& want) override {
    tessel::PlacementChoice choice;
    for (int i = 0; i < want.gpus; ++i) choice.gpus.push_back(static_cast<tessel::GpuId>(i));
    return choice;
  }
};

}  // namespace

TESSEL_PLUGIN(DoubleBooker, placement, "double_booker", "1.0", "test placement that double-books GPU 0")

// A plugin whose constructor throws, once plainly and once blaming an argument.
#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"threshold", tessel::ArgType::number, "1", "must be negative, to exercise ArgumentError"},
};

class Throwing final : public tessel::AllocationPolicy {
 public:
  explicit Throwing(const tessel::PluginContext& context) {
    if (context.args().number("threshold") == 1) throw std::runtime_error("cannot start: no license");
    if (context.args().number("threshold") >= 0)
      throw tessel::ArgumentError("threshold", "must be negative");
  }
  tessel::AllocationPlan allocate(const tessel::SchedulerView&) override { return {}; }
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Throwing, allocation, "throwing_factory", "1.0", "always fails to start", kArgs)

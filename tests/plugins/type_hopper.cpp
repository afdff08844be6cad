// A test policy that moves every job to another GPU type each round: in
// round k (the k-th multiple of the round length) it grants each active job
// its request on type k mod (number of types). It exercises the core's rule
// that a running job granted another type moves there.
#include <cmath>

#include <tessel/tessel.hpp>

namespace {

class TypeHopper final : public tessel::AllocationPolicy {
 public:
  explicit TypeHopper(const tessel::PluginContext&) {}
  bool time_sensitive() const override { return true; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const auto round = static_cast<long long>(std::floor(view.now() / view.settings().round_seconds + 1e-9));
    const auto types = static_cast<long long>(view.cluster().gpu_types().size());
    tessel::AllocationPlan plan;
    for (const tessel::JobState* job : view.active()) {
      tessel::Resources want = job->spec.request();
      want.gpu_type = static_cast<int>(round % types);
      plan.ranked.push_back({job->spec.id, want, tessel::Reason("round {}: type {}", round, want.gpu_type)});
    }
    return plan;
  }
};

}  // namespace

TESSEL_PLUGIN(TypeHopper, allocation, "type_hopper", "1.0", "test policy: every job on the next GPU type each round")

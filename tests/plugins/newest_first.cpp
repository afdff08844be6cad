// A preemptive test policy: the newest job has the highest priority. It
// exercises the core's preemption rule in end-to-end tests. It also marks its
// loading (load_marker.hpp): the control for the tests that prove a refused
// plugin never loads.
#include <algorithm>

#include <tessel/tessel.hpp>

#include "load_marker.hpp"

namespace {

const LoadMarker marker("newest_first");

class NewestFirst final : public tessel::AllocationPolicy {
 public:
  explicit NewestFirst(const tessel::PluginContext&) {}
  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::AllocationPlan plan;
    for (auto it = view.active().rbegin(); it != view.active().rend(); ++it)
      plan.ranked.push_back({(*it)->spec.id, (*it)->spec.request(), tessel::Reason("newest first")});
    return plan;
  }
};

}  // namespace

TESSEL_PLUGIN(NewestFirst, allocation, "newest_first", "1.0", "test policy: newest job first, preemptive")

// A test policy that lists only the queue: view.waiting(), newest first.
// With `keep = true` its plan keeps every running job (keep_running), as
// FIFO's does; with `keep = false` the running jobs are left unranked, so a
// waiting job that does not fit preempts them. Each call also checks that
// view.waiting() is exactly the waiting jobs of view.active(), in arrival
// order, and throws otherwise: a run with it fails if the core's list drifts.
#include <stdexcept>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"keep", tessel::ArgType::boolean, "true", "keep every running job (an incremental plan)"},
};

class QueueOnly final : public tessel::AllocationPolicy {
 public:
  explicit QueueOnly(const tessel::PluginContext& context) : keep_(context.args().boolean("keep")) {}
  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    std::vector<const tessel::JobState*> expected;
    for (const tessel::JobState* job : view.active())
      if (job->waiting()) expected.push_back(job);
    const std::vector<const tessel::JobState*> listed(view.waiting().begin(), view.waiting().end());
    if (listed != expected)
      throw std::logic_error("view.waiting() lists " + std::to_string(listed.size()) + " jobs, the active jobs " +
                             std::to_string(expected.size()) + " waiting ones");
    tessel::AllocationPlan plan;
    if (keep_) plan.keep_running = tessel::Reason("running; kept");
    for (auto it = view.waiting().rbegin(); it != view.waiting().rend(); ++it)
      plan.ranked.push_back({(*it)->spec.id, (*it)->spec.request(), tessel::Reason("newest waiting first")});
    return plan;
  }

 private:
  bool keep_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(QueueOnly, allocation, "queue_only", "1.0",
                        "test policy: ranks view.waiting() newest first; keep = true keeps running jobs", kArgs)

// fifo: first in, first out.
//
// Running jobs keep their GPUs (FIFO never preempts), then waiting jobs
// follow in arrival order. With `backfill = false` (the default) the queue
// stops at the first job that does not fit, as in YARN's capacity scheduler
// that Tiresias compares against; with `backfill = true` later jobs that fit
// start around it.
#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"backfill", tessel::ArgType::boolean, "false",
     "start later jobs that fit when the oldest waiting job does not"},
};

class Fifo final : public tessel::AllocationPolicy {
 public:
  explicit Fifo(const tessel::PluginContext& context)
      : backfill_(context.args().boolean("backfill")) {}

  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::AllocationPlan plan;
    plan.stop_at_first_unplaced = !backfill_;
    plan.ranked.reserve(view.active().size());
    for (const tessel::JobState* job : view.active())  // arrival order
      if (job->running())
        plan.ranked.push_back({job->spec.id, job->held(), tessel::Reason("running; FIFO never preempts")});
    for (const tessel::JobState* job : view.active())
      if (job->waiting())
        plan.ranked.push_back({job->spec.id, job->spec.request(),
                               tessel::Reason("arrived at {} s; served in arrival order", job->spec.arrival)});
    return plan;
  }

 private:
  bool backfill_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Fifo, allocation, "fifo", "1.0", "first in, first out by arrival time", kArgs)

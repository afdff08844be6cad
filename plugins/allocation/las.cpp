// las: least attained service first, preemptive.
//
// Source: M. Nuyens and A. Wierman, "The Foreground-Background queue: a
// survey", Performance Evaluation 65(3-4), 2008 (LAS, also called FB); with
// service counted in GPU-seconds it is the continuous 2D-LAS of Tiresias
// (NSDI'19, §3.2), which the `tiresias` plugin discretizes.
//
// Rule as implemented: every active job is ranked by JobState::attained_service,
// the least first, ties by arrival. Its unit follows `[scheduler]
// attained_service`: GPU-seconds (2D-LAS, the default) or seconds of running
// (classic LAS). Running jobs keep what they hold, waiting jobs ask for their
// request; a job that does not fit preempts lower-ranked running jobs (the
// core picks them, lowest first), and one that cannot fit even so is skipped.
//
// Simplification: LAS shares the server among the jobs tied at the least
// service; with rounds, tied jobs take turns instead, a round each, the
// earlier arrival first.
#include <algorithm>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

class Las final : public tessel::AllocationPolicy {
 public:
  explicit Las(const tessel::PluginContext&) {}

  // Running jobs gain service as time passes and fall behind waiting ones.
  bool time_sensitive() const override { return true; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    order_.assign(view.active().begin(), view.active().end());
    // view.active() is in arrival order; a stable sort keeps it among ties.
    std::stable_sort(order_.begin(), order_.end(), [](const tessel::JobState* a, const tessel::JobState* b) {
      return a->attained_service < b->attained_service;
    });
    const bool gpu_seconds = view.settings().service == tessel::ServiceUnit::gpu_seconds;
    tessel::AllocationPlan plan;
    plan.ranked.reserve(order_.size());
    for (const tessel::JobState* job : order_) {
      const double attained = job->attained_service;
      plan.ranked.push_back(
          {job->spec.id, tessel::allocation::current_or_requested(*job),
           gpu_seconds ? tessel::Reason("attained {~} GPU-s; the least attained service runs first", attained)
                       : tessel::Reason("attained {~} s of running; the least attained service runs first", attained)});
    }
    return plan;
  }

 private:
  std::vector<const tessel::JobState*> order_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN(Las, allocation, "las", "1.0", "least attained service first (GPU-seconds or seconds), preemptive")

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
    // The rank key is copied out of each job once, so the sort compares plain
    // numbers instead of chasing a JobState per comparison: ranking runs every
    // round over every active job. view.active() is in id (= arrival) order,
    // so ties by id are ties by arrival, and the key is unique.
    keys_.clear();
    keys_.reserve(view.active().size());
    for (const tessel::JobState* job : view.active()) keys_.push_back({job->attained_service, job->spec.id, job});
    std::sort(keys_.begin(), keys_.end(), [](const Key& a, const Key& b) {
      return a.attained != b.attained ? a.attained < b.attained : a.id < b.id;
    });
    const bool gpu_seconds = view.settings().service == tessel::ServiceUnit::gpu_seconds;
    tessel::AllocationPlan plan;
    plan.ranked.reserve(keys_.size());
    for (const Key& key : keys_)
      plan.ranked.push_back(
          {key.id, tessel::allocation::current_or_requested(*key.job),
           gpu_seconds ? tessel::Reason("attained {~} GPU-s; the least attained service runs first", key.attained)
                       : tessel::Reason("attained {~} s of running; the least attained service runs first",
                                        key.attained)});
    return plan;
  }

 private:
  struct Key {
    double attained;
    tessel::JobId id;
    const tessel::JobState* job;
  };
  std::vector<Key> keys_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN(Las, allocation, "las", "1.0", "least attained service first (GPU-seconds or seconds), preemptive")

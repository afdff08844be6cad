// las: least attained service first, preemptive.
//
// Source: M. Nuyens and A. Wierman, "The Foreground-Background queue: a
// survey", Performance Evaluation 65(3-4), 2008 (LAS, also called FB); with
// service counted in GPU-seconds it is the continuous 2D-LAS of Tiresias
// (NSDI'19, §3.2), which the `tiresias` plugin discretizes.
//
// Rule as implemented: every active job is ranked by its attained service
// (SchedulerView::attained_service), the least first, ties by arrival. Its
// unit follows `[scheduler] attained_service`: GPU-seconds (2D-LAS, the
// default) or seconds of running (classic LAS). Running jobs keep what they
// hold, waiting jobs ask for their request; a job that does not fit preempts
// lower-ranked running jobs (the core picks them, lowest first), and one that
// cannot fit even so is skipped.
// The plan is provisional (see allocate): it lists the waiting jobs alone,
// and the core asks for the whole one (allocate_whole) only in a round where
// one of them would preempt. The whole plan is incremental: the running jobs
// ranked ahead of every waiting job are kept without being listed. With
// `[scheduler] placement_each_round = "every_round"` the core places those
// kept jobs again in arrival order rather than by attained service, which
// may choose other GPUs for them.
//
// Simplification: LAS shares the server among the jobs tied at the least
// service; with rounds, tied jobs take turns instead, a round each, the
// earlier arrival first.
#include <algorithm>
#include <limits>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

class Las final : public tessel::AllocationPolicy {
 public:
  explicit Las(const tessel::PluginContext&) {}

  // Running jobs gain service as time passes and fall behind waiting ones.
  bool time_sensitive() const override { return true; }
  // It reads service through SchedulerView::attained_service, current without
  // rounds accounting every running job; so they need not (lazy progress).
  bool reads_progress() const override { return false; }

  // A provisional plan (AllocationPlan::provisional): the waiting jobs
  // alone, in order. It stands while they fit on free GPUs, which is most
  // rounds: an arrival with no service outranks every running job, and
  // otherwise every round would rank them all.
  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const bool gpu_seconds = view.settings().service == tessel::ServiceUnit::gpu_seconds;
    tessel::AllocationPlan plan;
    plan.keep_running = kept(gpu_seconds);
    plan.provisional = true;
    keys_.clear();
    for (const tessel::JobState* job : view.waiting()) keys_.push_back({job->attained_service, job->spec.id, job});
    rank(plan, gpu_seconds);
    return plan;
  }

  // The whole plan, incremental (AllocationPlan::keep_running): the running
  // jobs ranked ahead of every waiting job keep what they hold whatever their
  // order among themselves, for no waiting job can preempt them and the
  // core keeps them first. So they go unlisted, and a round with no waiting
  // job lists nothing; the plan lists the waiting jobs and the running jobs
  // any of them outranks, in the full order. The kept jobs' reason has the
  // kind (its words without the measurement) of the grant they were started
  // with, so the decision log, which records changes of kind, records
  // nothing new for them, as before.
  tessel::AllocationPlan allocate_whole(const tessel::SchedulerView& view) override {
    const bool gpu_seconds = view.settings().service == tessel::ServiceUnit::gpu_seconds;
    tessel::AllocationPlan plan;
    plan.keep_running = kept(gpu_seconds);
    // The waiting job ranked first: the least attained service, the earliest
    // arrival among ties. view.waiting() and view.active() are in id (=
    // arrival) order, so ties by id are ties by arrival and keys are unique.
    // A waiting job holds no GPUs and gains no service: its stored field is
    // what view.attained_service would add nothing to. Jobs this round
    // started after a provisional plan are still listed, and run now.
    Key first_waiting{std::numeric_limits<double>::infinity(), 0, nullptr};
    for (const tessel::JobState* job : view.waiting())
      if (job->waiting() && job->attained_service < first_waiting.attained)
        first_waiting = {job->attained_service, job->spec.id, job};
    keys_.clear();
    if (first_waiting.job != nullptr)
      for (const tessel::JobState* job : view.active()) {
        const Key key{view.attained_service(*job), job->spec.id, job};
        if (!job->running() || first_waiting < key) keys_.push_back(key);
      }
    rank(plan, gpu_seconds);
    return plan;
  }

 private:
  static tessel::Reason kept(bool gpu_seconds) {
    return gpu_seconds ? tessel::Reason(kGpuSeconds) : tessel::Reason(kSeconds);
  }

  // The plan's grants: keys_, least attained service first.
  void rank(tessel::AllocationPlan& plan, bool gpu_seconds) {
    std::sort(keys_.begin(), keys_.end());
    plan.ranked.reserve(keys_.size());
    for (const Key& key : keys_)
      plan.ranked.push_back({key.id, tessel::allocation::current_or_requested(*key.job),
                             gpu_seconds ? tessel::Reason(kGpuSeconds, key.attained)
                                         : tessel::Reason(kSeconds, key.attained)});
  }

  static constexpr const char* kGpuSeconds = "attained {~} GPU-s; the least attained service runs first";
  static constexpr const char* kSeconds = "attained {~} s of running; the least attained service runs first";

  struct Key {
    double attained;
    tessel::JobId id;
    const tessel::JobState* job;
    bool operator<(const Key& other) const {
      return attained != other.attained ? attained < other.attained : id < other.id;
    }
  };
  std::vector<Key> keys_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN(Las, allocation, "las", "1.0", "least attained service first (GPU-seconds or seconds), preemptive")

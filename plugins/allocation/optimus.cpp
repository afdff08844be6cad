// optimus: marginal-gain GPU allocation, after Optimus (Peng et al., "Optimus:
// An Efficient Dynamic Resource Scheduler for Deep Learning Clusters",
// EuroSys'18), the resource-allocation step of its dynamic scheduling.
//
// The rule, every round, over all active jobs:
//  1. Every job gets its minimum: `min_gpus` for an elastic job, its request
//     for a rigid one. Optimus starts each job with one worker and one
//     parameter server so that none starves. When even the minimums do not
//     fit, jobs are admitted shortest estimated remaining time (at their
//     minimum) first, ties by arrival, skipping those that no longer fit;
//     the rest wait. The paper assumes they fit; the order is ours, and is
//     also the order Blox's optimus sorts jobs in. With `minimums_order =
//     "arrival"` they are admitted in arrival order instead, as the Optimus
//     baseline of Pollux's simulator does (petuum/adaptdl osdi21-artifact,
//     simulator/optimus.py: one replica each, in job order, while GPUs last).
//  2. Each remaining GPU goes to the elastic job whose estimated remaining
//     time drops most when it gets one more GPU:
//        gain(n) = T(n) - T(n + 1),  T(n) = view.remaining_seconds(job, packed shape of n GPUs)
//     kept in a max-heap. A job
//     stops growing at `max_gpus` or when its gain is no longer positive (a
//     throughput model with a cross-node penalty makes that happen), as in
//     the paper. Equal gains go to the earlier arrival.
//  With `remaining_work = "by_epoch"`, T(n) prices the work left after the
//  epoch under way (the model's next rate change), and a token in the last
//  epoch, as Pollux's simulator does (simulator/optimus.py: remaining
//  iterations from get_iteration(batch size, job.epoch), which changes only
//  at epoch ends). Remaining work that falls continuously lets two jobs of
//  equal standing trade a spare GPU every round, each trade a restart; by
//  epoch, the ranking holds for an epoch.
//  A round costs O(jobs + GPUs log jobs), plus a sort of the jobs when the
//  minimums do not fit.
//
// Simplifications:
//  - The paper learns each job's convergence curve and resource-speed model
//    online; here the throughput model is the oracle for T(n), on the packed
//    shape (fewest nodes) that n GPUs would take.
//  - The paper divides the gain by the dominant-resource share of the task
//    added (a worker or a parameter server); here every step adds one GPU,
//    so that share is the same for every job and drops out.
//  - Task placement (Optimus's second step) is the placement plugin's.
//
// Where Blox's optimus (msr-fiddle/blox, schedulers/optimus.py) deviates:
// it sorts jobs by remaining time and hands out spare GPUs round-robin in
// that order, ignoring marginal gain and any maximum, and reads a
// `sched_load` environment variable that is not always set. We follow the
// paper: spare GPUs go by marginal gain, never past `max_gpus`.
//
// Ranking: the core realises the plan in rank order and resizes a running
// job in place, so jobs that shrink come first (they only free GPUs), then
// running jobs that keep their size, then those that grow, then new starts;
// jobs that get nothing come last, where the core preempts them first.
#include <algorithm>
#include <cmath>
#include <queue>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

using tessel::allocation::deny;

constexpr tessel::ArgSpec kArgs[] = {
    {"minimums_order", tessel::ArgType::string, "\"remaining_time\"",
     "when the minimums do not all fit, which jobs get theirs: shortest estimated remaining time first, or "
     "by arrival (Pollux's simulator)",
     "remaining_time|arrival"},
    {"remaining_work", tessel::ArgType::string, "\"continuous\"",
     "the work T(n) prices: what is left now, or what is left after the epoch under way (the model's next "
     "rate change), as Pollux's simulator counts it",
     "continuous|by_epoch"}};

// In its last epoch Pollux's Optimus counts 1 iteration left: some gain, far
// below any job's in an earlier epoch (its applications train for thousands
// of iterations or more), so such a job only grows on GPUs no other job
// gains from. A millionth of the job's work plays that part.
constexpr double kLastEpochShare = 1e-6;

class Optimus final : public tessel::AllocationPolicy {
 public:
  explicit Optimus(const tessel::PluginContext& context)
      : shortest_first_(context.args().string("minimums_order") == "remaining_time"),
        by_epoch_(context.args().string("remaining_work") == "by_epoch") {}

  // Remaining times shrink as jobs progress, so gains change between events.
  bool time_sensitive() const override { return true; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const tessel::ClusterState& cluster = view.cluster();
    const auto active = view.active();
    shares_.clear();
    shares_.reserve(active.size());
    long long minimums_milli = 0;
    for (const tessel::JobState* job : active) {
      const int minimum = job->spec.elastic() ? job->spec.min_gpus : job->spec.gpus;
      const double work = work_left(view, *job);
      shares_.push_back({job, work, minimum, remaining(view, *job, work, minimum)});
      minimums_milli += static_cast<long long>(minimum) * job->spec.gpu_milli;
    }
    long long free_milli = static_cast<long long>(cluster.total_gpus()) * 1000;

    // 1. Minimums; shortest remaining time first only when they do not all
    // fit (view.active() is in arrival order).
    if (minimums_milli > free_milli && shortest_first_)
      std::sort(shares_.begin(), shares_.end(), [](const Share& a, const Share& b) {
        return a.seconds != b.seconds ? a.seconds < b.seconds : a.job->spec.id < b.job->spec.id;
      });
    for (Share& share : shares_) {
      const long long need = static_cast<long long>(share.gpus) * share.job->spec.gpu_milli;
      share.admitted = need <= free_milli;
      if (share.admitted) free_milli -= need;
    }

    // 2. Spare GPUs by marginal gain.
    std::priority_queue<Step> steps;
    for (std::size_t i = 0; i < shares_.size(); ++i) {
      Share& share = shares_[i];
      if (!share.admitted || share.gpus >= share.job->spec.max_gpus) continue;
      steps.push({price_next(view, share), share.job->spec.id, i});
    }
    while (!steps.empty() && free_milli > 0) {
      const Step step = steps.top();
      steps.pop();
      Share& share = shares_[step.share];
      if (step.gain <= 0) break;  // the best gain left is none: nobody grows further
      if (share.job->spec.gpu_milli > free_milli) continue;
      free_milli -= share.job->spec.gpu_milli;
      ++share.gpus;
      share.seconds = share.next_seconds;
      share.next_gain = NAN;
      if (share.gpus >= share.job->spec.max_gpus) continue;
      steps.push({price_next(view, share), share.job->spec.id, step.share});
    }
    return rank(cluster);
  }

 private:
  struct Share {
    const tessel::JobState* job;
    double work;           // the remaining work T(n) prices
    int gpus;              // granted so far
    double seconds;        // estimated remaining time on `gpus` GPUs
    bool admitted = false;
    double next_seconds = NAN;  // remaining time on one more GPU
    double next_gain = NAN;     // what one more GPU would save; NaN at its maximum
  };
  struct Step {
    double gain;
    tessel::JobId job;
    std::size_t share;
    // Largest gain on top; equal gains to the earlier arrival.
    bool operator<(const Step& other) const { return gain != other.gain ? gain < other.gain : job > other.job; }
  };

  // The work T(n) prices. By epoch, as Pollux's simulator counts it: the work
  // after the epoch under way (get_iteration(batch, completion epoch) -
  // get_iteration(batch, job.epoch), the latter being the iterations done
  // once the epoch under way completes), and a token in the last epoch. A
  // model without epochs (its rate never changes with progress) counts
  // continuously.
  double work_left(const tessel::SchedulerView& view, const tessel::JobState& job) const {
    if (!by_epoch_ || !view.throughput().rate_depends_on_progress()) return job.remaining_work();
    const double epoch_end = view.throughput().next_rate_change(job.spec, job.executed_work);
    if (epoch_end < job.spec.total_work) return job.spec.total_work - epoch_end;
    return kLastEpochShare * job.spec.total_work;
  }

  static double remaining(const tessel::SchedulerView& view, const tessel::JobState& job, double work, int gpus) {
    return view.throughput().seconds_for(job.spec, work, view.cluster().packed_shape(job.spec, gpus));
  }

  // Prices `share`'s next GPU; returns its gain.
  static double price_next(const tessel::SchedulerView& view, Share& share) {
    share.next_seconds = remaining(view, *share.job, share.work, share.gpus + 1);
    share.next_gain = share.seconds - share.next_seconds;
    return share.next_gain;
  }

  tessel::AllocationPlan rank(const tessel::ClusterState& cluster) const {
    enum Group { shrink, keep, grow, start, denied, groups };
    auto group_of = [](const Share& share) {
      if (!share.admitted) return denied;
      if (!share.job->running()) return start;
      const int held = share.job->allocation.gpu_count();
      return share.gpus < held ? shrink : share.gpus == held ? keep : grow;
    };
    tessel::AllocationPlan plan;
    plan.ranked.reserve(shares_.size());
    for (int group = shrink; group < groups; ++group)
      for (const Share& share : shares_)
        if (group_of(share) == group) plan.ranked.push_back(grant(share, cluster));
    return plan;
  }

  tessel::Grant grant(const Share& share, const tessel::ClusterState& cluster) const {
    const tessel::JobSpec& spec = share.job->spec;
    if (!share.admitted)
      return deny(*share.job, shortest_first_
                                  ? tessel::Reason("needs at least {} GPUs; the minimums of jobs with less "
                                                   "remaining time fill the cluster's {} GPUs",
                                                   share.gpus, cluster.total_gpus())
                                  : tessel::Reason("needs at least {} GPUs; the minimums of earlier arrivals "
                                                   "fill the cluster's {} GPUs",
                                                   share.gpus, cluster.total_gpus()));
    tessel::Resources resources = spec.request();
    resources.gpus = share.gpus;
    tessel::Reason reason;
    if (!spec.elastic())
      reason = tessel::Reason("rigid: its request of {} GPUs; about {} s left", share.gpus, std::round(share.seconds));
    else if (std::isnan(share.next_gain))
      reason = tessel::Reason("{} GPUs, its maximum, by marginal gain; about {} s left", share.gpus,
                              std::round(share.seconds));
    else if (share.next_gain <= 0)
      reason = tessel::Reason("{} GPUs by marginal gain; about {} s left; one more would not make it faster",
                              share.gpus, std::round(share.seconds));
    else
      reason = tessel::Reason("{} GPUs by marginal gain; about {} s left; one more would save {} s, "
                              "less than the gains that took the cluster's GPUs",
                              share.gpus, std::round(share.seconds), std::round(share.next_gain));
    return {spec.id, resources, reason};
  }

  bool shortest_first_;
  bool by_epoch_;
  std::vector<Share> shares_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Optimus, allocation, "optimus", "1.2",
                        "Optimus (EuroSys'18): minimums first, then each spare GPU to the job whose remaining time "
                        "drops most",
                        kArgs)

// tiresias: discretized two-dimensional least attained service (2D-LAS).
//
// Paper: J. Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
// Learning", NSDI'19, §3.2 (2DAS, priority discretization, PROMOTEKNOB).
// Semantics follow the authors' simulator, SymbioticLab/Tiresias,
// simulator/run_sim.py `dlas_sim_jobs(gputime=True, ...)` (the `dlas-gpu`
// schedules) and simulator/jobs.py.
//
// Rule as implemented:
//   * A job's attained service is GPUs x executed time, in GPU-seconds,
//     whatever `[scheduler] attained_service` says (2D-LAS is defined on GPU
//     time). With `queue_thresholds_gpu_seconds = [T1, ..., Tn]` there are
//     n+1 queues; a job enters the top one and moves down as its service
//     crosses each threshold. discretized_queues.hpp gives the details,
//     including the starvation guard `promote_knob` and what a promotion
//     resets.
//   * Higher queues first. Within a queue, running jobs keep precedence over
//     waiting ones, and each group goes by arrival: the simulator keeps each
//     queue in the order jobs entered it and, after every pass, moves the
//     waiting jobs behind the running ones ("sort based on the job start
//     time"), so a job never preempts another job of its own queue.
//   * With `entry_order = true`, a queue keeps the order jobs entered it, as
//     the simulator's queue lists do: a job joins the back of a queue when it
//     arrives, is demoted into it or is promoted into it, and after every
//     round the jobs that then wait move behind the running ones, keeping
//     their order (the simulator's "sort based on the job start time"). A
//     job demoted while running so queues behind the jobs already waiting in
//     its new queue, and one preempted behind those still running. Without
//     it, running jobs go first and each group by arrival.
//   * With `running_first = false`, a queue is strictly in arrival order,
//     running or not, so an earlier job preempts later ones of its queue as
//     soon as it fits: the Tiresias baseline of Pollux's simulator
//     (petuum/adaptdl osdi21-artifact, simulator/tiresias.py), whose queues
//     keep the order jobs entered them.
//   * Running jobs keep what they hold; waiting jobs ask for their request.
//     A job that does not fit is skipped and later jobs may start, as in the
//     simulator's pass over the queues.
//   * With `selection = "greedy_by_count"`, the running set is chosen afresh
//     each round as the simulator does, down the queues by the cluster's GPU
//     count (discretized_queues.hpp, select_greedy_by_count): a running job
//     that no longer fits behind the jobs ahead is preempted, even while later
//     ones run. By default (`"ranked"`) the core starts jobs in rank order and
//     a waiting job that does not fit preempts the lowest-ranked running jobs
//     first, on the GPUs its placement needs.
//
// The plan is incremental under the default rules (running_first, no
// promote_knob, ranked selection; see allocate_keeping_running): the running
// jobs no waiting job outranks are kept without being listed, the others as
// before. With `[scheduler] placement_each_round = "every_round"` the core
// places those kept jobs again in arrival order rather than by queue, which
// may choose other GPUs for them (as for `las`).
//
// Simplifications and differences:
//   * On a clock, queues are re-evaluated at round boundaries, not at the
//     exact moment a job crosses a threshold; the plan's revisit_at is that
//     moment, for rounds at events (see discretized_queues.hpp).
//   * By default, among the waiting jobs of a queue we go by arrival; the
//     simulator goes by the order in which they entered the queue
//     (`entry_order`).
//   * The simulator's default queue set-up in jobs.py is three queues at
//     [3250, 7200] GPU-seconds, its README's example two queues at [3600];
//     we default to the latter.
#include <algorithm>
#include <limits>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>
#include <tessel/discretized_queues.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    tessel::discretized::kThresholdsArg, tessel::discretized::kPromoteKnobArg,
    {"running_first", tessel::ArgType::boolean, "true",
     "within a queue, running jobs before waiting ones (Tiresias's simulator); false: by arrival only, so "
     "an earlier job preempts later ones of its queue (Pollux's simulator)"},
    {"entry_order", tessel::ArgType::boolean, "false",
     "within a queue, the order jobs entered it (arrival, demotion, promotion), waiting jobs moved behind "
     "running ones after each round, as Tiresias's simulator's queue lists; needs running_first"},
    tessel::discretized::kSelectionArg};

// Where a job stands in its queue's list (entry_order).
struct QueuePlace {
  int queue = -1;  // -1: not yet in a queue
  std::size_t position = 0;
};

class Tiresias final : public tessel::AllocationPolicy {
 public:
  explicit Tiresias(const tessel::PluginContext& context)
      : queues_(context), running_first_(context.args().boolean("running_first")),
        entry_order_(context.args().boolean("entry_order")),
        greedy_by_count_(tessel::discretized::greedy_by_count(context)),
        keeps_running_(running_first_ && !entry_order_ && !greedy_by_count_ &&
                       context.args().number(tessel::discretized::kPromoteKnobArg.name) == 0),
        place_(context.job_slot<QueuePlace>()) {
    if (entry_order_ && !running_first_)
      throw tessel::ArgumentError("entry_order",
                                  "needs running_first = true: the simulator's queues put running jobs first");
  }

  // Jobs move between queues as they run and wait.
  bool time_sensitive() const override { return true; }
  // It reads GPU-seconds through SchedulerView::gpu_seconds
  // (discretized_queues.hpp), current without rounds accounting every running
  // job; so they need not (lazy progress). Except under the simulator's rules
  // (greedy_by_count), run with rounds at events: there rounds fall at
  // computed crossing moments, fractional seconds, where GPU time summed
  // once differs from the per-round sum in its last bit, and the published
  // figures of those runs would move.
  bool reads_progress() const override { return greedy_by_count_; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    // With a decision log the full plan: it logs each running job's queue and
    // service every round, where an incremental plan would log the kept jobs
    // with one reason (kKept). The decisions are the same either way.
    if (keeps_running_ && !view.settings().decisions_recorded) return allocate_keeping_running(view);
    tessel::AllocationPlan plan = entry_order_ ? allocate_in_entry_order(view) : allocate_running_first(view);
    if (greedy_by_count_) {
      tessel::discretized::select_greedy_by_count(view, plan.ranked, skipped_);
      plan.revisit_at = std::min(plan.revisit_at, queues_.revisit_after_selection(view, plan.ranked, view.now()));
    }
    return plan;
  }

 private:
  // Each job falls in a bucket: its queue, running jobs ahead of waiting
  // ones unless all go by arrival. view.active() is in arrival order, so a
  // counting sort (count each bucket, then fill each from its offset) keeps
  // arrival order within a bucket, and every grant is built once, in place:
  // this runs every round over every active job. Running jobs in queues up
  // to `kept_through` are read (revisit_at) but not listed: see
  // allocate_keeping_running; -1 lists every job.
  tessel::AllocationPlan allocate_running_first(const tessel::SchedulerView& view, int kept_through = -1) {
    const std::size_t bucket_count = 2 * static_cast<std::size_t>(queues_.count());
    offsets_.assign(bucket_count + 1, 0);
    standings_.clear();
    if (kept_through < 0) standings_.reserve(view.active().size());
    double revisit_at = std::numeric_limits<double>::infinity();
    for (const tessel::JobState* job : view.active()) {
      const tessel::discretized::Standing standing = queues_.update(view, *job);
      revisit_at = std::min(revisit_at, queues_.revisit_at(*job, standing, view.now()));
      if (job->running() && standing.queue <= kept_through) continue;
      const bool behind_running = running_first_ && !job->running();
      const std::size_t bucket = 2 * static_cast<std::size_t>(standing.queue) + (behind_running ? 1 : 0);
      ++offsets_[bucket + 1];
      standings_.push_back({job, bucket, standing});
    }
    tessel::AllocationPlan plan;
    plan.revisit_at = revisit_at;  // the next queue change, of any job, kept or listed
    fill_by_bucket(plan);
    return plan;
  }

  // An incremental plan (AllocationPlan::keep_running), for the default
  // rules (running jobs first, no starvation guard, ranked selection), under
  // which a round's plan is what allocate_running_first gives with the
  // running jobs of the top queues left unlisted. With running jobs first in
  // each queue, a running job is ranked ahead of every waiting job when its
  // queue is no lower than the highest queue any job waits in; no waiting job
  // can preempt it, and the core keeps it with what it holds. On Philly most
  // rounds have no waiting job at all, so a round lists nothing and the core
  // visits no running job. The running jobs are still read, each once: a job
  // enters its queue when first seen (Queues::update) and revisit_at is the
  // next crossing of any of them, as before.
  // The kept jobs go first in arrival order where the full plan has them by
  // queue, then arrival: the same jobs kept, none preempted, so nothing
  // changes, except under `[scheduler] placement_each_round = "every_round"`,
  // where the core places them again in that order.
  tessel::AllocationPlan allocate_keeping_running(const tessel::SchedulerView& view) {
    // The highest queue (least index) a job waits in; count(): none waits.
    // A waiting job gains no service, so this is its queue all round.
    int first_waiting_queue = queues_.count();
    for (const tessel::JobState* job : view.waiting())
      first_waiting_queue = std::min(first_waiting_queue, queues_.update(view, *job).queue);
    tessel::AllocationPlan plan = allocate_running_first(view, first_waiting_queue);
    plan.keep_running = tessel::Reason(kKept);
    return plan;
  }

  // plan.ranked: standings_ by bucket, each bucket in the order standings_
  // has it (arrival), by a counting sort over offsets_ (each bucket's count
  // at bucket + 1): every grant is built once, in place.
  void fill_by_bucket(tessel::AllocationPlan& plan) {
    for (std::size_t b = 1; b < offsets_.size(); ++b) offsets_[b] += offsets_[b - 1];
    plan.ranked.resize(standings_.size());
    for (const Placed& placed : standings_)
      plan.ranked[offsets_[placed.bucket]++] = {placed.job->spec.id,
                                                tessel::allocation::current_or_requested(*placed.job),
                                                queues_.reason(placed.standing)};
  }

  static constexpr const char* kKept = "running in a queue no waiting job is above; kept";

  struct Placed {
    const tessel::JobState* job;
    std::size_t bucket;
    tessel::discretized::Standing standing;
  };

  struct Listed {
    const tessel::JobState* job;
    int queue;
    bool entered;  // arrived, demoted or promoted since the last round: at the back
    tessel::Reason reason;
  };

  tessel::AllocationPlan allocate_in_entry_order(const tessel::SchedulerView& view) {
    double revisit_at = std::numeric_limits<double>::infinity();
    listed_.clear();
    for (const tessel::JobState* job : view.active()) {
      const tessel::discretized::Standing standing = queues_.update(view, *job);
      revisit_at = std::min(revisit_at, queues_.revisit_at(*job, standing, view.now()));
      QueuePlace& place = place_(job->slots);
      const bool entered = place.queue != standing.queue;
      place.queue = standing.queue;
      listed_.push_back({job, standing.queue, entered, queues_.reason(standing)});
    }
    // A job's running status now is what the last round left it with: the
    // simulator's reordering after its pass. Those that entered go at the
    // back, in arrival order (view.active()'s).
    std::stable_sort(listed_.begin(), listed_.end(), [&](const Listed& a, const Listed& b) {
      if (a.queue != b.queue) return a.queue < b.queue;
      if (a.entered != b.entered) return b.entered;
      if (a.entered) return false;
      if (a.job->running() != b.job->running()) return a.job->running();
      return place_(a.job->slots).position < place_(b.job->slots).position;
    });
    tessel::AllocationPlan plan;
    plan.revisit_at = revisit_at;
    plan.ranked.reserve(listed_.size());
    for (std::size_t i = 0; i < listed_.size(); ++i) {
      place_(listed_[i].job->slots).position = i;  // positions keep their order within each queue
      plan.ranked.push_back({listed_[i].job->spec.id, tessel::allocation::current_or_requested(*listed_[i].job),
                             listed_[i].reason});
    }
    return plan;
  }

  tessel::discretized::Queues queues_;
  bool running_first_;
  bool entry_order_;
  bool greedy_by_count_;
  bool keeps_running_;  // allocate_keeping_running
  tessel::Slot<QueuePlace> place_;
  std::vector<tessel::Grant> skipped_;  // reused across rounds (greedy_by_count)
  std::vector<Listed> listed_;  // reused across rounds
  std::vector<Placed> standings_;  // reused across rounds
  std::vector<std::size_t> offsets_;  // reused across rounds: where each bucket starts in the plan
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Tiresias, allocation, "tiresias", "1.3",
                        "Tiresias discretized 2D-LAS: queues by attained GPU-seconds, FIFO within a queue, "
                        "optional starvation guard",
                        kArgs)

// For allocation plugins: discretized priority queues on attained GPU
// service, with Tiresias's starvation guard. The `tiresias` (2D-LAS) and
// `gittins` (2D-Gittins) plugins build on them and differ only in how they
// order jobs within one queue.
//
// Tiresias (Gu et al., NSDI'19, §3.2 "Discretized 2DAS") replaces a job's
// continuous priority by one of K queues: a job enters the top queue and moves
// down a queue each time its attained service, GPUs x executed time, crosses
// the next threshold. The semantics below are those of the authors' simulator
// (SymbioticLab/Tiresias, simulator/run_sim.py, `dlas_sim_jobs`, and the job
// fields initialised in simulator/jobs.py, `move_to_runnable`):
//
//   * The service that places a job in a queue is GPU-seconds since the job
//     arrived or since its last promotion (the simulator's `executed_time`
//     times `num_gpu`; `executed_time` is zeroed by a promotion, while the
//     progress that decides completion is kept apart). We read it from
//     SchedulerView::gpu_seconds, whatever `[scheduler] attained_service`
//     says, because 2D-LAS is defined on GPU time; so the plugins read no
//     progress (Plugin::reads_progress) and the core need not account
//     every running job each round.
//   * Queue q holds the jobs whose service s satisfies T[q-1] <= s < T[q]
//     (the simulator demotes on `j_gt >= queue_limit[q]`).
//   * Starvation guard (the paper's PROMOTEKNOB): a waiting job in a lower
//     queue goes back to the top queue once the time it has waited reaches
//     knob x the time it has run. Both are counted since its arrival or last
//     promotion, summed over all its run and wait periods, not just the most
//     recent one: the simulator's `executed_time` and `last_pending_time`.
//     Waiting starts to count only once the job has run since then, so a
//     newly promoted job cannot be promoted again before it runs. Promotion
//     resets the service, the run time and the wait time to zero; the job's
//     progress is untouched. A knob of 0 turns the guard off, as in the
//     simulator's plain `dlas-gpu` and `dlas-gpu-gittins` schedules (its
//     `dlas-gpu-1`, `-2`, `-4`, ... variants set the knob).
//
// Rounds: on a clock (the default), queues are re-evaluated at round
// boundaries, whereas the simulator schedules an event at the exact moment a
// job crosses a threshold or becomes due for promotion; a crossing is seen up
// to one round late, and a job that crosses several thresholds in one round
// lands directly in the right queue. `revisit_at` gives those moments, which
// the plugins pass on as AllocationPlan::revisit_at: with `[simulation]
// rounds = "events"` the simulator holds a round exactly then, as Tiresias's
// does (its `next_job_jump`, taken over the jobs running after its pass:
// with `selection = "greedy_by_count"`, revisit_after_selection adds the
// jobs the pass starts and stops). The JobState fields `waiting_since` and `last_run_seconds`
// cover only the latest period and so are not what Tiresias compares.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessel/allocation.hpp"
#include "tessel/rng.hpp"
#include "tessel/stages.hpp"

namespace tessel::discretized {

inline constexpr tessel::ArgSpec kThresholdsArg = {
    "queue_thresholds_gpu_seconds", tessel::ArgType::number_list, "[3600]",
    "attained GPU-seconds at which a job moves down one queue; N increasing positive thresholds make N+1 "
    "queues"};
inline constexpr tessel::ArgSpec kPromoteKnobArg = {
    "promote_knob", tessel::ArgType::number, "0",
    "a waiting job in a lower queue returns to the top queue once it has waited this many times as long as "
    "it has run since its arrival or last promotion; 0 turns the guard off"};

inline constexpr tessel::ArgSpec kSelectionArg = {
    "selection", tessel::ArgType::string, "\"ranked\"",
    "ranked: the core starts jobs down the queues, a waiting job that does not fit preempting the lowest-ranked "
    "running jobs first; greedy_by_count: Tiresias's simulator, which re-selects the running set each round down "
    "the queues, a job in if its GPUs fit the cluster's GPU count left, running jobs left out preempted",
    "ranked|greedy_by_count"};

// Where a job stands this round.
struct Standing {
  int queue = 0;             // 0 is the top queue
  double service = 0;        // GPU-seconds since arrival or the last promotion
  bool since_promotion = false;
  bool promoted_now = false;
  double waited_seconds = 0;    // when promoted_now: the wait that triggered it
  double executed_seconds = 0;  // when promoted_now: the run time it was compared with
};

// What the queues remember of one job, in its slot.
struct Book {
  bool seen = false;
  double checked_at = 0;           // when the job was last looked at
  double gpu_seconds_at_check = 0;
  double service_origin = 0;       // JobState::gpu_seconds at the last promotion
  double executed_seconds = 0;     // run time since arrival or the last promotion
  double waited_seconds = 0;       // wait time since then, counted once it has run
  int promotions = 0;
};

class Queues {
 public:
  explicit Queues(const tessel::PluginContext& context)
      : thresholds_(context.args().numbers(kThresholdsArg.name)),
        promote_knob_(context.args().number(kPromoteKnobArg.name)),
        book_(context.job_slot<Book>()) {
    for (std::size_t i = 0; i < thresholds_.size(); ++i) {
      if (!(thresholds_[i] > 0))
        throw tessel::ArgumentError(kThresholdsArg.name,
                                    "thresholds must be positive, found " + number(thresholds_[i]));
      if (i > 0 && !(thresholds_[i] > thresholds_[i - 1]))
        throw tessel::ArgumentError(kThresholdsArg.name, "thresholds must increase, found " + number(thresholds_[i]) +
                                                             " after " + number(thresholds_[i - 1]));
    }
    if (!(promote_knob_ >= 0))
      throw tessel::ArgumentError(kPromoteKnobArg.name, "must be 0 (off) or positive, found " + number(promote_knob_));
  }

  int count() const { return static_cast<int>(thresholds_.size()) + 1; }

  // Accounts for the time since the job was last looked at, demotes or
  // promotes it, and says where it stands. Call once per job per round.
  // GPU-seconds are read through SchedulerView::gpu_seconds, current without
  // the core accounting running jobs each round (Plugin::reads_progress).
  Standing update(const tessel::SchedulerView& view, const tessel::JobState& job) const {
    const double now = view.now();
    const double gpu_seconds = view.gpu_seconds(job);
    Book& book = book_(job.slots);
    if (!book.seen) {
      book.seen = true;
      book.checked_at = now;
      book.gpu_seconds_at_check = gpu_seconds;
      book.service_origin = gpu_seconds;
    }
    if (promote_knob_ == 0) {
      // Without the guard nothing reads the run and wait times, and the
      // service is counted from the job's first sight: this runs for every
      // active job every round.
      Standing standing;
      standing.service = gpu_seconds - book.service_origin;
      standing.queue = queue_of(standing.service);
      return standing;
    }
    // Jobs start, stop and change size only at rounds, so a job running now
    // held its current GPUs since the last look. A waiting one may have run
    // part of the time (a crash between rounds); its request converts its
    // GPU-seconds back to seconds.
    const tessel::Resources gpus = tessel::allocation::current_or_requested(job);
    const double gpu_share = gpus.gpus * (gpus.gpu_milli / 1000.0);
    const double elapsed = now - book.checked_at;
    const double ran = std::clamp((gpu_seconds - book.gpu_seconds_at_check) / gpu_share, 0.0, elapsed);
    book.executed_seconds += ran;
    if (book.executed_seconds > 0) book.waited_seconds += elapsed - ran;
    book.checked_at = now;
    book.gpu_seconds_at_check = gpu_seconds;

    Standing standing;
    standing.service = gpu_seconds - book.service_origin;
    standing.queue = queue_of(standing.service);
    if (promote_knob_ > 0 && standing.queue > 0 && job.waiting() && book.executed_seconds > 0 &&
        book.waited_seconds >= promote_knob_ * book.executed_seconds) {
      standing.promoted_now = true;
      standing.waited_seconds = book.waited_seconds;
      standing.executed_seconds = book.executed_seconds;
      book.service_origin = gpu_seconds;
      book.executed_seconds = 0;
      book.waited_seconds = 0;
      ++book.promotions;
      standing.service = 0;
      standing.queue = 0;
    }
    standing.since_promotion = book.promotions > 0;
    return standing;
  }

  // When the job's standing next changes with nothing else happening: a
  // running job's service reaches the threshold of its queue, a waiting one's
  // wait reaches the promotion knob. Infinity if never. Call after `update`
  // in the same round.
  double revisit_at(const tessel::JobState& job, const Standing& standing, double now) const {
    if (job.running()) return crossing_at(standing, job.allocation.gpu_count() * (job.allocation.gpu_milli / 1000.0), now);
    if (job.waiting()) return promotion_at(job, standing, now);
    return kNever;
  }

  // `selection = "greedy_by_count"`: the jobs this round's plan starts and
  // stops, known from `ranked` once select_greedy_by_count has chosen, change
  // their standing's next moment too: a job started now crosses its queue's
  // threshold while no event happens, and a job stopped now may become due
  // for promotion. revisit_at, read before the selection, saw them waiting
  // and running; without this the crossing of a job started at a round with
  // no running job near a threshold would wait for the next arrival or
  // completion. Call after `update` in the same round.
  double revisit_after_selection(const tessel::SchedulerView& view, std::span<const tessel::Grant> ranked,
                                 double now) const {
    double at = kNever;
    for (const tessel::Grant& grant : ranked) {
      const tessel::JobState& job = *view.jobs()[grant.job];
      const bool runs = grant.resources.gpus > 0;
      if (runs == job.running()) continue;  // revisit_at saw it as it will be
      const Book& book = book_(job.slots);
      Standing standing;
      standing.service = view.gpu_seconds(job) - book.service_origin;
      standing.queue = queue_of(standing.service);
      at = std::min(at, runs ? crossing_at(standing, tessel::allocation::gpu_count(grant.resources), now)
                             : promotion_at(job, standing, now));
    }
    return at;
  }

  // "queue 2 of 2: attained 5400 GPU-s >= 3600", or why the job was promoted.
  tessel::Reason reason(const Standing& s) const {
    using tessel::Reason;
    if (s.promoted_now)
      return Reason("promoted to queue 1: waited {} s >= {} x {} s run since arrival or last promotion",
                    s.waited_seconds, promote_knob_, s.executed_seconds);
    const int shown = s.queue + 1;
    if (count() == 1) return Reason("one queue: attained {} GPU-s", s.service);
    if (s.queue == 0)
      return s.since_promotion
                 ? Reason("queue 1 of {}: {} GPU-s since promotion < {}", count(), s.service, thresholds_[0])
                 : Reason("queue 1 of {}: attained {} GPU-s < {}", count(), s.service, thresholds_[0]);
    const double crossed = thresholds_[s.queue - 1];
    return s.since_promotion
               ? Reason("queue {} of {}: {} GPU-s since promotion >= {}", shown, count(), s.service, crossed)
               : Reason("queue {} of {}: attained {} GPU-s >= {}", shown, count(), s.service, crossed);
  }

 private:
  // A service within kSlackGpuSeconds below a threshold has crossed it: a
  // round held at the computed crossing time (revisit_at) sees the service
  // summed from floating-point rates, which may fall short of the threshold
  // by a rounding error. The slack is far below any service a round can
  // accrue (a microsecond of one GPU), so it decides nothing else.
  static constexpr double kSlackGpuSeconds = 1e-6;
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // A crossing closer than the clock can tell apart from now still comes after it.
  // (Only a crossing not after now needs nextafter, a libm call: this runs
  // for every running job every round.)
  static double after_now(double at, double now) { return at > now ? at : std::nextafter(now, kNever); }

  // When a job running from now on `gpu_share` GPUs reaches its queue's threshold.
  double crossing_at(const Standing& standing, double gpu_share, double now) const {
    if (standing.queue + 1 >= count()) return kNever;
    return after_now(now + (thresholds_[standing.queue] - standing.service) / gpu_share, now);
  }

  // When a job waiting from now on becomes due for promotion.
  double promotion_at(const tessel::JobState& job, const Standing& standing, double now) const {
    if (promote_knob_ <= 0 || standing.queue == 0) return kNever;
    const Book& book = book_(job.slots);
    if (book.executed_seconds <= 0) return kNever;
    return after_now(now + (promote_knob_ * book.executed_seconds - book.waited_seconds), now);
  }
  int queue_of(double service) const {
    return static_cast<int>(std::upper_bound(thresholds_.begin(), thresholds_.end(), service + kSlackGpuSeconds) -
                            thresholds_.begin());
  }

  static std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", value);
    return text;
  }

  std::vector<double> thresholds_;
  double promote_knob_;
  tessel::Slot<Book> book_;
};

// `selection = "greedy_by_count"`: Tiresias's simulator's pass over its
// queues (run_sim.py, `dlas_sim_jobs`): at each event `CLUSTER.empty_infra()`
// sets `free_gpu` to the cluster's whole GPU count, as if nothing ran, and
// down the queues in order each job is selected if `free_gpu >= num_gpu`,
// which then drops by its GPUs, and is skipped otherwise; selected waiting
// jobs start, running jobs not selected are preempted. It counts GPUs, it
// places nothing, so a large running job that no longer fits behind the jobs
// ahead of it is preempted while smaller ones after it run.
//
// Here `ranked`, a plan in queue order, keeps the selected grants in their
// order and moves the others to its end, denied with the count as reason.
// Ranked last, the denied running jobs are the first ones the core preempts
// for a selected job; the selected jobs fit the cluster by count, so with a
// placement that takes any free GPUs (`consolidated`, `first_fit`) every
// selected job is placed and no denied one can keep its GPUs. `[scheduler]
// left_out = "stop"` stops them outright.
inline bool greedy_by_count(const tessel::PluginContext& context) {
  return context.args().string("selection") == "greedy_by_count";
}

inline void select_greedy_by_count(const tessel::SchedulerView& view, std::vector<tessel::Grant>& ranked,
                                   std::vector<tessel::Grant>& skipped) {
  const double total = view.cluster().total_gpus();  // on nodes that are up: the simulator's num_gpu
  double left = total;
  skipped.clear();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    Grant& grant = ranked[i];
    const double gpus = tessel::allocation::gpu_count(grant.resources);
    if (gpus <= left) {
      left -= gpus;
      if (kept != i) ranked[kept] = std::move(grant);
      ++kept;
      continue;
    }
    Grant denied{grant.job, grant.resources,
                 Reason("skipped: needs {} GPUs, {} of the cluster's {} left by count after the jobs ahead",
                        gpus, left, total)};
    denied.resources.gpus = 0;
    skipped.push_back(std::move(denied));
  }
  ranked.resize(kept);
  ranked.insert(ranked.end(), std::make_move_iterator(skipped.begin()), std::make_move_iterator(skipped.end()));
}

}  // namespace tessel::discretized

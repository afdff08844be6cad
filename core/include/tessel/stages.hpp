// The four stage interfaces, and the decisions they return.
//
// A round runs admission -> allocation -> placement -> elasticity. Each stage
// reads a SchedulerView and returns decisions; the core checks them against
// the contracts below, applies them, and may record them with their reasons
// (`tessel explain`). A plugin that breaks a contract stops the run with an
// error naming the plugin.
#pragma once

#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "tessel/job.hpp"
#include "tessel/plugin.hpp"
#include "tessel/reason.hpp"
#include "tessel/view.hpp"

namespace tessel {

// ---------------------------------------------------------------- admission

enum class AdmissionVerdict : unsigned char { admit, hold, reject };

struct AdmissionDecision {
  JobId job;
  AdmissionVerdict verdict;
  Reason reason;
};

// Which newly arrived jobs enter the queue now?
class TESSEL_VISIBLE AdmissionPolicy : public Plugin {
 public:
  // Called once per round while view.pending() is not empty. Decide for any
  // of the pending jobs, at most once each; jobs left out are held until the
  // next round. Rejection is final.
  virtual std::vector<AdmissionDecision> admit(const SchedulerView& view) = 0;
};

// --------------------------------------------------------------- allocation

// A job the policy wants to run, with what it should get. `resources.gpus`
// is 0 (do not run it now) or within [min_gpus, max_gpus] of the job; for a
// rigid job that means exactly its request. `gpu_milli` must be the job's own.
// A `gpu_type` other than kAnyGpuType restricts placement to that type; a
// running job on another type moves.
//
// Space sharing: a grant whose `share_with` names another job runs on that
// job's GPUs, beside it, each at the rate the throughput model gives the
// group (ThroughputModel::rate_colocated). The job named must be ranked
// earlier in the same plan, be granted as many GPUs, not share_with a third
// job itself, and both must ask for whole GPUs; a group holds at most the
// model's max_colocated() jobs. A running job whose group this plan changes
// (joins, leaves or swaps partners) is stopped and placed again.
struct Grant {
  JobId job;
  Resources resources;
  Reason reason;
  JobId share_with = kNoJob;
};

struct AllocationPlan {
  // Highest priority first. Active jobs missing from the list are not wanted
  // this round: they keep running until a ranked job needs their GPUs.
  std::vector<Grant> ranked;
  // When true, once a ranked job cannot be placed no job after it is started
  // (FIFO without backfill). Running jobs after it keep running.
  bool stop_at_first_unplaced = false;
  // The earliest time at which this plan may change with nothing else
  // happening (no arrival, completion or failure): say, when a running job's
  // attained service crosses a queue threshold. Infinity: only events change
  // it. Read only when the simulator runs rounds at events
  // (`[simulation] rounds = "events"`), where it is when the next round with
  // no event behind it is held; it must then be later than view.now().
  double revisit_at = std::numeric_limits<double>::infinity();
  // An incremental plan: when set, every running job that `ranked` does not
  // list keeps what it holds, with this reason, ranked before all of
  // `ranked` in arrival order, exactly as if listed so (FIFO's running
  // jobs). A plan then lists only the jobs whose grants may change (with
  // view.waiting(), the queue), and a round costs what the queue costs, not
  // what every running job costs.
  std::optional<Reason> keep_running;
  // A provisional plan (with keep_running): it lists the jobs that may
  // start (for LAS, the queue) and keeps every running job it does not list,
  // leaving unsaid where those rank among the listed ones. That matters only
  // to victims: the plan stands while every listed job fits as it asks on
  // free GPUs, which is most rounds, even where a waiting job outranks every
  // running one. Where a listed job would need more than the free GPUs, or a
  // rule or the decision log looks at every running job, the core asks
  // AllocationPolicy::allocate_whole for the plan that ranks them, and places
  // that one from where the provisional one stopped; the round's revisit_at
  // is then the whole plan's.
  bool provisional = false;
};

// Which jobs should run, with how many GPUs (and CPUs, memory), in what order?
class TESSEL_VISIBLE AllocationPolicy : public Plugin {
 public:
  // Called once per round. Ranks any subset of view.active(), each job once.
  virtual AllocationPlan allocate(const SchedulerView& view) = 0;
  // Only for a policy whose allocate() returns provisional plans: this
  // round's whole plan, not provisional, ranking the running jobs that a
  // listed job outranks too. The core calls it at most once a round, after
  // allocate(), maybe after placing a prefix of the provisional plan: the
  // jobs that prefix started run now, though view.waiting() still lists
  // them. It must rank the other jobs as it would have at the round's start,
  // and agree with the provisional plan, which the core checks: its listed
  // jobs in the same order with the same grants (a started one may be left
  // out), the next one to place included; no other job granted GPUs unless
  // it runs and keeps what it holds, and no shared GPUs (Grant::share_with).
  virtual AllocationPlan allocate_whole(const SchedulerView& view) {
    (void)view;
    throw std::logic_error("made a provisional plan without overriding AllocationPolicy::allocate_whole");
  }
};

// ---------------------------------------------------------------- placement

struct PlacementChoice {
  std::vector<GpuId> gpus;  // empty: does not fit now
  Reason reason;

  bool placed() const { return !gpus.empty(); }
};

// Which exact GPUs?
//
// The core walks the ranked plan and asks `place` for each job that should
// start or change size. When a job does not fit, the core releases running
// jobs of lower rank one at a time (lowest first) and asks again; it preempts
// only the jobs whose GPUs the final choice uses, and none at all if the job
// still does not fit. So `place` is called on hypothetical states and must
// depend only on its arguments and the view, not on how often it is called.
// When fewer GPUs are entirely free than a whole-GPU job needs, the core
// answers "does not fit" itself, without calling `place`.
class TESSEL_VISIBLE PlacementPolicy : public Plugin {
 public:
  // Choose exactly `want.gpus` distinct GPUs, each with at least
  // `want.gpu_milli` free, on nodes that are up, of `want.gpu_type` if it
  // names one (and with room for the CPU and memory share if the job
  // declares one); or none, with the reason. ClusterState::fits_on and
  // take() answer all of this per node.
  virtual PlacementChoice place(const SchedulerView& view, const JobState& job,
                                const Resources& want) = 0;
};

// --------------------------------------------------------------- elasticity

struct ResizeProposal {
  JobId job;
  int gpus;          // within [min_gpus, max_gpus]
  JobLayout layout;  // how to use them; all zero: ask arrange()
  Reason reason;
};

// Should a running elastic job grow or shrink, how should a job use the GPUs
// it gets, and what does a change cost? Every hook is called only by the
// core, on the state after placement.
class TESSEL_VISIBLE ElasticityPolicy : public Plugin {
 public:
  // Called once per round after placement. Proposes new sizes (or layouts at
  // the same size) for running elastic jobs, each at most once. Placement
  // realizes them from free GPUs, shrinks first; a proposal that does not
  // fit is dropped, with the reason.
  virtual std::vector<ResizeProposal> resize(const SchedulerView& view) = 0;

  // How `job` should use `allocation`: its batch size and parallelism
  // (Pollux picks the goodput-best batch size, Tenplex the fastest
  // tensor/pipeline split that fits in memory). Called whenever a job gets
  // GPUs: a start, a restart or a resize that did not name a layout.
  virtual JobLayout arrange(const SchedulerView& view, const JobState& job, const Allocation& allocation) {
    (void)view, (void)allocation;
    return job.allocation.layout;
  }

  // Seconds of no progress when a running `job` moves from `from` to `to`,
  // whichever stage asked for the change. GPUs of `from` on nodes that are
  // down were lost, with the state they held.
  virtual double reconfiguration_seconds(const SchedulerView& view, const JobState& job,
                                         const Allocation& from, const Allocation& to) const {
    (void)job, (void)from, (void)to;
    return view.settings().restart_seconds;
  }

  // Some of `job`'s GPUs were lost (their node failed or left, and is down
  // in the view); it still holds `remaining`. Return true to keep it running
  // on those (the core checks [min_gpus, max_gpus] and charges
  // reconfiguration_seconds), false to stop it and queue it again. Called
  // between rounds.
  virtual bool keep_after_loss(const SchedulerView& view, const JobState& job, const Allocation& remaining) {
    (void)view, (void)job, (void)remaining;
    return false;
  }
};

}  // namespace tessel

// The scheduler core: it owns every JobState and the ClusterState, runs the
// admission -> allocation -> placement -> elasticity round, checks each
// plugin's decisions against its stage's contract, and applies them.
//
// Runners (the simulator, the real-cluster daemon) drive it: they submit
// arriving jobs, report progress and completions, call run_round at round
// boundaries, and carry out what the round decided (start, stop and resize
// processes, or schedule simulated completions).
//
// Preemption is decided here, once, for every placement plugin: a running
// job is preempted only if that lets a higher-ranked job be placed, and only
// if the job's GPUs are actually needed (see PlacementPolicy in stages.hpp).
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/errors.hpp"
#include "plugins/composition.hpp"
#include "scheduler/decision_log.hpp"
#include "scheduler/job_store.hpp"
#include "tessel/cluster.hpp"
#include "tessel/job.hpp"
#include "tessel/lab.hpp"
#include "tessel/throughput.hpp"
#include "tessel/view.hpp"

namespace tessel {

struct ResizeOutcome {
  JobId job;
  Allocation from;
  Allocation to;
  double cost_seconds;  // no progress for this long, by the elasticity plugin's model
};

// What one round changed. The core has already updated JobState and
// ClusterState; runners act on these lists.
struct RoundOutcome {
  std::vector<JobId> started;  // launched, or relaunched after a preemption
  std::vector<JobId> preempted;
  std::vector<ResizeOutcome> resized;
  std::size_t admitted = 0;
  std::size_t rejected = 0;
  // A fork's first round left its pending jobs to the next round's admission.
  bool admission_deferred = false;
  // The allocation plan's revisit_at: when it may change with no event.
  double revisit_at = std::numeric_limits<double>::infinity();

  bool changed() const {
    return !started.empty() || !preempted.empty() || !resized.empty() || admitted || rejected ||
           admission_deferred;
  }
};

// What losing a node did to the jobs on it.
struct NodeLoss {
  std::vector<JobId> stopped;         // waiting again
  std::vector<ResizeOutcome> shrunk;  // running on their other GPUs
};

class Scheduler {
 public:
  Scheduler(ComposedScheduler plugins, ClusterState cluster,
            std::shared_ptr<const ThroughputModel> model, SchedulerSettings settings,
            DecisionLog* log = nullptr);

  // A copy of this scheduler's state run by other plugins, for what-if
  // simulation: every job and node is copied with its slots, and the new
  // plugins, with a slot registry of their own, start afresh (slots.hpp). It
  // records no decisions and offers no lab.
  std::unique_ptr<Scheduler> fork(ComposedScheduler plugins) const;

  // The lab plugins reach through their view (lab.hpp); null by default.
  void set_lab(PolicyLab* lab) { lab_ = lab; }
  // What happens to the jobs running when a round begins ([scheduler]
  // left_out and placement_each_round); forks keep them.
  void set_round_rules(RoundRules rules) { rules_ = rules; }
  // From the next round on, `policy` decides admission (owned by the caller,
  // who keeps it alive); `name` labels its decisions.
  void use_admission(AdmissionPolicy& policy, std::string name);

  // A job arrives. The core gives it the next id and rejects it at once if it
  // asks for more GPUs than the whole cluster has (unless the cluster grows).
  JobState& submit(JobSpec spec, double now);

  // On real nodes the cluster grows as agents register: a job larger than
  // today's cluster then waits instead of being rejected at arrival.
  void expect_growing_cluster() { growing_cluster_ = true; }

  // The runner reports a running job's progress at `now`; attained service
  // and GPU time grow with the time it held its GPUs.
  // Inline: the simulator reports every running job's progress each round.
  void report_progress(JobId id, double executed_work, double now) {
    JobState& job = *all_[id];
    accrue(job, now);
    job.executed_work = std::min(executed_work, job.spec.total_work);
  }

  // The runner reports every running job's progress at `now` in one pass,
  // `work(job)` giving its executed work: the simulator, before each round.
  // The same pass drops the jobs that ended from the active list (compact()),
  // and the round at `now` does not account the running jobs again.
  template <class Work>
  void report_running_progress(double now, Work&& work) {
    auto kept = active_.begin();
    for (JobState* job : active_) {
      if (job->done()) continue;
      if (job->running()) {
        const double executed = work(std::as_const(*job));
        accrue(*job, now);
        job->executed_work = std::min(executed, job->spec.total_work);
      }
      *kept++ = job;
    }
    active_.erase(kept, active_.end());
    needs_compaction_ = false;
    accounted_all_at_ = now;
  }

  // Lazy progress: when no plugin reads a running job's progress
  // (ComposedScheduler::reads_progress), the simulator skips
  // report_running_progress and calls this instead: the round at `now`
  // accounts nobody. A running job's executed work, service and GPU time are
  // linear in time between the moments its run changes, so they are brought
  // up to date (settle) only there: it stops, is resized or shrunk, or the
  // runner reports it. For 100k jobs on Philly's 2,490 GPUs that pass was
  // over half the instructions of a run.
  void defer_running_progress(double now) { accounted_all_at_ = now; }
  // Whether a plugin deciding now (admission as use_admission set it) may
  // read a running job's progress.
  bool reads_progress() const { return plugins_.reads_progress() || admission_->reads_progress(); }
  // Where settle() takes a running job's executed work at `now` from (the
  // simulator's rates); unset (the daemon): what the runner last reported.
  // The source must be idempotent at one time: asked twice at `now`, it
  // answers the same.
  using ProgressSource = std::function<double(const JobState&, double now)>;
  void set_progress_source(ProgressSource source) { progress_source_ = std::move(source); }

  // A job ends (finished or failed). A running job's GPUs are freed; a job
  // that is not running leaves its queue (a user cancels it, or a daemon
  // recovering from a restart learns that it ended meanwhile).
  // Its GPUs are free from `now`; its finish is `now` too, or `work_done_at`
  // (not after `now`) when the runner held the GPUs past the moment its work
  // was done (`completion = "exact-held"`, as Gavel's simulator records it).
  void complete(JobId id, double now, JobStatus status = JobStatus::finished,
                std::optional<double> work_done_at = std::nullopt);
  // A running job loses its GPUs without the scheduler choosing it (the job
  // crashed): it waits again, as a preempted job. After a crash
  // (`failed_attempt`) its next launch starts a new attempt.
  void interrupt(JobId id, double now, bool failed_attempt = false);
  // A waiting job is not placed before `until` (a grant to it waits, and
  // blocks no later job): the real-cluster daemon's backoff between a failed
  // attempt and the next, so that retries do not follow each other at once.
  void hold_until(JobId id, double until);

  // A node fails or leaves, and the node goes down. Each job on it keeps
  // running on its other GPUs if it is elastic, stays within its range and
  // the elasticity plugin agrees (keep_after_loss); the others wait again.
  NodeLoss lose_node(NodeId node, double now);
  // A node joins the cluster, up; its id is the next one.
  NodeId add_node(const NodeSpec& spec);
  // A node that was down is up again, with every GPU free.
  void repair_node(NodeId node);

  RoundOutcome run_round(double now);

  // Recovery, for a runner that keeps its jobs across its own restarts (the
  // real-cluster daemon). `restore` re-creates a job with the id, spec and
  // counters it had; jobs must be restored in id order, before any submit.
  // A job that was running comes back waiting (as preempted): nobody holds
  // GPUs until `adopt` says where it still runs.
  JobState& restore(const JobState& saved);
  // A waiting job turns out to hold `allocation` all along: it is running
  // again, in the same attempt, without a round deciding it.
  void adopt(JobId id, Allocation allocation, double now);
  // A waiting job's run turns out to have ended unfinished while nobody
  // watched (its processes were lost or failed while the daemon was down):
  // its next launch starts a new attempt.
  void end_attempt(JobId id);

  // Only the core changes the cluster: runners report nodes through the
  // calls above.
  const ClusterState& cluster() const { return cluster_; }
  const SchedulerSettings& settings() const { return settings_; }
  const ThroughputModel& model() const { return *model_; }
  const ComposedScheduler& plugins() const { return plugins_; }

  std::size_t job_count() const { return all_.size(); }
  JobState& job(JobId id) { return *all_[id]; }
  const JobState& job(JobId id) const { return *all_[id]; }
  std::span<JobState* const> jobs() const { return all_; }
  // A run's end: hands each job to `take` in id order and frees it after,
  // so that the rows made of them do not sit beside every job. The
  // scheduler holds no jobs after; nothing but its destruction may follow.
  template <class Take>
  void release_jobs(Take&& take) {
    std::vector<Book>().swap(books_);
    for (auto* list : {&active_, &pending_, &waiting_, &requeued_, &round_running_, &victim_order_, &victims_})
      std::vector<JobState*>().swap(*list);
    std::vector<JobState*>().swap(all_);
    std::vector<double>().swap(accounted_until_);
    storage_.release(std::forward<Take>(take));
  }
  // Admitted, not done, in arrival order.
  std::span<JobState* const> active();
  std::span<JobState* const> pending();
  std::size_t running_count() const { return running_; }

  // Space sharing (Grant::share_with): the jobs sharing `id`'s GPUs now;
  // empty when it runs alone.
  std::span<const JobId> partners(JobId id) const { return books_[id].partners; }
  // The running jobs whose partners changed, without a start or stop of
  // their own, since the last call (a partner joined or left): a runner
  // re-reads their rates.
  std::vector<JobId> take_regrouped() { return std::exchange(regrouped_, {}); }

 private:
  struct Book {
    double run_started = 0;
    std::uint64_t admission_in = 0;  // round in which admission decided on it
    std::uint64_t ranked_in = 0;     // round in which the plan ranked it
    std::size_t rank = 0;
    std::uint64_t protected_in = 0;  // round in which it was placed or kept
    std::uint64_t reclaimable_in = 0;  // round in which its GPUs count in reclaimable_gpus_
    int reclaimable_gpus = 0;
    bool new_attempt = true;         // the next launch starts an attempt
    bool listed_waiting = false;     // it has an entry in waiting_ (stale while it runs)
    double held_until = 0;           // hold_until: not placed before then
    std::vector<JobId> partners;     // the jobs sharing its GPUs now
  };

  SchedulerView view(double now);
  void accrue(JobState& job, double now) {
    double& accounted_until = accounted_until_[job.spec.id];
    const double elapsed = now - accounted_until;
    if (!job.running() || elapsed <= 0) return;
    const double gpus = held_gpus(job.allocation);
    job.gpu_seconds += elapsed * gpus;
    job.attained_service += service_gained(elapsed, gpus, settings_.service);
    if (!books_[job.spec.id].partners.empty()) job.shared_seconds += elapsed;
    accounted_until = now;
  }
  // Brings a running job's progress, service and GPU time up to `now`,
  // before its run changes (see defer_running_progress). A job launched at
  // `now` has made no progress yet, and its runner does not know its run
  // (the simulator starts it after the round): the source is not asked.
  void settle(JobState& job, double now) {
    if (!job.running()) return;
    if (progress_source_ && books_[job.spec.id].run_started < now)
      job.executed_work = std::min(progress_source_(std::as_const(job), now), job.spec.total_work);
    accrue(job, now);
  }
  void compact();
  // The job waits (admitted, preempted, restored): it joins waiting_ when
  // the next view is made (a view made before keeps its list whole), unless
  // the entry it had before it ran is still there, in place.
  void enqueue(JobState& job);

  void admit(const SchedulerView& view, RoundOutcome& outcome);
  void place_plan(const SchedulerView& view, const AllocationPlan& plan, RoundOutcome& outcome);
  // Whether jobs share GPUs this round: groups already sharing, or a plan's
  // grant naming a host (Grant::share_with).
  bool shares_gpus(const AllocationPlan& plan) const;
  // Whether a rule, the decision log or shared GPUs look at every running
  // job, which an incremental plan leaves unlisted.
  bool looks_at_every_running_job(const AllocationPlan& plan) const;
  // AllocationPolicy::allocate_whole, checked; its revisit_at is the round's.
  AllocationPlan whole_plan(const SchedulerView& view, RoundOutcome& outcome);
  // A provisional plan stopped at its job `stopped`, which needs more than
  // the free GPUs: places the rest of the round by the whole plan.
  void place_whole_from(const SchedulerView& view, const AllocationPlan& provisional, std::size_t stopped,
                        RoundOutcome& outcome);
  // AllocationPolicy::allocate_whole's contract: `whole` agrees with the
  // provisional plan that stopped at `stopped`.
  void check_agrees(const AllocationPlan& provisional, std::size_t stopped, const AllocationPlan& whole);
  // Checks a plan's grants and stamps each job's rank for the preemption order.
  void stamp_ranks(const AllocationPlan& plan);
  // The running jobs `plan`'s placements may preempt this round, and the
  // GPUs they hold (round_running_, reclaimable_gpus_).
  void gather_victims(const AllocationPlan& plan);
  // A running job a higher-ranked job may preempt this round.
  void may_be_victim(JobState& job);
  // Places `plan`'s jobs in rank order, skipping those in `walked` (sorted).
  // Provisional: stops at the first job that would need more than the free
  // GPUs (a start that does not fit on them, or a resize) and returns its
  // index; else places all and returns plan.ranked.size().
  std::size_t walk_plan(const SchedulerView& view, const AllocationPlan& plan, bool provisional,
                        RoundOutcome& outcome, std::span<const JobId> walked = {});
  // An incremental plan (keep_running) with every running job it keeps
  // listed, for the rules that look at every running job anyway.
  AllocationPlan with_kept_listed(const AllocationPlan& plan);
  // RoundRules: stops the running jobs the plan gives no GPUs; with
  // place_every_round, releases the others' GPUs for placing them again.
  void stop_left_out(const SchedulerView& view, const AllocationPlan& plan, RoundOutcome& outcome);
  // RoundRules::place_every_round: places a running job (holding nothing in
  // the cluster) again; it runs on, moves, or stops.
  void place_again(const SchedulerView& view, JobState& job, const Grant& grant, RoundOutcome& outcome);
  void apply_resizes(const SchedulerView& view, std::vector<ResizeProposal> proposals,
                     RoundOutcome& outcome);

  // Asks placement for `job`; if it does not fit and `may_preempt`, frees
  // unprotected running jobs of lower rank until it does. Returns the GPUs or none.
  PlacementChoice place(const SchedulerView& view, JobState& job, const Resources& want,
                        bool may_preempt, RoundOutcome& outcome);
  PlacementChoice ask_placement(const SchedulerView& view, const JobState& job,
                                const Resources& want);
  void launch(const SchedulerView& view, JobState& job, const Resources& want, std::vector<GpuId> gpus,
              const Reason& reason, RoundOutcome& outcome);
  // Opens a run period: the job holds `allocation` and runs from `now`
  // (launched by a round, or adopted from a node that kept it running);
  // `shared`: beside the whole-GPU jobs that hold those GPUs.
  void begin_run(JobState& job, Allocation allocation, double now, bool shared = false);
  // Space sharing. Splits the groups that a plan no longer asks for (one of
  // each such pair stops) and stops sharing jobs whose grant moves them.
  void split_groups(const SchedulerView& view, const AllocationPlan& plan, RoundOutcome& outcome);
  void split_off(const SchedulerView& view, JobState& job, const std::string& why, RoundOutcome& outcome);
  // Starts `job` on the GPUs of the job its grant shares with, or says why not.
  void join_group(const SchedulerView& view, JobState& job, const Grant& grant, RoundOutcome& outcome);
  // `job`'s run ends: its partners run on without it.
  void leave_group(JobState& job, double now);
  // Ends a run period (releasing the job's GPUs, or not when the caller already has).
  void stop(JobState& job, double now, JobStatus status);
  void end_run(JobState& job, double now, JobStatus status);
  // Moves a running job to `want` (and `layout`, or what arrange() says when
  // it is all zero); keeps it as it was when placement finds no room.
  bool resize(const SchedulerView& view, JobState& job, const Resources& want, const JobLayout& layout,
              bool may_preempt, const Reason& reason, RoundOutcome& outcome);

  // Records a decision of the stage's plugin, or of the core itself when
  // `by_core` (rejections at arrival, preemptions, head-of-line blocking).
  // A running job keeps (or got) its GPUs this round: no later job may take them.
  // Inline, as the next three: a round calls them for every job it ranks.
  void protect(JobState& job) {
    unreclaimable(job);
    books_[job.spec.id].protected_in = round_;
  }
  // The GPU type of a non-empty allocation (an allocation is of one type).
  int gpu_type_of(const Allocation& held) const { return cluster_.node(cluster_.gpu(held.gpus.front()).node).type; }
  // Whether `held` already is what `want` grants: as many GPUs, the CPUs,
  // memory, and the type asked for (if any).
  bool grants_held(const Allocation& held, const Resources& want) const {
    const bool right_type = want.gpu_type == kAnyGpuType || held.gpus.empty() || gpu_type_of(held) == want.gpu_type;
    return want.gpus == held.gpu_count() && want.cpus == held.cpus && want.mem_gb == held.mem_gb && right_type;
  }
  // Its GPUs stop counting as reclaimable by preemption this round.
  void unreclaimable(JobState& job) {
    Book& book = books_[job.spec.id];
    if (book.reclaimable_in != round_) return;
    reclaimable_gpus_ -= book.reclaimable_gpus;
    book.reclaimable_in = 0;
  }

  void record(double now, JobId job, PluginKind stage, std::string_view code, const Reason& reason,
              bool by_core = false) {
    if (log_ != nullptr && log_->enabled()) log(now, job, stage, code, reason, by_core);
  }
  void log(double now, JobId job, PluginKind stage, std::string_view code, const Reason& reason,
           bool by_core);
  // A stage's plugin broke its contract (`what` it did), or threw.
  [[noreturn]] void broken(PluginKind stage, const std::string& what) const;
  // What the elasticity plugin answers, checked: a layout is none (all 0)
  // or positive sizes whose parallel degrees fit on `gpus`; a cost is
  // finite and >= 0 (an endless one never ends the run).
  JobLayout arranged(const SchedulerView& v, double now, const JobState& job, const Allocation& allocation) const;
  double reconfiguration_cost(const SchedulerView& v, double now, const JobState& job, const Allocation& from,
                              const Allocation& to) const;
  void check_layout(PluginKind stage, const JobState& job, const JobLayout& layout, int gpus) const;
  [[noreturn]] void threw(PluginKind stage, double now, const std::exception& error) const;
  // Calls a stage's plugin; what it throws is reported as threw() says.
  template <class Call>
  decltype(auto) calling(PluginKind stage, double now, Call&& call) const {
    try {
      return call();
    } catch (const PluginContractError&) {
      throw;  // a fork's plugin (what-if simulation), reported already
    } catch (const UserError&) {
      throw;
    } catch (const Interrupted&) {
      throw;  // a fork's hosted code, stopped by the user
    } catch (const std::exception& e) {
      threw(stage, now, e);
    }
  }
  // The plugin deciding a stage now, its name, and both with where its
  // hosted code is, for messages.
  const Plugin& stage_plugin(PluginKind stage) const;
  std::string_view stage_plugin_name(PluginKind stage) const;
  std::string plugin_named(PluginKind stage) const;

  ComposedScheduler plugins_;
  AdmissionPolicy* admission_;  // plugins_.admission unless use_admission() changed it
  std::string admission_name_;
  ClusterState cluster_;
  std::shared_ptr<const ThroughputModel> model_;
  SchedulerSettings settings_;
  RoundRules rules_;
  DecisionLog* log_;
  PolicyLab* lab_ = nullptr;

  JobStore storage_;              // stable addresses
  std::vector<JobState*> all_;    // by id
  std::vector<Book> books_;       // by id
  // By id: until when a running job's service and GPU time are counted
  // (accrue). Apart from Book, for views to read (SchedulerView::attained_service).
  std::vector<double> accounted_until_;
  std::vector<JobState*> active_;
  std::vector<JobState*> pending_;
  // The active jobs that wait, in id order. It changes only when a view is
  // made: entries of jobs that ran or ended since are dropped
  // (waiting_stale_), and the jobs that began to wait join (requeued_).
  std::vector<JobState*> waiting_;
  std::vector<JobState*> requeued_;
  bool waiting_stale_ = false;
  // During placement: the jobs running when the round began, and the GPUs
  // they hold that a preemption could still free. They keep the preemption
  // search linear in running jobs, and skip it when it cannot succeed.
  std::vector<JobState*> round_running_;
  // place_whole_from: the jobs the provisional plan walked, sorted.
  std::vector<JobId> walked_;
  // check_agrees: the provisional plan's jobs, (id, index) sorted.
  std::vector<std::pair<JobId, std::size_t>> listed_;
  int reclaimable_gpus_ = 0;
  // round_running_ in preemption order (lowest priority first), sorted at
  // the round's first preemption search; and that search's victims.
  std::vector<JobState*> victim_order_;
  std::uint64_t victim_order_round_ = 0;
  std::vector<JobState*> victims_;
  bool needs_compaction_ = false;
  bool growing_cluster_ = false;
  std::size_t sharing_ = 0;         // running jobs with partners
  std::vector<JobId> regrouped_;    // take_regrouped()
  std::size_t running_ = 0;
  std::uint64_t round_ = 0;
  // report_running_progress accounted every running job up to this time.
  double accounted_all_at_ = -std::numeric_limits<double>::infinity();
  ProgressSource progress_source_;
  // Between this round's admission and its end: a fork made now (what-if
  // simulation from a plugin's call) must not admit again in its first round.
  bool admitted_this_round_ = false;
};

}  // namespace tessel

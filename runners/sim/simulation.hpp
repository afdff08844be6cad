// The simulated cluster: a discrete-event simulation that drives the
// scheduler core with a workload.
//
// Events are job arrivals, completions and crashes, cluster changes (nodes
// added, removed, failing, repaired) and round boundaries; time jumps from
// one to the next. Between events a running job progresses at the rate the
// throughput model gives its allocation, so completion times are exact (or,
// with `completion = "round"`, held until the end of their round; with
// "exact-held", recorded exact while the GPUs are held to the round's end). Rounds
// run only while there is something to decide: when the composed scheduler is
// time-insensitive and a round changed nothing, the next round waits for the
// next event.
//
// A simulation also forks itself for what-if questions (tessel/lab.hpp): the
// copy runs other policies forward from the current state.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "config/experiment.hpp"
#include "engine/errors.hpp"
#include "plugins/registry.hpp"
#include "results/run_sink.hpp"
#include "results/store.hpp"
#include "scheduler/decision_log.hpp"
#include "scheduler/scheduler.hpp"
#include "tessel/rng.hpp"
#include "workloads/workload.hpp"

namespace tessel {

class Simulation {
 public:
  // Composes the scheduler, builds the cluster and the workload (with
  // `model` in place of the configured one when given: a model in C++ that
  // no configuration names). Throws ConfigError, TraceError or
  // PluginLoadError (all UserError).
  Simulation(const ExperimentConfig& config, PluginRegistry& registry,
             std::shared_ptr<const ThroughputModel> model = nullptr);
  ~Simulation();

  // Runs until every job is done, or nothing is left to happen: only jobs
  // that never end (infinite duration) still running and jobs no change
  // could ever place still waiting. Such a run has settled (see settled());
  // time-sensitive policies, drifting rates and random node failures do not
  // keep it going. `stop` is polled between events; when it becomes true,
  // throws Interrupted. Once it has returned, the jobs live on only in the
  // results (their states are freed as their rows are made): a simulation
  // runs once.
  RunResults run(const std::atomic<bool>* stop = nullptr);

  // Called after every round with the core's state: for invariant checks
  // in tests, and for watching a run.
  using RoundObserver = std::function<void(double now, const Scheduler&, const RoundOutcome&)>;
  void observe_rounds(RoundObserver observer) { observer_ = std::move(observer); }

  // The lab plugins reach through their view (tessel/lab.hpp); benchmarks
  // and tests use it directly, between rounds or from a round observer.
  PolicyLab& lab();
  // A copy of this simulation's state, to be run by `composition` from the
  // last round on (what-if). It shares the workload and the jobs that are
  // done with this simulation, so it must not outlive it.
  std::unique_ptr<Simulation> fork(const SchedulerConfig& composition) const;

  // A finite workload's jobs; 0 for a workload without end (endless()).
  std::size_t job_count() const { return job_count_; }
  bool endless() const { return stream_.has_value(); }
  // What the workload left out or changed, for the user.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  // Same-time events are handled in this order: completions free GPUs,
  // failures and cluster changes take effect, then the round decides.
  // A rate change (the job's progress reached the model's next_rate_change)
  // comes right after completions.
  enum class EventKind : unsigned char { completion, rate_change, job_crash, cluster_change, node_failure, node_repair };
  struct Event {
    double time;
    EventKind kind;
    std::uint64_t sequence;   // ties: first scheduled, first handled
    std::uint32_t subject;    // job, node, or index into the cluster events
    std::uint32_t generation;  // stale when its counter (JobProgress, node_generation_) moved on
    bool operator>(const Event& other) const {
      if (time != other.time) return time > other.time;
      if (kind != other.kind) return kind > other.kind;
      return sequence > other.sequence;
    }
  };
  struct JobProgress {
    double rate = 0;            // work per second while not paused
    double synced_at = 0;       // executed_work is exact at this time
    double paused_until = 0;    // restart or reconfiguration overhead
    double run_started = 0;     // checkpoints count from here
    double work_at_run_start = 0;
    std::uint32_t run = 0;         // a new run period invalidates its crash and completion events
    std::uint32_t completion = 0;  // a new rate invalidates its completion and rate-change events
    double next_change = 0;        // progress of the pending rate-change event
    double work_done_at = 0;       // when its work is done at its current rate (before rounding to a round end)
    bool has_run = false;

    void stop() {
      ++run;
      ++completion;
    }
  };

  // The scheduler settles a running job's executed work from its rate here
  // (Scheduler::set_progress_source); rounds leave it to that when no plugin
  // reads progress (progress_deferred).
  void use_progress_source();
  bool progress_deferred() const;
  void push(double time, EventKind kind, std::uint32_t subject, std::uint32_t generation);
  void handle(const Event& event);
  void sync(JobId id, double now);
  // The job's executed work at `now` at its current rate; it counts as synced
  // then. Inline: a round asks it for every running job.
  double synced_work(const JobState& job, double now) {
    JobProgress& p = progress_[job.spec.id];
    const double from = std::max(p.synced_at, p.paused_until);
    p.synced_at = now;
    return now > from ? job.executed_work + p.rate * (now - from) : job.executed_work;
  }
  void start(JobId id, double now, double pause_seconds);
  // The job's rate on what it holds: the model's, or with whole iterations
  // ([simulation] progress) the whole iterations that rate completes in a
  // round, spread over the round.
  double rate_of(const JobState& job) const;
  // Schedules the job's completion at its current rate, and the point where
  // the model says its rate changes next, if that comes first.
  void schedule_completion(JobId id, double now);
  void schedule_rate_change(JobId id, double now);
  // `time`, or the nearest whole second not before `now` when [simulation]
  // rate_change_times = "whole_seconds".
  double on_time_grid(double now, double time) const;
  // Re-reads the job's rate (its progress may have moved it to another
  // epoch); if it changed, its completion is rescheduled at the new rate.
  void rerate(JobId id, double now);
  // Space sharing: re-reads the rates of jobs whose partners changed.
  void rerate_regrouped(double now);
  void lose_progress_since_checkpoint(JobId id, double now);
  // A node fails (crash: progress since the last checkpoint is lost) or
  // leaves (graceful: nothing is lost); its jobs shrink or wait again.
  void lose_node(NodeId node, double now, bool crash);
  void record_resize(double now, const ResizeOutcome& resize);
  void schedule_node_failure(NodeId node, double now);
  void request_round(double now);
  void round(double now);
  void accrue_capacity(double now);
  bool work_left();
  // The next job to arrive; null when none will.
  const JobSpec* upcoming();
  // progress = "whole_iterations" needs the model to size the job's iterations.
  void require_iteration_size(const JobSpec& job) const;
  // A stream's tracked jobs have all arrived and are done.
  bool tracked_done();
  // When a stream's run gives up on its tracked jobs (give_up_hours after
  // the last of them arrived); never before that one arrived, or without a limit.
  double give_up_time() const;
  // Nothing is left to arrive, some job runs, and every running job never
  // ends (infinite remaining work): running changes nothing any more, so
  // only an event (a repair, a planned cluster change) could let a waiting
  // job start. How such a run ends: see round() and advance().
  bool settled();
  // A planned cluster change, or (with `repairs`) a node repair, is pending.
  bool cluster_may_change(bool repairs) const;
  // Handles every event up to `until`; returns false once nothing is left to do.
  bool advance(double until, const std::atomic<bool>* stop);
  // Tells the sink how the run ended (its jobs, decisions and totals) and
  // takes what it gathered; the scheduler's jobs are freed as it goes.
  RunResults collect(double end_time);

  class Lab;
  // A copy of this simulation's state, run by `plugins` (what-if).
  Simulation(const Simulation& origin, ComposedScheduler plugins);
  // What `composition` would do from now on.
  Forecast forecast(const SchedulerConfig& composition, const ForecastOptions& options);

  const ExperimentConfig& config_;
  PluginRegistry* registry_;
  // A finite workload's jobs in arrival order, kJobBlock to a block. A block
  // is dropped once all its jobs have arrived, as the scheduler then holds
  // their specs: a run does not hold each spec twice (216 bytes a job).
  // Forks share the blocks they have still to reach.
  static constexpr std::size_t kJobBlock = 4096;
  std::vector<std::shared_ptr<const std::vector<JobSpec>>> job_blocks_;
  std::size_t job_count_ = 0;
  // A workload without end: its jobs are made as they arrive, and none once
  // every tracked one is done (the run ends there). Forks copy it.
  std::optional<JobStream> stream_;
  std::optional<JobSpec> upcoming_;  // the stream's next job, made once the run looks at it
  JobId tracked_done_below_ = 0;     // every tracked job below this id is done (a stream's)
  bool stopped_at_tracked_ = false;
  bool gave_up_ = false;             // ... at [workload] give_up_hours, with tracked jobs left
  std::vector<std::string> notes_;
  DecisionLog log_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<JobProgress> progress_;
  std::size_t next_arrival_ = 0;  // into job_blocks_
  std::size_t arrivals_end_ = 0;  // jobs from here on never arrive (a forecast without foresight; a stream's end)
  std::vector<Event> events_;  // min-heap
  std::uint64_t sequence_ = 0;
  std::vector<std::uint32_t> node_generation_;  // invalidates a removed node's failures
  std::vector<NodeId> dormant_failures_;  // nodes whose failures were put off while the run had settled
  Rng failure_rng_;
  BatchSink sink_;  // the run's samples and resizes as it goes; the rest at its end
  RoundObserver observer_;
  double next_round_;
  bool ran_ = false;  // run() was called: it frees the jobs at its end
  double last_round_ = -1;
  std::uint64_t idle_rounds_ = 0;  // consecutive rounds that changed nothing with nothing running
  std::uint64_t handled_ = 0;      // events handled, rounds and arrivals included
  double capacity_gpu_seconds_ = 0;
  double capacity_since_ = 0;
  double end_time_ = 0;            // of the last job event
  std::unique_ptr<Lab> lab_;       // null in forks
};

// Composes the scheduler a simulation of `config` would, and lets it go: its
// plugins found, each the one its stage names, their arguments checked.
// Throws ConfigError, as the simulation would before running.
void check_scheduler(const ExperimentConfig& config, PluginRegistry& registry);

// Runs one experiment and stores it: the run row ('running', written as the
// simulation starts, once `store` is open), then every result row and
// 'complete' in one transaction. On failure or interruption the run is
// marked so and keeps no rows. Raising `stop` stops the simulation; it is
// raised here when the run's row cannot be written, whose error is then the
// one thrown. Returns the run id.
std::int64_t run_simulation(const ExperimentConfig& config, PluginRegistry& registry,
                            const OpeningStore& store, RunInfo info, std::atomic<bool>& stop);

}  // namespace tessel

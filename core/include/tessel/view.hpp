// SchedulerView: everything a plugin may look at during a round, read-only.
//
// The same view is built by the simulator and by the real-cluster daemon, so
// a policy cannot tell which one it runs in.
#pragma once

#include <span>

#include "tessel/cluster.hpp"
#include "tessel/job.hpp"
#include "tessel/throughput.hpp"

namespace tessel {

class PolicyLab;  // lab.hpp

// What attained service counts: GPU-seconds (Tiresias's 2D-LAS) or plain
// seconds of running (classic LAS).
enum class ServiceUnit : unsigned char { gpu_seconds, seconds };

// The service a job holding `gpus` GPUs gains in `elapsed` seconds of
// running: the one formula for the core's accounting and for
// SchedulerView::attained_service.
inline double service_gained(double elapsed, double gpus, ServiceUnit unit) {
  return unit == ServiceUnit::gpu_seconds ? elapsed * gpus : elapsed;
}
// GPUs a running job holds, a share of a GPU counted as its fraction.
inline double held_gpus(const Allocation& allocation) {
  return allocation.gpu_count() * (allocation.gpu_milli / 1000.0);
}

struct SchedulerSettings {
  double round_seconds = 300;
  ServiceUnit service = ServiceUnit::gpu_seconds;
  // Whether the run keeps a decision log (`[output] decisions`), set by the
  // core. Where it does, a policy whose incremental plan
  // (AllocationPlan::keep_running) would log other reasons for the jobs it
  // keeps than its full plan gives them may rank every job, so that the log
  // says the same either way (tiresias). Decisions must not depend on it.
  bool decisions_recorded = false;
  // Modelled seconds of no progress when a job restarts after a preemption
  // or a resize. Set by the simulator; 0 on real nodes, where a restart costs
  // what it really costs.
  double restart_seconds = 0;
};

class SchedulerView {
 public:
  SchedulerView(const SchedulerSettings& settings, const ClusterState& cluster,
                const ThroughputModel& throughput, std::span<JobState* const> all_jobs,
                std::span<JobState* const> pending, std::span<JobState* const> active,
                std::span<JobState* const> waiting, double now, PolicyLab* lab = nullptr,
                std::span<const double> accounted_until = {})
      : settings_(settings), cluster_(cluster), throughput_(throughput), all_(all_jobs),
        pending_(pending), active_(active), waiting_(waiting), now_(now), lab_(lab),
        accounted_until_(accounted_until) {}

  double now() const { return now_; }
  const SchedulerSettings& settings() const { return settings_; }
  const ClusterState& cluster() const { return cluster_; }
  const ThroughputModel& throughput() const { return throughput_; }

  // Jobs that arrived and await admission, in arrival order.
  std::span<const JobState* const> pending() const { return pending_; }
  // Admitted jobs that are not done (queued, running, preempted), in arrival order.
  std::span<const JobState* const> active() const { return active_; }
  // The active jobs that wait (queued or preempted), in arrival order: for a
  // policy that ranks only these, without walking every running job.
  std::span<const JobState* const> waiting() const { return waiting_; }
  // Any job the core knows, by id; all of them, done ones included, by id.
  const JobState& job(JobId id) const { return *all_[id]; }
  std::span<const JobState* const> jobs() const { return all_; }

  // Seconds `job` still needs on `shape`, by the throughput model (an oracle
  // in simulation, an estimate on real nodes).
  double remaining_seconds(const JobState& job, const Shape& shape) const {
    return throughput_.seconds_for(job.spec, job.remaining_work(), shape);
  }

  // `job`'s attained service at now(): JobState::attained_service plus what
  // it gained running since the core last accounted it. Current even in a
  // run whose rounds do not account running jobs (Plugin::reads_progress),
  // for a policy that ranks by service alone (las): a running job's service
  // is linear in time between the moments its run changes. Equal to the
  // field when the round accounted every job (the view was made without
  // accounting times, or nothing elapsed).
  double attained_service(const JobState& job) const {
    const double elapsed = unaccounted_seconds(job);
    if (elapsed <= 0) return job.attained_service;
    return job.attained_service + service_gained(elapsed, held_gpus(job.allocation), settings_.service);
  }
  // `job`'s GPU-seconds at now(), current in the same way: for a policy
  // defined on GPU time whatever the service unit (tiresias, gittins).
  double gpu_seconds(const JobState& job) const {
    const double elapsed = unaccounted_seconds(job);
    if (elapsed <= 0) return job.gpu_seconds;
    return job.gpu_seconds + elapsed * held_gpus(job.allocation);
  }

  // Other policies and what-if simulations (lab.hpp), for policies that
  // choose among policies. The simulator offers one; null on real nodes and
  // inside a what-if simulation.
  PolicyLab* lab() const { return lab_; }

 private:
  // How long `job` has run since the core last accounted it; 0 if it waits.
  double unaccounted_seconds(const JobState& job) const {
    if (!job.running() || job.spec.id >= accounted_until_.size()) return 0;
    return now_ - accounted_until_[job.spec.id];
  }

  const SchedulerSettings& settings_;
  const ClusterState& cluster_;
  const ThroughputModel& throughput_;
  std::span<const JobState* const> all_;
  std::span<const JobState* const> pending_;
  std::span<const JobState* const> active_;
  std::span<const JobState* const> waiting_;
  double now_;
  PolicyLab* lab_;
  std::span<const double> accounted_until_;  // by job id: until when its service is counted
};

}  // namespace tessel

#include "simulation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include "plugins/composition.hpp"

namespace tessel {

namespace {
constexpr double kNever = std::numeric_limits<double>::infinity();
// A stuck time-sensitive scheduler (jobs that can never be placed, nothing
// running, nothing left to arrive) is given this many rounds to change its mind.
constexpr std::uint64_t kStallRounds = 10'000;
}  // namespace

Simulation::Simulation(const ExperimentConfig& config, PluginRegistry& registry)
    : config_(config), log_(config.output.decisions), next_round_(kNever) {
  ClusterState cluster(config.cluster.nodes);
  ComposedScheduler plugins = compose_scheduler(config.scheduler, registry, config.workload.seed);
  Workload workload = build_workload(config.workload, cluster);
  jobs_ = std::move(workload.jobs);
  notes_ = std::move(workload.notes);
  SchedulerSettings settings = config.scheduler.settings;
  settings.restart_seconds = config.simulation.preemption_overhead_seconds;
  scheduler_ = std::make_unique<Scheduler>(std::move(plugins), std::move(cluster), config.workload.model,
                                           settings, &log_);
  progress_.resize(jobs_.size());
}

Simulation::~Simulation() = default;

void Simulation::sync(JobId id, double now) {
  JobProgress& p = progress_[id];
  const JobState& job = scheduler_->job(id);
  const double from = std::max(p.synced_at, p.paused_until);
  const double work = now > from ? job.executed_work + p.rate * (now - from) : job.executed_work;
  scheduler_->report_progress(id, work, now);
  p.synced_at = now;
}

void Simulation::start(JobId id, double now, double pause_seconds) {
  JobProgress& p = progress_[id];
  const JobState& job = scheduler_->job(id);
  p.rate = scheduler_->model().rate(job.spec, scheduler_->cluster().shape_of(job.allocation));
  if (!(p.rate > 0) || !std::isfinite(p.rate))
    throw std::logic_error("throughput model '" + std::string(scheduler_->model().name()) +
                           "' gave rate " + std::to_string(p.rate) + " to job " + std::to_string(id));
  p.synced_at = now;
  p.paused_until = now + pause_seconds;
  p.has_run = true;
  ++p.generation;
  schedule_completion(id, now);
}

void Simulation::schedule_completion(JobId id, double now) {
  const JobProgress& p = progress_[id];
  const JobState& job = scheduler_->job(id);
  double done = std::max(now, p.paused_until) + job.remaining_work() / p.rate;
  if (config_.simulation.completion_at_round_end) {
    const double round = scheduler_->settings().round_seconds;
    done = std::ceil(done / round - 1e-9) * round;
  }
  completions_.push_back({done, id, p.generation});
  std::push_heap(completions_.begin(), completions_.end(), std::greater<>());
}

void Simulation::request_round(double now) {
  const double round = scheduler_->settings().round_seconds;
  double at = std::ceil(now / round - 1e-9) * round;
  if (at <= last_round_) at = last_round_ + round;
  next_round_ = std::min(next_round_, at);
}

void Simulation::round(double now) {
  last_round_ = now;
  next_round_ = kNever;
  for (JobState* job : scheduler_->active())
    if (job->running()) sync(job->spec.id, now);

  const RoundOutcome outcome = scheduler_->run_round(now);
  for (JobId id : outcome.preempted) ++progress_[id].generation;
  for (const ResizeOutcome& resize : outcome.resized) start(resize.job, now, resize.cost_seconds);
  for (JobId id : outcome.started)
    start(id, now, progress_[id].has_run ? scheduler_->settings().restart_seconds : 0);

  const ClusterState& cluster = scheduler_->cluster();
  const auto active = scheduler_->active().size();
  const auto running = scheduler_->running_count();
  const auto pending = scheduler_->pending().size();
  samples_.push_back({now, cluster.total_gpus(), cluster.total_gpus() - cluster.free_gpus(),
                      static_cast<int>(running), static_cast<int>(active - running),
                      static_cast<int>(pending)});

  if (active == 0 && pending == 0) return;
  const bool nothing_else_happens = running == 0 && completions_.empty();
  idle_rounds_ = (!outcome.changed() && nothing_else_happens) ? idle_rounds_ + 1 : 0;
  if (idle_rounds_ >= kStallRounds) return;
  if (outcome.changed() || scheduler_->plugins().time_sensitive())
    next_round_ = now + scheduler_->settings().round_seconds;
}

RunResults Simulation::run(const std::atomic<bool>* stop) {
  std::size_t next_arrival = 0;
  double end_time = jobs_.empty() ? 0 : jobs_.front().arrival;
  capacity_since_ = end_time;
  const ClusterState& cluster = scheduler_->cluster();
  auto accrue_capacity = [&](double now) {
    capacity_gpu_seconds_ += cluster.total_gpus() * (now - capacity_since_);
    capacity_since_ = now;
  };

  while (true) {
    if (stop != nullptr && (events_ & 1023) == 0 && stop->load(std::memory_order_relaxed))
      throw Interrupted();
    const double completion = completions_.empty() ? kNever : completions_.front().time;
    const double arrival = next_arrival < jobs_.size() ? jobs_[next_arrival].arrival : kNever;
    const double now = std::min({completion, arrival, next_round_});
    if (now == kNever) break;
    ++events_;

    // Same-time events: completions free GPUs, then arrivals join, then the round decides.
    if (completion == now) {
      std::pop_heap(completions_.begin(), completions_.end(), std::greater<>());
      const Event event = completions_.back();
      completions_.pop_back();
      if (event.generation != progress_[event.job].generation) continue;  // preempted meanwhile
      accrue_capacity(now);
      sync(event.job, now);
      scheduler_->report_progress(event.job, scheduler_->job(event.job).spec.total_work, now);
      scheduler_->complete(event.job, now);
      end_time = now;
      request_round(now);
    } else if (arrival == now) {
      accrue_capacity(now);
      const JobState& job = scheduler_->submit(jobs_[next_arrival], now);
      if (job.spec.id != next_arrival) throw std::logic_error("job ids out of arrival order");
      ++next_arrival;
      end_time = std::max(end_time, now);
      request_round(now);
    } else {
      round(now);
    }
  }
  accrue_capacity(end_time);
  return collect(end_time);
}

RunResults Simulation::collect(double end_time) const {
  RunResults results;
  results.jobs.reserve(jobs_.size());
  std::size_t unfinished = 0;
  for (const JobState* job : scheduler_->jobs()) {
    const JobSpec& s = job->spec;
    JobRecord r;
    r.id = s.id;
    r.name = s.name;
    r.tenant = s.tenant;
    r.vc = s.vc;
    r.model = s.model;
    r.arrival = s.arrival;
    r.first_start = job->first_start;
    r.finish = job->finish;
    r.gpus = s.gpus;
    r.min_gpus = s.min_gpus;
    r.max_gpus = s.max_gpus;
    r.total_work = s.total_work;
    r.executed_work = job->executed_work;
    r.attained_service = job->attained_service;
    r.gpu_seconds = job->gpu_seconds;
    r.preemptions = job->preemptions;
    r.attempts = job->attempts;
    r.status = std::string(to_string(job->status));
    r.tracked = s.tracked;
    if (job->active() || job->status == JobStatus::pending) ++unfinished;
    results.jobs.push_back(std::move(r));
  }
  std::vector<std::string> notes = notes_;
  if (unfinished > 0)
    notes.push_back(std::to_string(unfinished) + " jobs never finished: the scheduler could not place them");
  for (const std::string& note : notes) results.note += (results.note.empty() ? "" : "; ") + note;
  results.samples = samples_;
  results.decisions = log_.records();
  results.cluster_gpus = scheduler_->cluster().installed_gpus();
  results.capacity_gpu_seconds = capacity_gpu_seconds_;
  results.end_time = end_time;
  results.events = events_;
  return results;
}

std::int64_t run_simulation(const ExperimentConfig& config, PluginRegistry& registry,
                            ResultsStore& store, RunInfo info, const std::atomic<bool>* stop) {
  Simulation simulation(config, registry);  // the user's errors surface before a run row exists
  if (info.label.empty()) info.label = config.output.label;
  info.config = config.document->text();
  info.seed = config.workload.seed;
  info.mode = "simulation";
  const std::int64_t id = store.begin_run(info);
  try {
    const auto started = std::chrono::steady_clock::now();
    RunResults results = simulation.run(stop);
    results.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    store.complete_run(id, results);
  } catch (const Interrupted&) {
    store.abandon_run(id, "interrupted", "stopped by the user");
    throw;
  } catch (const std::exception& e) {
    store.abandon_run(id, "failed", e.what());
    throw;
  }
  return id;
}

}  // namespace tessel

#include "simulation.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <map>

#include "common/simulated_clock.hpp"
#include "config/sweep.hpp"
#include "plugins/composition.hpp"
#include "tessel/lab.hpp"
#include "workloads/workload.hpp"

namespace tessel {

namespace {
constexpr double kNever = std::numeric_limits<double>::infinity();
// A stuck time-sensitive scheduler (jobs that can never be placed, nothing
// running, nothing left to happen) is given this many rounds to change its mind.
constexpr std::uint64_t kStallRounds = 10'000;

// The GPU types plugin arguments may name: the cluster's now, and every type
// a [[cluster.events]] entry adds later, so that an argument naming a type
// that arrives mid-run is accepted before the run, as the run will need it.
std::vector<std::string> gpu_types_of_run(const ClusterState& cluster, const ClusterConfig& config) {
  std::vector<std::string> types = cluster.gpu_types();
  for (const ClusterEvent& event : config.events)
    for (const NodeSpec& added : event.added)
      if (std::find(types.begin(), types.end(), added.gpu_type) == types.end()) types.push_back(added.gpu_type);
  return types;
}

// The scheduler a run of `config` composes, on `cluster` as the run starts.
ComposedScheduler compose_for_run(const ExperimentConfig& config, PluginRegistry& registry,
                                  const ClusterState& cluster) {
  const std::vector<std::string> gpu_types = gpu_types_of_run(cluster, config.cluster);
  return compose_scheduler(config.scheduler, registry, config.workload.seed,
                           config.document->base_directory().string(), &gpu_types);
}
}  // namespace

void check_scheduler(const ExperimentConfig& config, PluginRegistry& registry) {
  (void)compose_for_run(config, registry, ClusterState(config.cluster.nodes));
}

// The simulation's PolicyLab: other policies, created on demand for this run,
// and forecasts from forks of the current state.
class Simulation::Lab final : public PolicyLab {
 public:
  explicit Lab(Simulation& simulation) : simulation_(simulation) {}

  Forecast forecast(std::string_view admission, std::string_view allocation,
                    const ForecastOptions& options) override {
    if (!(options.horizon_seconds >= 0)) throw std::invalid_argument("a forecast's horizon must be 0 or more seconds");
    SchedulerConfig composition = simulation_.config_.scheduler;
    composition.stages[0] = parse_stage(PluginKind::admission, admission);
    composition.stages[1] = parse_stage(PluginKind::allocation, allocation);
    return simulation_.forecast(composition, options);
  }

  AllocationPolicy& allocation(std::string_view policy) override {
    auto it = allocations_.find(policy);
    if (it == allocations_.end())
      it = allocations_.emplace(std::string(policy), create<AllocationPolicy>(PluginKind::allocation, policy)).first;
    return *it->second;
  }

  void use_admission(std::string_view policy) override {
    auto it = admissions_.find(policy);
    if (it == admissions_.end())
      it = admissions_.emplace(std::string(policy), create<AdmissionPolicy>(PluginKind::admission, policy)).first;
    simulation_.scheduler_->use_admission(*it->second, std::string(policy));
  }

 private:
  template <class Stage>
  PluginPtr<Stage> create(PluginKind kind, std::string_view policy) {
    const StageConfig stage = parse_stage(kind, policy);
    std::uint64_t salt = 0xcbf29ce484222325ULL;  // FNV-1a of the spelling: a seed of its own
    for (char c : policy) salt = (salt ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    const Simulation& s = simulation_;
    const std::vector<std::string> gpu_types = gpu_types_of_run(s.scheduler_->cluster(), s.config_.cluster);
    return as_stage<Stage>(create_plugin(stage, *s.registry_, derive_seed(s.config_.workload.seed, salt),
                                         *s.scheduler_->plugins().slots,
                                         s.config_.document->base_directory().string(), &gpu_types),
                           stage);
  }

  Simulation& simulation_;
  std::map<std::string, PluginPtr<AllocationPolicy>, std::less<>> allocations_;
  std::map<std::string, PluginPtr<AdmissionPolicy>, std::less<>> admissions_;
};

Simulation::Simulation(const ExperimentConfig& config, PluginRegistry& registry,
                       std::shared_ptr<const ThroughputModel> model)
    : config_(config), registry_(&registry), log_(config.output.decisions),
      failure_rng_(derive_seed(config.workload.seed, 0x6661696c)),  // "fail"
      next_round_(kNever) {
  ClusterState cluster(config.cluster.nodes);
  ComposedScheduler plugins = compose_for_run(config, registry, cluster);
  Workload workload = build_workload(config.workload, cluster, std::move(model));
  job_count_ = workload.jobs.size();
  for (std::size_t first = 0; first < job_count_; first += kJobBlock) {
    const auto begin = workload.jobs.begin() + static_cast<std::ptrdiff_t>(first);
    const auto end = workload.jobs.begin() + static_cast<std::ptrdiff_t>(std::min(first + kJobBlock, job_count_));
    job_blocks_.push_back(std::make_shared<const std::vector<JobSpec>>(std::make_move_iterator(begin),
                                                                      std::make_move_iterator(end)));
  }
  std::vector<JobSpec>().swap(workload.jobs);
  stream_ = std::move(workload.stream);
  notes_ = std::move(workload.notes);
  SchedulerSettings settings = config.scheduler.settings;
  settings.restart_seconds = config.simulation.preemption_overhead_seconds;
  scheduler_ = std::make_unique<Scheduler>(std::move(plugins), std::move(cluster), std::move(workload.model),
                                           settings, &log_);
  scheduler_->set_round_rules(config.scheduler.rules);
  use_progress_source();
  // Rounds at events come, besides the events, only when the allocation plan
  // asks (revisit_at). An admission or placement that changes its mind as
  // jobs wait (philly_locality relaxing) would not be asked again before the
  // next event: its jobs would wait for an unrelated event, or, with none
  // left, end the run as "could not place them".
  if (config.simulation.event_rounds)
    for (const PluginKind kind : {PluginKind::admission, PluginKind::placement}) {
      const ComposedScheduler& stages = scheduler_->plugins();
      const bool time_sensitive = kind == PluginKind::admission ? stages.admission->time_sensitive()
                                                                : stages.placement->time_sensitive();
      if (time_sensitive)
        throw ConfigError(config.simulation.rounds_where,
                          "'rounds = \"events\"' in [simulation] holds no round for a " + std::string(to_string(kind)) +
                              " plugin that changes its decisions as time passes ('" +
                              std::string(stages.stage_info(kind).name) +
                              "'); use rounds = \"clock\", or a setting of the plugin that does not depend on time");
    }
  progress_.resize(job_count_);  // a stream's grow as its jobs arrive
  if (config.simulation.whole_iterations)
    for (const auto& block : job_blocks_)
      for (const JobSpec& job : *block) require_iteration_size(job);
  arrivals_end_ = stream_ ? std::numeric_limits<std::size_t>::max() : job_count_;
  lab_ = std::make_unique<Lab>(*this);
  scheduler_->set_lab(lab_.get());
}

Simulation::Simulation(const Simulation& origin, ComposedScheduler plugins)
    : config_(origin.config_), registry_(origin.registry_), job_blocks_(origin.job_blocks_),
      job_count_(origin.job_count_), stream_(origin.stream_),
      upcoming_(origin.upcoming_), tracked_done_below_(origin.tracked_done_below_), log_(false),
      scheduler_(origin.scheduler_->fork(std::move(plugins))), progress_(origin.progress_),
      next_arrival_(origin.next_arrival_), arrivals_end_(origin.arrivals_end_), events_(origin.events_),
      sequence_(origin.sequence_),
      node_generation_(origin.node_generation_), dormant_failures_(origin.dormant_failures_),
      failure_rng_(origin.failure_rng_), next_round_(kNever),
      capacity_since_(origin.capacity_since_), end_time_(origin.end_time_) {
  use_progress_source();
}

void Simulation::use_progress_source() {
  scheduler_->set_progress_source([this](const JobState& job, double now) { return synced_work(job, now); });
}

bool Simulation::progress_deferred() const {
  // An observer reads the scheduler after each round; rates that drift with
  // progress are re-read every round.
  return !observer_ && !scheduler_->model().rate_depends_on_progress() && !scheduler_->reads_progress();
}

Simulation::~Simulation() = default;

PolicyLab& Simulation::lab() {
  if (!lab_) throw std::logic_error("a forked simulation offers no lab");
  return *lab_;
}

std::unique_ptr<Simulation> Simulation::fork(const SchedulerConfig& composition) const {
  // The private constructor: make_unique cannot reach it.
  const std::vector<std::string> gpu_types = gpu_types_of_run(scheduler_->cluster(), config_.cluster);
  return std::unique_ptr<Simulation>(new Simulation(
      *this, compose_scheduler(composition, *registry_, config_.workload.seed,
                               config_.document->base_directory().string(), &gpu_types)));
}

Forecast Simulation::forecast(const SchedulerConfig& composition, const ForecastOptions& options) {
  const double now = last_round_;  // forecasts are asked for during a round
  std::unique_ptr<Simulation> fork = this->fork(composition);
  if (!options.known_arrivals) fork->arrivals_end_ = next_arrival_;
  // The fork decides this round again, with its own policies (its admission
  // from the next round on: this round's has happened).
  fork->request_round(now);
  const double horizon_end = options.horizon_seconds > 0 ? now + options.horizon_seconds : kNever;
  fork->advance(horizon_end, nullptr);
  // Run to completion (horizon 0): the forecast ends with its last job event;
  // jobs that could never be placed count to there.
  const double end = options.horizon_seconds > 0 ? horizon_end : std::max(now, fork->end_time_);

  Forecast forecast;
  forecast.end = end;
  double in_system = 0, queueing = 0;
  auto count = [&](const JobState& job) {
    ++forecast.jobs;
    const bool finished = job.status == JobStatus::finished;
    forecast.finished += finished;
    in_system += (finished ? *job.finish : end) - job.spec.arrival;
    queueing += (job.first_start ? *job.first_start : end) - job.spec.arrival;
  };
  for (const JobState* job : scheduler_->jobs())  // what was here when the fork began
    if (!job->done()) count(fork->scheduler_->job(job->spec.id));
  for (std::size_t id = next_arrival_; id < fork->next_arrival_; ++id)  // and what arrived since
    count(fork->scheduler_->job(static_cast<JobId>(id)));
  if (forecast.jobs > 0) {
    forecast.mean_time_in_system = in_system / static_cast<double>(forecast.jobs);
    forecast.mean_queueing_delay = queueing / static_cast<double>(forecast.jobs);
  }
  return forecast;
}

// ------------------------------------------------------------------ jobs

void Simulation::push(double time, EventKind kind, std::uint32_t subject, std::uint32_t generation) {
  events_.push_back({time, kind, sequence_++, subject, generation});
  std::push_heap(events_.begin(), events_.end(), std::greater<>());
}

void Simulation::sync(JobId id, double now) {
  scheduler_->report_progress(id, synced_work(scheduler_->job(id), now), now);
}

double Simulation::rate_of(const JobState& job) const {
  const ThroughputModel& model = scheduler_->model();
  const Shape shape = scheduler_->cluster().shape_of(job.allocation);
  const std::span<const JobId> partners = scheduler_->partners(job.spec.id);
  double rate = 0;
  if (partners.empty()) {
    rate = model.rate_at(job.spec, shape, job.executed_work);
  } else {  // space sharing: the rate the model gives the group
    std::vector<const JobSpec*> others;
    for (const JobId partner : partners) others.push_back(&scheduler_->job(partner).spec);
    rate = model.rate_colocated(job.spec, others, shape);
  }
  if (!config_.simulation.whole_iterations) return rate;
  const double round = scheduler_->settings().round_seconds;
  const double iteration = model.iteration_work(job.spec, job.allocation.gpu_count());
  // Synergy: floor(round / iteration time). The tolerance keeps a product
  // like 2.4 x 300 / 0.64 = 1125 from rounding down to 1124 on its last bit.
  const double iterations = std::floor(rate * round / iteration * (1 + 1e-12));
  if (iterations < 1)
    throw UserError("progress = \"whole_iterations\": job " + std::to_string(job.spec.id) +
                    " completes no whole iteration (" + std::to_string(iteration) + " work units) in a round of " +
                    std::to_string(round) + " s at rate " + std::to_string(rate) + ", so it would never progress");
  return iterations * iteration / round;
}

void Simulation::start(JobId id, double now, double pause_seconds) {
  JobProgress& p = progress_[id];
  const JobState& job = scheduler_->job(id);
  p.rate = rate_of(job);
  if (!(p.rate > 0) || !std::isfinite(p.rate))
    throw std::logic_error("throughput model '" + std::string(scheduler_->model().name()) +
                           "' gave rate " + std::to_string(p.rate) + " to job " + std::to_string(id));
  p.synced_at = now;
  p.paused_until = now + pause_seconds;
  p.run_started = now;
  p.work_at_run_start = job.executed_work;
  p.has_run = true;
  p.stop();
  schedule_completion(id, now);
  if (!dormant_failures_.empty() && std::isfinite(job.remaining_work())) {
    // A job that ends runs: the run is no longer settled, and the failures
    // put off meanwhile resume. Times between failures are exponential,
    // memoryless: each node's next failure is drawn afresh from now.
    for (NodeId node : dormant_failures_) schedule_node_failure(node, now);
    dormant_failures_.clear();
  }

  const FailureConfig& failures = config_.failures;
  if (failures.job_failure_probability > 0 && failure_rng_.uniform() < failures.job_failure_probability) {
    // The attempt crashes at a uniformly random point of what is left of its run.
    const double left = std::max(now, p.paused_until) + job.remaining_work() / p.rate - now;
    push(now + failure_rng_.uniform() * left, EventKind::job_crash, id, p.run);
  }
}

void Simulation::schedule_completion(JobId id, double now) {
  const JobProgress& p = progress_[id];
  const JobState& job = scheduler_->job(id);
  double done = on_time_grid(now, std::max(now, p.paused_until) + job.remaining_work() / p.rate);
  progress_[id].work_done_at = done;
  if (config_.simulation.completion_at_round_end) {
    const double round = scheduler_->settings().round_seconds;
    done = std::ceil(done / round - 1e-9) * round;
  }
  push(done, EventKind::completion, id, p.completion);
  schedule_rate_change(id, now);
}

void Simulation::schedule_rate_change(JobId id, double now) {
  JobProgress& p = progress_[id];
  const JobState& job = scheduler_->job(id);
  const ThroughputModel& model = scheduler_->model();
  if (!model.rate_depends_on_progress()) return;
  p.next_change = model.next_rate_change(job.spec, job.executed_work);
  if (!(p.next_change < job.spec.total_work)) return;
  push(on_time_grid(now, std::max(now, p.paused_until) + (p.next_change - job.executed_work) / p.rate),
       EventKind::rate_change, id, p.completion);
}

double Simulation::on_time_grid(double now, double time) const {
  if (!config_.simulation.rate_changes_on_whole_seconds) return time;
  // Python's round(), which Job.step uses: halves go to the even second.
  return std::max(now, std::nearbyint(time));
}

void Simulation::rerate(JobId id, double now) {
  JobProgress& p = progress_[id];
  const JobState& job = scheduler_->job(id);
  const double rate = rate_of(job);
  if (rate == p.rate) return;
  p.rate = rate;
  ++p.completion;
  schedule_completion(id, now);
}

void Simulation::rerate_regrouped(double now) {
  for (const JobId id : scheduler_->take_regrouped()) {
    if (!scheduler_->job(id).running()) continue;
    if (progress_[id].synced_at != now) sync(id, now);  // at the rate it had until now
    rerate(id, now);
  }
}

void Simulation::record_resize(double now, const ResizeOutcome& resize) {
  sink_.resized({now, resize.job, resize.from.gpu_count(), resize.to.gpu_count(), resize.cost_seconds,
                 resize.to.layout});
}

void Simulation::lose_progress_since_checkpoint(JobId id, double now) {
  const double interval = config_.failures.checkpoint_interval_seconds;
  if (interval <= 0) return;
  const JobProgress& p = progress_[id];
  const double checkpoint = p.run_started + std::floor((now - p.run_started) / interval) * interval;
  const double progressing_from = std::max(p.run_started, p.paused_until);
  const double saved = p.work_at_run_start + p.rate * std::max(0.0, checkpoint - progressing_from);
  scheduler_->report_progress(id, std::min(saved, scheduler_->job(id).executed_work), now);
}

// ------------------------------------------------------------------ nodes

void Simulation::schedule_node_failure(NodeId node, double now) {
  const double mtbf = config_.failures.node_mtbf_seconds;
  if (mtbf <= 0) return;
  push(now + failure_rng_.exponential(1 / mtbf), EventKind::node_failure, node, node_generation_[node]);
}

void Simulation::lose_node(NodeId node, double now, bool crash) {
  for (const Gpu& gpu : scheduler_->cluster().gpus_of(node))
    for (JobId job : gpu.jobs) {
      if (progress_[job].synced_at == now) continue;  // a job on several of its GPUs
      sync(job, now);
      if (crash) lose_progress_since_checkpoint(job, now);
    }
  const NodeLoss loss = scheduler_->lose_node(node, now);
  for (JobId id : loss.stopped) progress_[id].stop();
  rerate_regrouped(now);
  for (const ResizeOutcome& resize : loss.shrunk) {
    record_resize(now, resize);
    start(resize.job, now, resize.cost_seconds);
  }
}

void Simulation::handle(const Event& event) {
  const double now = event.time;
  const ClusterState& cluster = scheduler_->cluster();
  switch (event.kind) {
    case EventKind::completion: {
      const JobId id = event.subject;
      sync(id, now);
      scheduler_->report_progress(id, scheduler_->job(id).spec.total_work, now);
      // "exact-held": the GPUs were held to the round's end (now), but the
      // job finished when its work was done, as Gavel's simulator records it.
      scheduler_->complete(id, now, JobStatus::finished,
                           config_.simulation.completion_at_round_end && config_.simulation.finish_at_exact_time
                               ? std::optional(std::min(progress_[id].work_done_at, now))
                               : std::nullopt);
      // Its other events are void: a rate change due at the same time (the
      // model's change point rounds to the completion time) sorts after the
      // completion and must not re-rate a job that holds no GPUs.
      progress_[id].stop();
      rerate_regrouped(now);
      break;
    }
    case EventKind::rate_change: {
      // The job has reached the change point; its progress is snapped to it,
      // so that rounding cannot leave it just short and the rate unchanged.
      const JobId id = event.subject;
      if (!scheduler_->job(id).running()) return;  // stale: completions and stops void these events
      sync(id, now);
      JobProgress& p = progress_[id];
      const JobState& job = scheduler_->job(id);
      // On whole seconds the job may also have run past it; it is snapped
      // back, as Job.step sets progress to the epoch's end, and its
      // completion moves with it.
      const bool rounded = config_.simulation.rate_changes_on_whole_seconds;
      if (job.executed_work < p.next_change || rounded) scheduler_->report_progress(id, p.next_change, now);
      const std::uint32_t generation = p.completion;
      rerate(id, now);
      if (p.completion == generation) {
        if (rounded) {
          ++p.completion;
          schedule_completion(id, now);
        } else {
          schedule_rate_change(id, now);  // same rate: only the next change
        }
      }
      return;  // nothing for a round to decide
    }
    case EventKind::job_crash: {
      const JobId id = event.subject;
      sync(id, now);
      lose_progress_since_checkpoint(id, now);
      progress_[id].stop();
      if (scheduler_->job(id).attempts > config_.failures.max_retries)
        scheduler_->complete(id, now, JobStatus::failed);
      else
        scheduler_->interrupt(id, now, /*failed_attempt=*/true);
      rerate_regrouped(now);
      break;
    }
    case EventKind::node_failure: {
      const NodeId node = event.subject;
      if (!cluster.node(node).up) {  // already down (a planned failure): try again later
        schedule_node_failure(node, now + config_.failures.node_repair_seconds);
        return;
      }
      lose_node(node, now, /*crash=*/true);
      push(now + config_.failures.node_repair_seconds, EventKind::node_repair, node, node_generation_[node]);
      break;
    }
    case EventKind::node_repair: {
      const NodeId node = event.subject;
      scheduler_->repair_node(node);
      schedule_node_failure(node, now);
      break;
    }
    case EventKind::cluster_change: {
      const ClusterEvent& change = config_.cluster.events[event.subject];
      auto node_named = [&](const std::string& name) {
        for (const Node& n : cluster.nodes())
          if (n.spec.name == name) return n.id;
        throw std::logic_error("no node named " + name);  // names were checked with the config
      };
      for (const NodeSpec& spec : change.added) {
        node_generation_.push_back(0);
        schedule_node_failure(scheduler_->add_node(spec), now);
      }
      for (const std::string& name : change.nodes) {
        const NodeId node = node_named(name);
        switch (change.action) {
          case ClusterEvent::Action::remove:  // for good; its jobs checkpoint and leave
            if (cluster.node(node).up) lose_node(node, now, /*crash=*/false);
            ++node_generation_[node];
            break;
          case ClusterEvent::Action::fail:
            if (!cluster.node(node).up) break;
            lose_node(node, now, /*crash=*/true);
            push(now + config_.failures.node_repair_seconds, EventKind::node_repair, node,
                 node_generation_[node]);
            break;
          case ClusterEvent::Action::repair:
            ++node_generation_[node];  // cancels a pending repair
            scheduler_->repair_node(node);
            schedule_node_failure(node, now);
            break;
          case ClusterEvent::Action::add: break;
        }
      }
      break;
    }
  }
  request_round(now);
}

// ------------------------------------------------------------------ rounds

void Simulation::request_round(double now) {
  if (config_.simulation.event_rounds) {  // at the event itself
    next_round_ = std::min(next_round_, now);
    return;
  }
  const double round = scheduler_->settings().round_seconds;
  double at = std::ceil(now / round - 1e-9) * round;
  if (at <= last_round_) at = last_round_ + round;
  next_round_ = std::min(next_round_, at);
}

void Simulation::round(double now) {
  last_round_ = now;
  next_round_ = kNever;
  if (progress_deferred())
    scheduler_->defer_running_progress(now);
  else
    scheduler_->report_running_progress(now, [&](const JobState& job) { return synced_work(job, now); });

  const RoundOutcome outcome = scheduler_->run_round(now);
  for (JobId id : outcome.preempted) progress_[id].stop();
  for (const ResizeOutcome& resize : outcome.resized) {
    record_resize(now, resize);
    start(resize.job, now, resize.cost_seconds);
  }
  for (JobId id : outcome.started)
    start(id, now, progress_[id].has_run ? scheduler_->settings().restart_seconds
                                         : config_.simulation.start_overhead_seconds);
  rerate_regrouped(now);
  if (scheduler_->model().rate_depends_on_progress())
    for (JobState* job : scheduler_->active())
      if (job->running() && progress_[job->spec.id].run_started < now) rerate(job->spec.id, now);
  if (observer_) observer_(now, *scheduler_, outcome);

  const ClusterState& cluster = scheduler_->cluster();
  const auto active = scheduler_->active().size();
  const auto running = scheduler_->running_count();
  const auto pending = scheduler_->pending().size();
  if (lab_)  // forks keep no samples: their caller reads their jobs
    sink_.sampled({now, cluster.total_gpus(), cluster.total_gpus() - cluster.free_gpus(),
                   static_cast<int>(running), static_cast<int>(active - running), static_cast<int>(pending),
                   cluster.shared_gpus()});

  if (active == 0 && pending == 0) return;
  // Waiting jobs, nothing running, nothing left to arrive: only the cluster
  // can still change. Give up after kStallRounds rounds that change nothing.
  const bool only_waiting = running == 0 && next_arrival_ >= arrivals_end_;
  idle_rounds_ = (!outcome.changed() && only_waiting) ? idle_rounds_ + 1 : 0;
  if (idle_rounds_ >= kStallRounds) return;
  if (settled()) {
    // How a run with jobs that never end stops. Only such jobs run, nothing
    // is left to arrive: a job with infinite remaining work cannot change
    // anything by running, so the passing of time is no reason for a round
    // (time-sensitive policies: service and waits grow forever; progress-
    // dependent rates: they drift forever). Rounds are held when something
    // happens: an event asks for one, and a time-insensitive scheduler's
    // round that changed something is followed by another, as always, until
    // one changes nothing. A time-sensitive scheduler gets no such round:
    // what it would change there, with time the only input that moved, it
    // would change again in every round after (LAS would take turns among
    // the jobs that never end, forever). The run keeps what the last event
    // led to.
    if (outcome.changed() && !scheduler_->plugins().time_sensitive() && !config_.simulation.event_rounds)
      next_round_ = now + scheduler_->settings().round_seconds;
    return;
  }
  // Rounds at events (Tiresias's simulator): besides the events, only when
  // the allocation policy expects its plan to change, say when a running
  // job's service crosses a queue threshold. An elasticity plugin's sense
  // of time is heard at events only; time-sensitive admission and placement
  // are refused (constructor).
  if (config_.simulation.event_rounds) {
    // A revisit past the clock's end (1e300 for "never") is none.
    next_round_ = outcome.revisit_at > kLastSimulatedSecond ? kNever : outcome.revisit_at;
    return;
  }
  // Rounds in which nothing could change are skipped, unless running jobs
  // change speed as they progress: their rates are re-read every round.
  const bool rates_drift = running > 0 && scheduler_->model().rate_depends_on_progress();
  if (outcome.changed() || rates_drift || scheduler_->plugins().time_sensitive())
    next_round_ = now + scheduler_->settings().round_seconds;
}

void Simulation::accrue_capacity(double now) {
  const ClusterState& cluster = scheduler_->cluster();
  if (now > capacity_since_) capacity_gpu_seconds_ += cluster.total_gpus() * (now - capacity_since_);
  capacity_since_ = std::max(capacity_since_, now);
}

bool Simulation::work_left() {
  return next_arrival_ < arrivals_end_ || scheduler_->running_count() > 0 || !scheduler_->active().empty() ||
         !scheduler_->pending().empty();
}

const JobSpec* Simulation::upcoming() {
  if (next_arrival_ >= arrivals_end_) return nullptr;
  if (!stream_) return &(*job_blocks_[next_arrival_ / kJobBlock])[next_arrival_ % kJobBlock];
  if (!upcoming_) {
    upcoming_ = stream_->next();
    if (config_.simulation.whole_iterations) require_iteration_size(*upcoming_);
  }
  return &*upcoming_;
}

void Simulation::require_iteration_size(const JobSpec& job) const {
  if (!(scheduler_->model().iteration_work(job, job.gpus) > 0))
    throw ConfigError(config_.simulation.progress_where,
                      "progress = \"whole_iterations\": throughput model '" + std::string(scheduler_->model().name()) +
                          "' gives no iteration size for job " + std::to_string(job.id) + " (profile '" + job.model +
                          "')");
}

bool Simulation::tracked_done() {
  const auto [first, last] = stream_->track();
  tracked_done_below_ = std::max(tracked_done_below_, first);
  while (tracked_done_below_ < last && tracked_done_below_ < next_arrival_ &&
         scheduler_->job(tracked_done_below_).done())
    ++tracked_done_below_;
  return tracked_done_below_ == last;
}

double Simulation::give_up_time() const {
  const JobId last = stream_->track().second;
  if (!config_.workload.give_up_seconds || next_arrival_ < last) return kNever;
  return scheduler_->job(last - 1).spec.arrival + *config_.workload.give_up_seconds;
}

bool Simulation::settled() {
  if (next_arrival_ < arrivals_end_ || scheduler_->running_count() == 0) return false;
  for (const JobState* job : scheduler_->active())
    if (job->running() && std::isfinite(job->remaining_work())) return false;
  return true;
}

bool Simulation::cluster_may_change(bool repairs) const {
  return std::any_of(events_.begin(), events_.end(), [&](const Event& e) {
    return e.kind == EventKind::cluster_change ||
           (repairs && e.kind == EventKind::node_repair && e.generation == node_generation_[e.subject]);
  });
}

bool Simulation::advance(double until, const std::atomic<bool>* stop) {
  while (true) {
    // Every event: one event may be a round whose policy takes seconds.
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) throw Interrupted();
    if (stream_ && !stopped_at_tracked_ && tracked_done()) {
      // Blox's end (blox/blox_manager.py: terminate once every tracked job
      // finished): no more jobs are made, and what still runs or waits stays so.
      stopped_at_tracked_ = true;
      arrivals_end_ = next_arrival_;
      upcoming_.reset();
      return false;
    }
    const JobSpec* next_job = upcoming();
    const double event = events_.empty() ? kNever : events_.front().time;
    const double arrival = next_job ? next_job->arrival : kNever;
    const double now = std::min({event, arrival, next_round_});
    if (stream_ && !stopped_at_tracked_ && now > give_up_time()) {
      // Tracked jobs are left that the policy may never finish (LAS under
      // overload starves the longest for as long as jobs come): the run ends
      // with them unfinished, and says so.
      stopped_at_tracked_ = gave_up_ = true;
      arrivals_end_ = next_arrival_;
      upcoming_.reset();
      return false;
    }
    // Failures and repairs go on forever; the run ends with its jobs, or
    // when its remaining jobs can never be placed.
    if (now == kNever || (!work_left() && now > end_time_) || idle_rounds_ >= kStallRounds) return false;
    if (now > until) return true;
    // Work is left (or the run would have ended above): an arrival or a
    // round past the clock's end comes from a number in the experiment.
    if (now > kLastSimulatedSecond && (now == arrival || now == next_round_)) {
      if (now == arrival)
        throw UserError(arrival_past_the_simulated_clock(next_job->id, next_job->name, now));
      throw UserError("the next round would come" + past_the_simulated_clock(now) + ": see [scheduler] round_seconds");
    }
    ++handled_;

    if (event == now) {
      std::pop_heap(events_.begin(), events_.end(), std::greater<>());
      const Event next = events_.back();
      events_.pop_back();
      const bool job_event = next.kind == EventKind::completion || next.kind == EventKind::job_crash;
      const bool rate_event = next.kind == EventKind::completion || next.kind == EventKind::rate_change;
      if (rate_event && next.generation != progress_[next.subject].completion) continue;
      if (next.kind == EventKind::job_crash && next.generation != progress_[next.subject].run) continue;
      if (!job_event && !rate_event && next.kind != EventKind::cluster_change &&
          next.generation != node_generation_[next.subject])
        continue;  // the node was removed or repaired by hand meanwhile
      // Once the run has settled (only jobs that never end run, nothing is
      // left to arrive) and no planned cluster change is to come, random
      // failures are no longer simulated. They would go on forever, each
      // only stopping jobs that never end for its repair to start them
      // again; on a large cluster some repair would always be pending, so
      // waiting for repairs would not end the run either. No number of
      // failures makes a better end than none: a settled run ends as it
      // would without them. The repairs already due still happen (capacity
      // lost before the run settled comes back); the node's
      // failure clock stops (it resumes if a job that ends starts after
      // all: see start()). With no round, repair or planned change pending,
      // only failures and rate changes of jobs that never end are left, and
      // neither can change what the run ends with: it is over.
      const bool endless_subject =
          next.kind == EventKind::rate_change && !std::isfinite(scheduler_->job(next.subject).remaining_work());
      if ((next.kind == EventKind::node_failure || endless_subject) && settled() && !cluster_may_change(false)) {
        if (next_round_ == kNever && !cluster_may_change(true)) return false;
        if (next.kind == EventKind::node_failure) {
          dormant_failures_.push_back(next.subject);
          continue;
        }
      }
      if (now > kLastSimulatedSecond) {
        // Random failures this far off change nothing a run can show: the
        // run ends, as one whose waiting jobs never fit ends by its stall.
        if (next.kind == EventKind::node_failure || next.kind == EventKind::node_repair) return false;
        throw UserError(std::string(next.kind == EventKind::cluster_change ? "a planned cluster change"
                                                                           : "a job's completion or rate change") +
                        " would come" + past_the_simulated_clock(now) + ": see " +
                        (next.kind == EventKind::cluster_change ? "[[cluster.events]]"
                                                                : "the jobs' durations and the throughput model"));
      }
      accrue_capacity(now);
      handle(next);
      if (job_event) end_time_ = now;
    } else if (arrival == now) {
      accrue_capacity(now);
      const JobState& job = scheduler_->submit(*next_job, now);
      if (job.spec.id != next_arrival_) throw std::logic_error("job ids out of arrival order");
      ++next_arrival_;
      if (stream_) {
        upcoming_.reset();
        progress_.emplace_back();
      } else if (next_arrival_ % kJobBlock == 0 || next_arrival_ == job_count_) {
        job_blocks_[(next_arrival_ - 1) / kJobBlock].reset();
      }
      end_time_ = std::max(end_time_, now);
      request_round(now);
    } else {
      round(now);
    }
  }
}

RunResults Simulation::run(const std::atomic<bool>* stop) {
  // A run's end frees its jobs as it makes their rows (collect), so there is
  // nothing left to run a second time.
  if (ran_) throw std::logic_error("Simulation::run: a simulation runs once");
  ran_ = true;
  const ClusterState& cluster = scheduler_->cluster();
  node_generation_.assign(cluster.nodes().size(), 0);
  for (NodeId node = 0; node < cluster.nodes().size(); ++node) schedule_node_failure(node, 0);
  for (std::uint32_t i = 0; i < config_.cluster.events.size(); ++i)
    push(config_.cluster.events[i].at, EventKind::cluster_change, i, 0);
  sink_.run_started();
  const JobSpec* first = upcoming();
  end_time_ = first ? first->arrival : 0;
  capacity_since_ = end_time_;
  advance(kNever, stop);
  accrue_capacity(end_time_);
  return collect(end_time_);
}

RunResults Simulation::collect(double end_time) {
  std::size_t unfinished = 0, still_running = 0, held = 0;  // held: never admitted
  // The progress of each job, no longer needed, makes room for the rows
  // (72 bytes a job). Deferred progress is brought to the last round, where every round's
  // accounting left it.
  if (progress_deferred() && last_round_ >= 0)
    scheduler_->report_running_progress(last_round_, [&](const JobState& job) { return synced_work(job, last_round_); });
  std::vector<JobProgress>().swap(progress_);
  sink_.expect_jobs(scheduler_->job_count());
  const auto [first_tracked, last_tracked] = gave_up_ ? stream_->track() : std::pair<JobId, JobId>{};
  std::size_t left = 0;  // tracked jobs not done
  // The scheduler frees each job once its row is made (a million jobs'
  // states and rows together would be twice the run's memory); it is done.
  scheduler_->release_jobs([&](const JobState& job) {
    sink_.job_changed(job_record(job));
    if (job.running())  // a job that never ends (infinite duration) holds its GPUs to the end
      ++still_running;
    else if (job.active())
      ++unfinished;
    else if (job.status == JobStatus::pending)
      ++held;
    left += job.spec.id >= first_tracked && job.spec.id < last_tracked && !job.done();
  });
  std::vector<std::string> notes = notes_;
  if (gave_up_) {
    notes.push_back("the run gave up give_up_hours after the last tracked job arrived, with " +
                    std::to_string(left) + " tracked jobs not done, after " + std::to_string(next_arrival_) +
                    " jobs arrived: " + std::to_string(still_running) + " still running, " +
                    std::to_string(unfinished + held) + " waiting");
  } else if (stopped_at_tracked_) {
    notes.push_back("the run ended when the tracked jobs were done, after " + std::to_string(next_arrival_) +
                    " jobs arrived: " + std::to_string(still_running) + " still running, " +
                    std::to_string(unfinished + held) + " waiting");
  } else {
    if (held > 0)
      notes.push_back(std::to_string(held) + " jobs never finished: the admission policy never admitted them");
    if (unfinished > 0)
      notes.push_back(std::to_string(unfinished) + " jobs never finished: the scheduler could not place them");
    if (still_running > 0)
      notes.push_back(std::to_string(still_running) + " jobs were still running when the run ended");
  }
  for (const DecisionRecord& decision : log_.records()) sink_.decided(decision);
  RunTotals totals;
  for (const std::string& note : notes) totals.note += (totals.note.empty() ? "" : "; ") + note;
  totals.cluster_gpus = scheduler_->cluster().installed_gpus();
  totals.capacity_gpu_seconds = capacity_gpu_seconds_;
  totals.end_time = end_time;
  totals.events = handled_;
  sink_.run_ended(totals);
  return sink_.take();
}

namespace {

// Marks a run 'failed'. The first error is the one to report: if the store
// cannot take even this row (the disk is full), the run is left 'running';
// if its row was never written, there is nothing to mark.
void mark_failed(const OpeningStore& store, const std::shared_future<std::int64_t>& row, const std::string& why) {
  try {
    store.get().abandon_run(row.get(), "failed", why);
  } catch (const std::exception&) {
  }
}

}  // namespace

std::int64_t run_simulation(const ExperimentConfig& config, PluginRegistry& registry,
                            const OpeningStore& store, RunInfo info, std::atomic<bool>& stop) {
  Simulation simulation(config, registry);  // the user's errors surface before a run row exists
  if (info.label.empty()) info.label = config.output.label;
  info.config = without_sweep(*config.document);
  if (info.fingerprint.empty()) info.fingerprint = configuration_fingerprint(*config.document);
  info.seed = config.workload.seed;
  info.mode = "simulation";
  // The row is written beside the simulation, not before it: a new
  // database may still be opening. Without a row the results have nowhere
  // to go, so failing to write it stops the simulation.
  const std::shared_future<std::int64_t> row = std::async(std::launch::async, [&] {
    try {
      return store.get().begin_run(info);
    } catch (...) {
      stop = true;
      throw;
    }
  }).share();
  RunResults results;
  try {
    results = simulation.run(&stop);
  } catch (const Interrupted& e) {
    // If the row could not be written, that stopped the run: its error is the one thrown.
    store.get().abandon_run(row.get(), "interrupted", "stopped by the user");
    throw e.marking(1);
  } catch (const std::exception& e) {
    mark_failed(store, row, e.what());
    throw;
  }
  const std::int64_t id = row.get();
  try {
    store.get().complete_run(id, results);
  } catch (const std::exception& e) {
    mark_failed(store, row, e.what());
    throw;
  }
  return id;
}

}  // namespace tessel

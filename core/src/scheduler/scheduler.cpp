#include "scheduler/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_map>

namespace tessel {

namespace {
constexpr std::size_t kUnranked = std::numeric_limits<std::size_t>::max();

std::string job_name(JobId id) { return "job " + std::to_string(id); }

// Lists of jobs kept in arrival (id) order; a newcomer is usually the newest.
void insert_by_id(std::vector<JobState*>& list, JobState* job) {
  if (list.empty() || list.back()->spec.id < job->spec.id) {
    list.push_back(job);
    return;
  }
  auto at = std::lower_bound(list.begin(), list.end(), job->spec.id,
                             [](const JobState* a, JobId id) { return a->spec.id < id; });
  list.insert(at, job);
}
}  // namespace

Scheduler::Scheduler(ComposedScheduler plugins, ClusterState cluster,
                     std::shared_ptr<const ThroughputModel> model, SchedulerSettings settings,
                     DecisionLog* log)
    : plugins_(std::move(plugins)), admission_(plugins_.admission.get()),
      admission_name_(plugins_.stage_info(PluginKind::admission).name),
      cluster_(std::move(cluster)), model_(std::move(model)), settings_(settings), log_(log) {
  settings_.decisions_recorded = log_ != nullptr && log_->enabled();  // a fork records nothing
}

std::unique_ptr<Scheduler> Scheduler::fork(ComposedScheduler plugins) const {
  auto copy = std::make_unique<Scheduler>(std::move(plugins), cluster_, model_, settings_, nullptr);
  copy->books_ = books_;
  copy->accounted_until_ = accounted_until_;
  copy->running_ = running_;
  copy->sharing_ = sharing_;
  copy->round_ = round_;
  copy->admitted_this_round_ = admitted_this_round_;
  copy->rules_ = rules_;
  // Every job is copied, done ones too: a fork's plugins may write their
  // slots in any job, and must never write into this scheduler's.
  copy->all_.reserve(all_.size());
  for (const JobState* job : all_) copy->all_.push_back(&copy->storage_.emplace_back(*job));
  for (const JobState* job : active_)
    if (!job->done()) copy->active_.push_back(copy->all_[job->spec.id]);
  for (const JobState* job : pending_) copy->pending_.push_back(copy->all_[job->spec.id]);
  for (const JobState* job : waiting_) copy->waiting_.push_back(copy->all_[job->spec.id]);
  for (const JobState* job : requeued_) copy->requeued_.push_back(copy->all_[job->spec.id]);
  copy->waiting_stale_ = waiting_stale_;
  return copy;
}

void Scheduler::use_admission(AdmissionPolicy& policy, std::string name) {
  admission_ = &policy;
  admission_name_ = std::move(name);
}

// ------------------------------------------------------------------ state

JobState& Scheduler::submit(JobSpec spec, double now) {
  spec.id = static_cast<JobId>(all_.size());
  JobState& job = storage_.emplace_back();
  job.spec = std::move(spec);
  job.waiting_since = now;
  all_.push_back(&job);
  books_.emplace_back();
  accounted_until_.push_back(0);
  const int need = job.spec.elastic() ? job.spec.min_gpus : job.spec.gpus;
  if (need < 1 || (need > cluster_.installed_gpus() && !growing_cluster_)) {
    job.status = JobStatus::rejected;
    job.finish = now;
    record(now, job.spec.id, PluginKind::admission, "reject",
           Reason("asks for {} GPUs, the cluster has {}", need, cluster_.installed_gpus()), true);
  } else {
    pending_.push_back(&job);
  }
  return job;
}

void Scheduler::stop(JobState& job, double now, JobStatus status) {
  cluster_.release(job.spec.id, job.allocation);
  end_run(job, now, status);
}

void Scheduler::end_run(JobState& job, double now, JobStatus status) {
  settle(job, now);
  leave_group(job, now);
  job.allocation = Allocation{};
  job.last_run_seconds = now - books_[job.spec.id].run_started;
  job.status = status;
  --running_;
  if (status == JobStatus::preempted) {
    job.waiting_since = now;
    enqueue(job);
  } else {
    job.finish = now;
    needs_compaction_ = true;
  }
}

void Scheduler::complete(JobId id, double now, JobStatus status, std::optional<double> work_done_at) {
  JobState& job = *all_[id];
  if (job.done()) throw std::logic_error(job_name(id) + " completes but is already done");
  if (status != JobStatus::finished && status != JobStatus::failed)
    throw std::logic_error(job_name(id) + " completes with status " + std::string(to_string(status)));
  if (work_done_at && *work_done_at > now)
    throw std::logic_error(job_name(id) + " completes at " + std::to_string(now) + " with its work done later");
  if (job.running()) {
    stop(job, now, status);
  } else {
    if (job.status == JobStatus::pending) std::erase(pending_, &job);
    job.status = status;
    job.finish = now;
    needs_compaction_ = true;
    waiting_stale_ = true;
  }
  if (work_done_at) job.finish = *work_done_at;
}

JobState& Scheduler::restore(const JobState& saved) {
  if (saved.spec.id != all_.size())
    throw std::logic_error("job " + std::to_string(saved.spec.id) + " restored out of id order");
  JobState& job = storage_.emplace_back();
  job.spec = saved.spec;
  job.status = saved.status == JobStatus::running ? JobStatus::preempted : saved.status;
  job.attained_service = saved.attained_service;
  job.executed_work = saved.executed_work;
  job.gpu_seconds = saved.gpu_seconds;
  job.first_start = saved.first_start;
  job.finish = saved.finish;
  job.waiting_since = saved.waiting_since;
  job.last_run_seconds = saved.last_run_seconds;
  job.preemptions = saved.preemptions;
  job.attempts = saved.attempts;
  all_.push_back(&job);
  Book& book = books_.emplace_back();
  accounted_until_.push_back(0);
  // A job that ran continues its attempt when it runs again.
  book.new_attempt = job.attempts == 0;
  if (job.status == JobStatus::pending) pending_.push_back(&job);
  if (job.active()) active_.push_back(&job);
  if (job.waiting()) enqueue(job);
  return job;
}

void Scheduler::adopt(JobId id, Allocation allocation, double now) {
  JobState& job = *all_[id];
  if (!job.waiting()) throw std::logic_error(job_name(id) + " is adopted but is not waiting");
  // Whole GPUs that jobs adopted before hold: it space-shared them.
  const bool shared = !allocation.empty() && allocation.gpu_milli == 1000 && !cluster_.can_assign(allocation) &&
                      cluster_.can_share(allocation, model_->max_colocated());
  const std::vector<JobId> hosts = shared ? cluster_.gpu(allocation.gpus.front()).jobs : std::vector<JobId>{};
  begin_run(job, std::move(allocation), now, shared);
  for (const JobId member : hosts) {
    if (books_[member].partners.empty()) ++sharing_;
    books_[member].partners.push_back(id);
    books_[id].partners.push_back(member);
  }
  if (shared) ++sharing_;
}

void Scheduler::end_attempt(JobId id) {
  if (!all_[id]->waiting()) throw std::logic_error(job_name(id) + " ends an attempt but is not waiting");
  books_[id].new_attempt = true;
}

void Scheduler::interrupt(JobId id, double now, bool failed_attempt) {
  JobState& job = *all_[id];
  if (!job.running()) throw std::logic_error(job_name(id) + " is interrupted but is not running");
  stop(job, now, JobStatus::preempted);
  if (failed_attempt) books_[id].new_attempt = true;
}

void Scheduler::hold_until(JobId id, double until) {
  if (!all_[id]->waiting()) throw std::logic_error(job_name(id) + " is held but is not waiting");
  books_[id].held_until = until;
}

NodeLoss Scheduler::lose_node(NodeId node, double now) {
  std::vector<JobId> affected;
  for (const Gpu& gpu : cluster_.gpus_of(node))
    for (JobId job : gpu.jobs)
      if (std::find(affected.begin(), affected.end(), job) == affected.end()) affected.push_back(job);
  NodeLoss loss;
  // Down first: the elasticity plugin sees which of a job's GPUs are gone,
  // with whatever state they held.
  cluster_.set_up(node, false);
  const SchedulerView v = view(now);
  const std::string node_name = cluster_.node(node).spec.name;
  for (JobId id : affected) {
    JobState& job = *all_[id];
    const Allocation from = job.allocation;
    Allocation remaining = from;
    std::erase_if(remaining.gpus, [&](GpuId gpu) { return cluster_.gpu(gpu).node == node; });
    const double kept = static_cast<double>(remaining.gpu_count()) / from.gpu_count();
    remaining.cpus *= kept;
    remaining.mem_gb *= kept;
    const bool in_range = remaining.gpu_count() >= job.spec.min_gpus && remaining.gpu_count() <= job.spec.max_gpus;
    // A job sharing its GPUs stops: its partners hold the GPUs it would keep.
    if (!remaining.empty() && job.spec.elastic() && in_range && books_[id].partners.empty() &&
        calling(PluginKind::elasticity, now, [&] { return plugins_.elasticity->keep_after_loss(v, job, remaining); })) {
      settle(job, now);
      cluster_.release(id, from);
      remaining.layout = arranged(v, now, job, remaining);
      job.allocation = remaining;
      cluster_.assign(id, job.allocation);
      const double cost = reconfiguration_cost(v, now, job, from, job.allocation);
      loss.shrunk.push_back({id, from, job.allocation, cost});
      record(now, id, PluginKind::elasticity, "shrink",
             Reason::text("lost node " + node_name + "; runs on its " + std::to_string(remaining.gpu_count()) +
                          " other GPUs"));
    } else {
      stop(job, now, JobStatus::preempted);
      loss.stopped.push_back(id);
      record(now, id, PluginKind::placement, "stop", Reason::text("lost node " + node_name), true);
    }
  }
  return loss;
}

NodeId Scheduler::add_node(const NodeSpec& spec) { return cluster_.add_node(spec); }

void Scheduler::repair_node(NodeId node) { cluster_.set_up(node, true); }


void Scheduler::compact() {
  if (needs_compaction_) {
    std::erase_if(active_, [](const JobState* job) { return job->done(); });
    needs_compaction_ = false;
  }
  if (waiting_stale_) {
    std::erase_if(waiting_, [&](const JobState* job) {
      if (job->waiting()) return false;
      books_[job->spec.id].listed_waiting = false;
      return true;
    });
    waiting_stale_ = false;
  }
  if (!requeued_.empty()) {
    std::sort(requeued_.begin(), requeued_.end(),
              [](const JobState* a, const JobState* b) { return a->spec.id < b->spec.id; });
    for (JobState* job : requeued_) {
      Book& book = books_[job->spec.id];
      // Still waiting, and not listed already (its entry from before it ran stayed).
      if (!job->waiting() || book.listed_waiting) continue;
      book.listed_waiting = true;
      insert_by_id(waiting_, job);
    }
    requeued_.clear();
  }
}

void Scheduler::enqueue(JobState& job) {
  if (!books_[job.spec.id].listed_waiting) requeued_.push_back(&job);
}

std::span<JobState* const> Scheduler::active() {
  compact();
  return active_;
}

std::span<JobState* const> Scheduler::pending() { return pending_; }

SchedulerView Scheduler::view(double now) {
  compact();
  return SchedulerView(settings_, cluster_, *model_, all_, pending_, active_, waiting_, now, lab_, accounted_until_);
}

void Scheduler::log(double now, JobId job, PluginKind stage, std::string_view code,
                    const Reason& reason, bool by_core) {
  log_->record(now, job, stage, by_core ? std::string_view("core") : stage_plugin_name(stage), code, reason);
}

std::string_view Scheduler::stage_plugin_name(PluginKind stage) const {
  return stage == PluginKind::admission ? std::string_view(admission_name_)
                                        : std::string_view(plugins_.stage_info(stage).name);
}

const Plugin& Scheduler::stage_plugin(PluginKind stage) const {
  switch (stage) {
    case PluginKind::admission: return *admission_;
    case PluginKind::allocation: return *plugins_.allocation;
    case PluginKind::placement: return *plugins_.placement;
    case PluginKind::elasticity: return *plugins_.elasticity;
  }
  return *plugins_.allocation;
}

// "allocation plugin 'python' (policies/sf.py:14, class SmallestFirst)"
std::string Scheduler::plugin_named(PluginKind stage) const {
  std::string text = std::string(to_string(stage)) + " plugin '" + std::string(stage_plugin_name(stage)) + "'";
  if (const std::string hosted = stage_plugin(stage).hosted_code(); !hosted.empty()) text += " (" + hosted + ")";
  return text;
}

namespace {

std::string time_text(double now) {
  std::ostringstream text;
  text << "t=" << std::fixed << std::setprecision(now == std::floor(now) ? 0 : 3) << (now == 0 ? 0.0 : now)
       << " s";  // never "-0" nor "1.2e+06"
  return text.str();
}

}  // namespace

void Scheduler::broken(PluginKind stage, const std::string& what) const {
  const std::string message = plugin_named(stage) + " broke its contract: " + what;
  if (!stage_plugin(stage).hosted_code().empty()) throw HostedCodeFailure(message);
  throw PluginContractError(message);
}

void Scheduler::threw(PluginKind stage, double now, const std::exception& error) const {
  // A plugin that blames one of its arguments mid-run (the argument does not
  // fit this workload) reports the user's mistake, as at its construction.
  if (const auto* argument = dynamic_cast<const ArgumentError*>(&error))
    throw UserError(plugin_named(stage) + " at " + time_text(now) + ": argument '" + argument->argument() +
                    "': " + error.what());
  if (dynamic_cast<const HostedCodeInterrupted*>(&error) != nullptr)
    throw Interrupted(plugin_named(stage) + " interrupted at " + time_text(now) + " (in " + error.what() + ")");
  if (dynamic_cast<const HostedCodeError*>(&error) != nullptr)
    throw HostedCodeFailure(plugin_named(stage) + " failed at " + time_text(now) + ": " + error.what());
  throw PluginContractError(plugin_named(stage) + " threw at " + time_text(now) + ": " + error.what());
}

// ------------------------------------------------------------------ round

RoundOutcome Scheduler::run_round(double now) {
  ++round_;
  // Accounting a job twice at one time adds nothing: skipped after the runner's pass.
  if (accounted_all_at_ != now)
    for (JobState* job : active_)
      if (job->running()) accrue(*job, now);
  RoundOutcome outcome;
  // A fork made during a round, after its admission, continues that round:
  // its first round does not admit again.
  if (admitted_this_round_) {
    outcome.admission_deferred = !pending_.empty();
  } else if (!pending_.empty()) {
    const SchedulerView v = view(now);
    admit(v, outcome);
  }
  admitted_this_round_ = true;
  const SchedulerView v = view(now);
  const AllocationPlan plan = calling(PluginKind::allocation, now, [&] { return plugins_.allocation->allocate(v); });
  if (!(plan.revisit_at > now))
    broken(PluginKind::allocation, "asked to be revisited at " + std::to_string(plan.revisit_at) +
                                       ", not after the round at " + std::to_string(now));
  outcome.revisit_at = plan.revisit_at;
  place_plan(v, plan, outcome);
  apply_resizes(v, calling(PluginKind::elasticity, now, [&] { return plugins_.elasticity->resize(v); }), outcome);
  admitted_this_round_ = false;
  return outcome;
}

void Scheduler::admit(const SchedulerView& v, RoundOutcome& outcome) {
  const std::vector<AdmissionDecision> decisions =
      calling(PluginKind::admission, v.now(), [&] { return admission_->admit(v); });
  for (const AdmissionDecision& d : decisions) {
    if (d.job >= all_.size() || all_[d.job]->status != JobStatus::pending)
      broken(PluginKind::admission, "decided on " + job_name(d.job) + ", which is not pending");
    JobState& job = *all_[d.job];
    if (books_[d.job].admission_in == round_)
      broken(PluginKind::admission, "decided twice on " + job_name(d.job));
    books_[d.job].admission_in = round_;
    switch (d.verdict) {
      case AdmissionVerdict::admit:
        job.status = JobStatus::queued;
        ++outcome.admitted;
        record(v.now(), d.job, PluginKind::admission, "admit", d.reason);
        break;
      case AdmissionVerdict::reject:
        job.status = JobStatus::rejected;
        job.finish = v.now();
        ++outcome.rejected;
        record(v.now(), d.job, PluginKind::admission, "reject", d.reason);
        break;
      case AdmissionVerdict::hold:
        record(v.now(), d.job, PluginKind::admission, "hold", d.reason);
        break;
    }
  }
  if (outcome.admitted == 0 && outcome.rejected == 0) return;
  // Admitted jobs join the active and waiting lists in arrival (id) order.
  for (JobState* job : pending_) {
    if (job->status != JobStatus::queued) continue;
    insert_by_id(active_, job);
    enqueue(*job);
  }
  std::erase_if(pending_, [](const JobState* job) { return job->status != JobStatus::pending; });
}

PlacementChoice Scheduler::ask_placement(const SchedulerView& v, const JobState& job,
                                         const Resources& want) {
  PlacementChoice choice =
      calling(PluginKind::placement, v.now(), [&] { return plugins_.placement->place(v, job, want); });
  if (!choice.placed()) return choice;
  if (choice.gpus.size() != static_cast<std::size_t>(want.gpus))
    broken(PluginKind::placement, "chose " + std::to_string(choice.gpus.size()) + " GPUs for " +
                                      job_name(job.spec.id) + ", which wants " +
                                      std::to_string(want.gpus));
  Allocation candidate{choice.gpus, want.gpu_milli, want.cpus, want.mem_gb};
  std::string why;
  if (!cluster_.can_assign(candidate, &why))
    broken(PluginKind::placement, "placed " + job_name(job.spec.id) + " where it cannot go: " + why);
  if (want.gpu_type != kAnyGpuType)
    for (GpuId gpu : choice.gpus)
      if (cluster_.node(cluster_.gpu(gpu).node).type != want.gpu_type)
        broken(PluginKind::placement, "placed " + job_name(job.spec.id) + " on GPU " + std::to_string(gpu) +
                                          ", not of the type it was granted (" +
                                          cluster_.gpu_types()[want.gpu_type] + ")");
  return choice;
}

PlacementChoice Scheduler::place(const SchedulerView& v, JobState& job, const Resources& want,
                                 bool may_preempt, RoundOutcome& outcome) {
  // A whole-GPU job needs that many entirely free GPUs, whatever the plugin;
  // in a full cluster most waiting jobs end here without asking it.
  const bool whole = want.gpu_milli == 1000;
  PlacementChoice choice;
  if (whole && cluster_.free_gpus() < want.gpus)
    choice.reason = Reason("needs {} GPUs, {} free", want.gpus, cluster_.free_gpus());
  else
    choice = ask_placement(v, job, want);
  if (choice.placed() || !may_preempt) return choice;
  if (whole && cluster_.free_gpus() + reclaimable_gpus_ < want.gpus) return choice;

  // Lower-ranked running jobs that nobody has placed or kept this round, the
  // lowest priority first: unranked ones, then by rank, later arrivals first.
  // Ranks are fixed for the round, so the running jobs are sorted in that
  // order once, at the round's first search; each search walks them up to
  // its own rank.
  auto rank_of = [&](const JobState* other) {
    const Book& book = books_[other->spec.id];
    return book.ranked_in == round_ ? book.rank : kUnranked;
  };
  if (victim_order_round_ != round_) {
    victim_order_ = round_running_;
    std::sort(victim_order_.begin(), victim_order_.end(), [&](const JobState* a, const JobState* b) {
      const std::size_t ra = rank_of(a), rb = rank_of(b);
      if (ra != rb) return ra > rb;
      return a->spec.id > b->spec.id;
    });
    victim_order_round_ = round_;
  }
  const std::size_t my_rank = books_[job.spec.id].rank;
  std::vector<JobState*>& candidates = victims_;
  candidates.clear();
  int reclaimable = cluster_.free_gpus();
  for (JobState* other : victim_order_) {
    const std::size_t rank = rank_of(other);
    if (rank != kUnranked && rank <= my_rank) break;  // and so are all after it
    if (!other->running() || other == &job || books_[other->spec.id].protected_in == round_) continue;
    // Freeing one job of a group frees no GPU; groups split only by the plan.
    if (!books_[other->spec.id].partners.empty()) continue;
    candidates.push_back(other);
    reclaimable += other->allocation.gpu_count();
  }
  // Whole-GPU jobs that cannot fit even in everything reclaimable are not tried.
  if (candidates.empty() || (whole && reclaimable < want.gpus)) return choice;

  std::size_t released = 0;
  PlacementChoice trial;
  while (released < candidates.size()) {
    JobState* victim = candidates[released++];
    cluster_.release(victim->spec.id, victim->allocation);
    trial = ask_placement(v, job, want);
    if (trial.placed()) break;
  }
  if (!trial.placed()) {
    for (std::size_t i = 0; i < released; ++i)
      cluster_.assign(candidates[i]->spec.id, candidates[i]->allocation);
    return choice;  // the reason without preemption is the informative one
  }
  // Take the GPUs first, then give back every victim that still fits: only
  // jobs whose resources the choice really uses are preempted.
  cluster_.assign(job.spec.id, Allocation{trial.gpus, want.gpu_milli, want.cpus, want.mem_gb});
  for (std::size_t i = released; i-- > 0;) {
    JobState* victim = candidates[i];
    if (cluster_.can_assign(victim->allocation)) {
      cluster_.assign(victim->spec.id, victim->allocation);
      continue;
    }
    unreclaimable(*victim);
    end_run(*victim, v.now(), JobStatus::preempted);  // its GPUs are already released
    ++victim->preemptions;
    outcome.preempted.push_back(victim->spec.id);
    record(v.now(), victim->spec.id, PluginKind::placement, "preempt",
           Reason("preempted so that job {} (higher priority) can run", job.spec.id), true);
  }
  // The caller takes the GPUs for good (launch or resize).
  cluster_.release(job.spec.id, Allocation{trial.gpus, want.gpu_milli, want.cpus, want.mem_gb});
  return trial;
}

void Scheduler::begin_run(JobState& job, Allocation allocation, double now, bool shared) {
  job.allocation = std::move(allocation);
  if (shared)
    cluster_.share(job.spec.id, job.allocation, model_->max_colocated());
  else
    cluster_.assign(job.spec.id, job.allocation);
  job.status = JobStatus::running;
  waiting_stale_ = true;  // its entry in waiting_ goes at the next view
  if (!job.first_start) job.first_start = now;
  Book& book = books_[job.spec.id];
  accounted_until_[job.spec.id] = now;
  book.run_started = now;
  if (book.new_attempt) {
    ++job.attempts;
    book.new_attempt = false;
  }
  ++running_;
}

void Scheduler::launch(const SchedulerView& v, JobState& job, const Resources& want, std::vector<GpuId> gpus,
                       const Reason& reason, RoundOutcome& outcome) {
  const double now = v.now();
  Allocation allocation{std::move(gpus), want.gpu_milli, want.cpus, want.mem_gb};
  allocation.layout = arranged(v, now, job, allocation);
  begin_run(job, std::move(allocation), now);
  protect(job);
  outcome.started.push_back(job.spec.id);
  record(now, job.spec.id, PluginKind::placement, "place", reason);
}

bool Scheduler::resize(const SchedulerView& v, JobState& job, const Resources& want, const JobLayout& layout,
                       bool may_preempt, const Reason& reason, RoundOutcome& outcome) {
  settle(job, v.now());  // at the rate and on the GPUs it had until now
  const Allocation from = job.allocation;
  if (grants_held(from, want)) {
    // Only the layout changes: the job keeps its GPUs and restarts in place.
    // A grant of another GPU type moves the job (below).
    Allocation to = from;
    to.layout = layout;
    job.allocation = to;
    const double cost = reconfiguration_cost(v, v.now(), job, from, to);
    outcome.resized.push_back({job.spec.id, from, to, cost});
    record(v.now(), job.spec.id, PluginKind::placement, "resize", reason);
    return true;
  }
  cluster_.release(job.spec.id, from);
  protect(job);  // its own GPUs are free for its new placement, not for others' preemption
  PlacementChoice choice = place(v, job, want, may_preempt, outcome);
  if (!choice.placed()) {
    cluster_.assign(job.spec.id, from);
    std::string change = "change of CPUs or memory";
    if (want.gpus != from.gpu_count())
      change = "resize to " + std::to_string(want.gpus) + " GPUs";
    else if (want.gpu_type != kAnyGpuType && want.gpu_type != gpu_type_of(from))
      change = "move to " + cluster_.gpu_types()[static_cast<std::size_t>(want.gpu_type)];
    record(v.now(), job.spec.id, PluginKind::placement, "wait",
           Reason::text(change + " postponed: " + choice.reason.str()), true);
    return false;
  }
  Allocation to{std::move(choice.gpus), want.gpu_milli, want.cpus, want.mem_gb};
  to.layout = layout == JobLayout{} ? arranged(v, v.now(), job, to) : layout;
  job.allocation = std::move(to);
  cluster_.assign(job.spec.id, job.allocation);
  const double cost = reconfiguration_cost(v, v.now(), job, from, job.allocation);
  outcome.resized.push_back({job.spec.id, from, job.allocation, cost});
  record(v.now(), job.spec.id, PluginKind::placement, "resize", reason);
  return true;
}

AllocationPlan Scheduler::with_kept_listed(const AllocationPlan& plan) {
  AllocationPlan full;
  full.stop_at_first_unplaced = plan.stop_at_first_unplaced;
  full.revisit_at = plan.revisit_at;
  std::vector<JobId> listed;
  listed.reserve(plan.ranked.size());
  for (const Grant& grant : plan.ranked) listed.push_back(grant.job);
  std::sort(listed.begin(), listed.end());
  full.ranked.reserve(running_ + plan.ranked.size());
  for (const JobState* job : active_)
    if (job->running() && !std::binary_search(listed.begin(), listed.end(), job->spec.id))
      full.ranked.push_back({job->spec.id, job->held(), *plan.keep_running});
  full.ranked.insert(full.ranked.end(), plan.ranked.begin(), plan.ranked.end());
  return full;
}

JobLayout Scheduler::arranged(const SchedulerView& v, double now, const JobState& job,
                              const Allocation& allocation) const {
  const JobLayout layout =
      calling(PluginKind::elasticity, now, [&] { return plugins_.elasticity->arrange(v, job, allocation); });
  check_layout(PluginKind::elasticity, job, layout, allocation.gpu_count());
  return layout;
}

double Scheduler::reconfiguration_cost(const SchedulerView& v, double now, const JobState& job, const Allocation& from,
                                       const Allocation& to) const {
  const double cost = calling(PluginKind::elasticity, now, [&] {
    return plugins_.elasticity->reconfiguration_seconds(v, job, from, to);
  });
  if (!std::isfinite(cost) || cost < 0)
    broken(PluginKind::elasticity, "priced the reconfiguration of " + job_name(job.spec.id) + " at " +
                                       std::to_string(cost) + " s; a cost is finite and >= 0");
  return cost;
}

void Scheduler::check_layout(PluginKind stage, const JobState& job, const JobLayout& layout, int gpus) const {
  if (layout == JobLayout{}) return;
  const bool sized = layout.batch_size >= 0 && layout.tensor_parallel >= 0 && layout.pipeline_parallel >= 0;
  const long long degrees = static_cast<long long>(std::max(layout.tensor_parallel, 1)) *
                            std::max(layout.pipeline_parallel, 1);
  if (!sized || degrees > gpus)
    broken(stage, "laid out " + job_name(job.spec.id) + " on " + std::to_string(gpus) + " GPUs as batch " +
                      std::to_string(layout.batch_size) + ", tensor parallel " +
                      std::to_string(layout.tensor_parallel) + ", pipeline parallel " +
                      std::to_string(layout.pipeline_parallel) +
                      "; sizes are >= 0 and tensor x pipeline parallel at most the GPUs");
}

bool Scheduler::shares_gpus(const AllocationPlan& plan) const {
  return sharing_ > 0 ||
         std::any_of(plan.ranked.begin(), plan.ranked.end(), [](const Grant& g) { return g.share_with != kNoJob; });
}

bool Scheduler::looks_at_every_running_job(const AllocationPlan& plan) const {
  return rules_.stop_left_out || rules_.place_every_round || (log_ != nullptr && log_->enabled()) ||
         shares_gpus(plan);
}

AllocationPlan Scheduler::whole_plan(const SchedulerView& v, RoundOutcome& outcome) {
  AllocationPlan whole =
      calling(PluginKind::allocation, v.now(), [&] { return plugins_.allocation->allocate_whole(v); });
  if (whole.provisional)
    broken(PluginKind::allocation,
           "returned a provisional plan from allocate_whole, which a policy with provisional plans overrides to "
           "give the whole one");
  if (!(whole.revisit_at > v.now()))
    broken(PluginKind::allocation, "asked to be revisited at " + std::to_string(whole.revisit_at) +
                                       ", not after the round at " + std::to_string(v.now()));
  outcome.revisit_at = whole.revisit_at;
  return whole;
}

void Scheduler::place_plan(const SchedulerView& v, const AllocationPlan& plan,
                           RoundOutcome& outcome) {
  if (plan.provisional && !plan.keep_running)
    broken(PluginKind::allocation, "returned a provisional plan that keeps no running job (keep_running unset)");
  // A provisional plan stands only where nothing looks at the running jobs
  // it keeps unranked; otherwise the whole plan, before anything is placed.
  if (plan.provisional && looks_at_every_running_job(plan)) return place_plan(v, whole_plan(v, outcome), outcome);
  // The jobs an incremental plan keeps are protected, never a victim, and
  // rank before every listed job: nothing below needs to visit them, except
  // where a rule or the decision log looks at every running job.
  if (plan.keep_running && looks_at_every_running_job(plan)) return place_plan(v, with_kept_listed(plan), outcome);
  stamp_ranks(plan);
  if (shares_gpus(plan)) split_groups(v, plan, outcome);

  if (rules_.stop_left_out) stop_left_out(v, plan, outcome);
  gather_victims(plan);
  const std::size_t stopped = walk_plan(v, plan, plan.provisional, outcome);
  if (stopped < plan.ranked.size()) return place_whole_from(v, plan, stopped, outcome);
  if (log_ != nullptr && log_->enabled())
    for (const JobState* job : active_)
      if (job->waiting() && books_[job->spec.id].ranked_in != round_)
        record(v.now(), job->spec.id, PluginKind::allocation, "deny",
               Reason("not ranked by the allocation policy this round"), true);
}

void Scheduler::place_whole_from(const SchedulerView& v, const AllocationPlan& provisional, std::size_t stopped,
                                 RoundOutcome& outcome) {
  // Up to `stopped` the provisional plan placed every job as the whole plan
  // would have: each fitted on free GPUs, so no kept job was anybody's
  // victim, and a kept job's rank among them changed nothing. From the job
  // at `stopped` on, victims matter: the whole plan ranks them.
  AllocationPlan whole = whole_plan(v, outcome);
  // The jobs an incremental whole plan keeps go unvisited, as in place_plan.
  if (whole.keep_running && looks_at_every_running_job(whole)) whole = with_kept_listed(whole);
  for (const Grant& grant : provisional.ranked) books_[grant.job].ranked_in = 0;  // the whole plan's ranks now
  stamp_ranks(whole);
  check_agrees(provisional, stopped, whole);
  std::vector<JobId>& walked = walked_;
  walked.clear();
  for (std::size_t i = 0; i < stopped; ++i) walked.push_back(provisional.ranked[i].job);
  std::sort(walked.begin(), walked.end());
  gather_victims(whole);  // the walked jobs that run are protected already
  walk_plan(v, whole, /*provisional=*/false, outcome, walked);
}

void Scheduler::check_agrees(const AllocationPlan& provisional, std::size_t stopped, const AllocationPlan& whole) {
  // Had the whole plan ranked the jobs still to place otherwise, granted
  // them other resources, ranked a placed one after them, started a job the
  // provisional plan left out or changed one it kept, rounds where the
  // provisional plan stands would decide otherwise than this one, or the
  // prefix would have been placed otherwise. The placed jobs may be ranked
  // anyhow before the rest, with what they now hold, or be left out.
  // A running job an incremental whole plan keeps unlisted keeps what it
  // holds: the provisional plan may not change it after where it stopped.
  // (stamp_ranks(whole) has stamped exactly the jobs the whole plan lists.)
  if (whole.keep_running)
    for (std::size_t i = stopped; i < provisional.ranked.size(); ++i) {
      const Grant& grant = provisional.ranked[i];
      const JobState& job = *all_[grant.job];
      if (!job.running() || books_[grant.job].ranked_in == round_ || grant.resources.gpus == 0) continue;
      if (grant.share_with != kNoJob || !grants_held(job.allocation, grant.resources))
        broken(PluginKind::allocation, "keeps " + job_name(grant.job) +
                                           " as it is in its whole plan, and changes what it holds in its "
                                           "provisional plan");
    }
  std::vector<std::pair<JobId, std::size_t>>& listed = listed_;  // (job, index in the provisional plan)
  listed.clear();
  for (std::size_t i = 0; i < provisional.ranked.size(); ++i) listed.emplace_back(provisional.ranked[i].job, i);
  std::sort(listed.begin(), listed.end());
  const JobId next = provisional.ranked[stopped].job;
  std::optional<std::size_t> previous;  // the provisional index of the last job still to place seen
  for (const Grant& grant : whole.ranked) {
    const auto it = std::lower_bound(listed.begin(), listed.end(), std::pair{grant.job, std::size_t{0}});
    const JobState& job = *all_[grant.job];
    if (it == listed.end() || it->first != grant.job) {
      if (grant.resources.gpus == 0) continue;  // denied: the same as left out
      if (!job.running())
        broken(PluginKind::allocation, "grants " + job_name(grant.job) +
                                           " GPUs in its whole plan, and does not list it in its provisional plan");
      if (grant.share_with != kNoJob || !grants_held(job.allocation, grant.resources))
        broken(PluginKind::allocation, "changes what " + job_name(grant.job) +
                                           " holds in its whole plan, and keeps it in its provisional plan");
      continue;
    }
    if (it->second < stopped) {
      if (previous)
        broken(PluginKind::allocation, "ranks " + job_name(grant.job) + " after " + job_name(next) +
                                           " in its whole plan, and before it in its provisional plan");
      continue;
    }
    if (previous && it->second < *previous)
      broken(PluginKind::allocation, "ranks " + job_name(grant.job) + " after " +
                                         job_name(provisional.ranked[*previous].job) +
                                         " in its whole plan, and before it in its provisional plan");
    if (!previous && grant.job != next)
      broken(PluginKind::allocation, "ranks " + job_name(grant.job) + " ahead of " + job_name(next) +
                                         " in its whole plan, and after it in its provisional plan");
    const Grant& listed_grant = provisional.ranked[it->second];
    if (grant.resources != listed_grant.resources || grant.share_with != listed_grant.share_with)
      broken(PluginKind::allocation, "grants " + job_name(grant.job) +
                                         " other resources in its whole plan than in its provisional plan");
    previous = it->second;
  }
  if (!previous)
    broken(PluginKind::allocation,
           "leaves " + job_name(next) + " out of its whole plan, and ranks it in its provisional plan");
}

void Scheduler::stamp_ranks(const AllocationPlan& plan) {
  // Check the whole plan first, and stamp ranks for the preemption order.
  std::unordered_map<JobId, int> group_members;  // space sharing: jobs naming each host
  for (std::size_t rank = 0; rank < plan.ranked.size(); ++rank) {
    const Grant& grant = plan.ranked[rank];
    if (grant.job >= all_.size() || !all_[grant.job]->active())
      broken(PluginKind::allocation, "ranked " + job_name(grant.job) + ", which is not active");
    Book& book = books_[grant.job];
    if (book.ranked_in == round_) broken(PluginKind::allocation, "ranked " + job_name(grant.job) + " twice");
    book.ranked_in = round_;
    book.rank = rank;
    const JobSpec& spec = all_[grant.job]->spec;
    const int gpus = grant.resources.gpus;
    const bool size_ok = gpus == 0 || (spec.elastic() ? gpus >= spec.min_gpus && gpus <= spec.max_gpus
                                                      : gpus == spec.gpus);
    if (!size_ok)
      broken(PluginKind::allocation, "granted " + std::to_string(gpus) + " GPUs to " + job_name(grant.job) +
                                         ", outside its range " + std::to_string(spec.min_gpus) + ".." +
                                         std::to_string(spec.max_gpus));
    if (grant.resources.gpu_milli != spec.gpu_milli)
      broken(PluginKind::allocation, "changed the GPU share of " + job_name(grant.job));
    const double cpus = grant.resources.cpus, mem_gb = grant.resources.mem_gb;
    if (!std::isfinite(cpus) || cpus < 0 || !std::isfinite(mem_gb) || mem_gb < 0)  // the nodes' books would go wrong
      broken(PluginKind::allocation, "granted " + job_name(grant.job) + " " + std::to_string(cpus) + " CPUs and " +
                                         std::to_string(mem_gb) + " GB; each is finite and >= 0");
    if (grant.resources.gpu_type < kAnyGpuType ||
        grant.resources.gpu_type >= static_cast<int>(cluster_.gpu_types().size()))
      broken(PluginKind::allocation, "granted " + job_name(grant.job) + " an unknown GPU type index " +
                                         std::to_string(grant.resources.gpu_type));
    if (grant.share_with != kNoJob) {
      const JobId with = grant.share_with;
      auto refuse = [&](const std::string& why) {
        broken(PluginKind::allocation, "asked " + job_name(grant.job) + " to share the GPUs of " + job_name(with) +
                                           ", " + why);
      };
      if (with >= all_.size() || books_[with].ranked_in != round_ || with == grant.job)
        refuse("which is not ranked before it in this plan");
      const Grant& host = plan.ranked[books_[with].rank];
      if (host.share_with != kNoJob) refuse("which shares the GPUs of " + job_name(host.share_with) + " itself");
      if (gpus == 0 || host.resources.gpus != gpus)
        refuse("with " + std::to_string(gpus) + " GPUs granted to it and " + std::to_string(host.resources.gpus) +
               " to the other");
      if (spec.gpu_milli != 1000 || all_[with]->spec.gpu_milli != 1000) refuse("but only whole-GPU jobs share");
      if (books_[with].rank >= rank) refuse("which is not ranked before it in this plan");
      const int members = ++group_members[with] + 1;
      if (members > model_->max_colocated())
        refuse("making a group of " + std::to_string(members) + " jobs; throughput model '" +
               std::string(model_->name()) + "' prices at most " + std::to_string(model_->max_colocated()) +
               " on one GPU");
    }
  }
}

void Scheduler::gather_victims(const AllocationPlan& plan) {
  round_running_.clear();
  reclaimable_gpus_ = 0;
  // Jobs are protected already only when the whole plan follows a
  // provisional one (its prefix's placed and kept jobs): nobody's victims.
  // An incremental plan's unlisted jobs are kept.
  auto unless_protected = [&](JobState& job) {
    if (books_[job.spec.id].protected_in != round_) may_be_victim(job);
  };
  if (plan.keep_running) {
    for (const Grant& grant : plan.ranked) unless_protected(*all_[grant.job]);
  } else {
    for (JobState* job : active_) unless_protected(*job);
  }
}

void Scheduler::may_be_victim(JobState& job) {
  if (!job.running() || rules_.place_every_round) return;  // placed again: nobody's victim
  round_running_.push_back(&job);
  Book& book = books_[job.spec.id];
  book.reclaimable_in = round_;
  book.reclaimable_gpus = job.allocation.gpu_count();
  reclaimable_gpus_ += book.reclaimable_gpus;
}

std::size_t Scheduler::walk_plan(const SchedulerView& v, const AllocationPlan& plan, bool provisional,
                                 RoundOutcome& outcome, std::span<const JobId> walked) {
  const JobState* blocker = nullptr;
  for (std::size_t rank = 0; rank < plan.ranked.size(); ++rank) {
    const Grant& grant = plan.ranked[rank];
    if (std::binary_search(walked.begin(), walked.end(), grant.job)) continue;
    JobState& job = *all_[grant.job];
    if (grant.resources.gpus == 0) {
      record(v.now(), job.spec.id, PluginKind::allocation, "deny", grant.reason);
      continue;
    }
    record(v.now(), job.spec.id, PluginKind::allocation, "grant", grant.reason);
    if (grant.share_with != kNoJob) {
      join_group(v, job, grant, outcome);
      continue;
    }
    if (job.running() && !books_[job.spec.id].partners.empty()) {
      protect(job);  // split_groups left it in a group the plan keeps
      continue;
    }
    if (job.running() && rules_.place_every_round) {
      place_again(v, job, grant, outcome);
      continue;
    }
    if (job.running()) {
      if (grants_held(job.allocation, grant.resources)) {
        protect(job);
      } else {
        if (provisional) return rank;  // a resize might preempt a kept job
        resize(v, job, grant.resources, JobLayout{}, /*may_preempt=*/true, grant.reason, outcome);
      }
      continue;
    }
    if (books_[job.spec.id].held_until > v.now()) {
      record(v.now(), job.spec.id, PluginKind::placement, "wait",
             Reason("held until {} after a failed attempt", books_[job.spec.id].held_until), true);
      continue;
    }
    if (blocker != nullptr) {
      record(v.now(), job.spec.id, PluginKind::placement, "wait",
             Reason("queued behind job {}, which does not fit yet", blocker->spec.id), true);
      continue;
    }
    PlacementChoice choice = place(v, job, grant.resources, /*may_preempt=*/!provisional, outcome);
    if (!choice.placed() && provisional) return rank;  // it would preempt, maybe a kept job
    if (choice.placed()) {
      launch(v, job, grant.resources, std::move(choice.gpus), choice.reason, outcome);
    } else {
      record(v.now(), job.spec.id, PluginKind::placement, "wait", choice.reason);
      if (plan.stop_at_first_unplaced) blocker = &job;
    }
  }
  return plan.ranked.size();
}

void Scheduler::stop_left_out(const SchedulerView& v, const AllocationPlan& plan, RoundOutcome& outcome) {
  std::vector<char> granted(all_.size(), 0);
  for (const Grant& grant : plan.ranked) granted[grant.job] = grant.resources.gpus > 0;
  for (JobState* job : active_) {
    if (!job->running()) continue;
    if (!granted[job->spec.id]) {
      stop(*job, v.now(), JobStatus::preempted);
      ++job->preemptions;
      outcome.preempted.push_back(job->spec.id);
      record(v.now(), job->spec.id, PluginKind::placement, "preempt",
             Reason::text("stopped: this round's plan gives it no GPUs ([scheduler] left_out = \"stop\")"), true);
    } else if (rules_.place_every_round && books_[job->spec.id].partners.empty()) {
      cluster_.release(job->spec.id, job->allocation);  // placed again in rank order
    }
  }
}

void Scheduler::place_again(const SchedulerView& v, JobState& job, const Grant& grant, RoundOutcome& outcome) {
  const double now = v.now();
  PlacementChoice choice = place(v, job, grant.resources, /*may_preempt=*/false, outcome);
  if (choice.placed() && grants_held(job.allocation, grant.resources)) {
    std::vector<GpuId> held = job.allocation.gpus, chosen = choice.gpus;
    std::sort(held.begin(), held.end());
    std::sort(chosen.begin(), chosen.end());
    if (held == chosen) {
      cluster_.assign(job.spec.id, job.allocation);
      protect(job);
      return;
    }
  }
  end_run(job, now, JobStatus::preempted);  // it holds nothing in the cluster already
  ++job.preemptions;
  outcome.preempted.push_back(job.spec.id);
  if (choice.placed()) {
    record(now, job.spec.id, PluginKind::placement, "preempt",
           Reason::text("moved: placed again this round ([scheduler] placement_each_round = \"every_round\")"), true);
    launch(v, job, grant.resources, std::move(choice.gpus), choice.reason, outcome);
  } else {
    record(now, job.spec.id, PluginKind::placement, "preempt",
           Reason::text("stopped: no room when placed again this round: " + choice.reason.str()), true);
  }
}

void Scheduler::apply_resizes(const SchedulerView& v, std::vector<ResizeProposal> proposals,
                              RoundOutcome& outcome) {
  std::vector<char> seen;
  for (const ResizeProposal& p : proposals) {
    if (p.job >= all_.size() || !all_[p.job]->running())
      broken(PluginKind::elasticity, "proposed to resize " + job_name(p.job) + ", which is not running");
    const JobSpec& spec = all_[p.job]->spec;
    if (!spec.elastic() || p.gpus < spec.min_gpus || p.gpus > spec.max_gpus)
      broken(PluginKind::elasticity, "proposed " + std::to_string(p.gpus) + " GPUs for " + job_name(p.job) +
                                         ", outside its range " + std::to_string(spec.min_gpus) + ".." +
                                         std::to_string(spec.max_gpus));
    if (seen.size() <= p.job) seen.resize(p.job + 1, 0);
    if (seen[p.job]++) broken(PluginKind::elasticity, "proposed twice for " + job_name(p.job));
    check_layout(PluginKind::elasticity, *all_[p.job], p.layout, p.gpus);
  }
  // Shrinks first, so that growth can use what they free.
  std::stable_sort(proposals.begin(), proposals.end(), [&](const ResizeProposal& a, const ResizeProposal& b) {
    const int da = a.gpus - all_[a.job]->allocation.gpu_count();
    const int db = b.gpus - all_[b.job]->allocation.gpu_count();
    return (da < 0) > (db < 0);
  });
  for (const ResizeProposal& p : proposals) {
    JobState& job = *all_[p.job];
    if (!books_[p.job].partners.empty()) {
      record(v.now(), job.spec.id, PluginKind::elasticity, "drop",
             Reason::text(p.reason.str() + "; not resized while it shares its GPUs with job " +
                          std::to_string(books_[p.job].partners.front())));
      continue;
    }
    const bool same_layout = p.layout == JobLayout{} || p.layout == job.allocation.layout;
    if (job.allocation.gpu_count() == p.gpus && same_layout) continue;
    // Same CPUs, memory and GPU type; only the GPU count or layout changes.
    const Resources want{p.gpus, job.spec.gpu_milli, job.allocation.cpus, job.allocation.mem_gb,
                         gpu_type_of(job.allocation)};
    if (!resize(v, job, want, p.layout, /*may_preempt=*/false, p.reason, outcome))
      record(v.now(), job.spec.id, PluginKind::elasticity, "drop", p.reason);
    else
      record(v.now(), job.spec.id, PluginKind::elasticity, "resize", p.reason);
  }
}

// ------------------------------------------------------------------ space sharing

namespace {

std::string gpu_list(const Allocation& allocation) {
  std::string text;
  for (const GpuId gpu : allocation.gpus) text += (text.empty() ? "" : ", ") + std::to_string(gpu);
  return (allocation.gpu_count() == 1 ? "GPU " : "GPUs ") + text;
}

}  // namespace

void Scheduler::split_groups(const SchedulerView& v, const AllocationPlan& plan, RoundOutcome& outcome) {
  // The partners each job's grant asks for: a host and the jobs naming it.
  std::vector<std::vector<JobId>> wanted(all_.size());
  for (const Grant& grant : plan.ranked) {
    if (grant.share_with == kNoJob) continue;
    std::vector<JobId>& group = wanted[grant.share_with];
    for (const JobId member : group) {
      wanted[member].push_back(grant.job);
      wanted[grant.job].push_back(member);
    }
    group.push_back(grant.job);
    wanted[grant.job].push_back(grant.share_with);
  }
  auto rank_of = [&](JobId id) {
    const Book& book = books_[id];
    return book.ranked_in == round_ && plan.ranked[book.rank].resources.gpus > 0 ? book.rank : kUnranked;
  };
  for (JobState* job : active_) {
    if (!job->running() || books_[job->spec.id].partners.empty()) continue;
    const JobId id = job->spec.id;
    // A grant that moves or resizes it: it leaves its group, and is placed again.
    const std::size_t rank = rank_of(id);
    bool stop_it = rank != kUnranked && !grants_held(job->allocation, plan.ranked[rank].resources);
    std::string why = "its grant moves it off the GPUs it shares";
    for (const JobId partner : books_[id].partners) {
      if (stop_it) break;
      if (std::find(wanted[id].begin(), wanted[id].end(), partner) != wanted[id].end()) continue;
      // A pair the plan does not ask for again: the lower-ranked one stops.
      const std::size_t other = rank_of(partner);
      if (rank > other || (rank == other && id > partner)) {
        stop_it = true;
        why = "this round's plan does not pair it with job " + std::to_string(partner) + ", ranked higher";
      }
    }
    if (stop_it) split_off(v, *job, why, outcome);
  }
  // A running job granted a host it does not share with yet moves there.
  for (const Grant& grant : plan.ranked) {
    JobState& job = *all_[grant.job];
    const std::vector<JobId>& partners = books_[grant.job].partners;
    if (grant.share_with == kNoJob || !job.running() ||
        std::find(partners.begin(), partners.end(), grant.share_with) != partners.end())
      continue;
    split_off(v, job, "moves to share the GPUs of job " + std::to_string(grant.share_with), outcome);
  }
}

void Scheduler::split_off(const SchedulerView& v, JobState& job, const std::string& why, RoundOutcome& outcome) {
  stop(job, v.now(), JobStatus::preempted);
  ++job.preemptions;
  outcome.preempted.push_back(job.spec.id);
  record(v.now(), job.spec.id, PluginKind::placement, "preempt", Reason::text("stopped: " + why), true);
}

void Scheduler::join_group(const SchedulerView& v, JobState& job, const Grant& grant, RoundOutcome& outcome) {
  const double now = v.now();
  const JobState& host = *all_[grant.share_with];
  Book& book = books_[job.spec.id];
  if (job.running()) {  // split_groups kept it: it shares with the host already
    protect(job);
    return;
  }
  auto wait = [&](const std::string& why) {
    record(now, job.spec.id, PluginKind::placement, "wait",
           Reason::text("cannot share the GPUs of job " + std::to_string(host.spec.id) + ": " + why), true);
  };
  if (book.held_until > now) return wait("held until " + std::to_string(book.held_until) + " after a failed attempt");
  if (!host.running()) return wait("it is not running");
  const int type = gpu_type_of(host.allocation);
  if (grant.resources.gpu_type != kAnyGpuType && grant.resources.gpu_type != type)
    return wait("they are of type " + cluster_.gpu_types()[static_cast<std::size_t>(type)] + ", not the one granted");
  Allocation allocation{host.allocation.gpus, 1000, grant.resources.cpus, grant.resources.mem_gb};
  std::string why;
  if (!cluster_.can_share(allocation, model_->max_colocated(), &why)) return wait(why);
  // Every member's rate in the group it would make: a group the model says
  // cannot run together (it did not fit in memory) does not start.
  std::vector<const JobSpec*> group{&job.spec, &host.spec};
  for (const JobId partner : books_[host.spec.id].partners) group.push_back(&all_[partner]->spec);
  const Shape shape = cluster_.shape_of(allocation);
  for (std::size_t i = 0; i < group.size(); ++i) {
    std::vector<const JobSpec*> others = group;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    if (!(model_->rate_colocated(*group[i], others, shape) > 0))
      return wait("throughput model '" + std::string(model_->name()) + "' gives job " +
                  std::to_string(group[i]->id) + " no throughput in that group");
  }
  allocation.layout = arranged(v, now, job, allocation);
  begin_run(job, std::move(allocation), now, /*shared=*/true);
  protect(job);
  outcome.started.push_back(job.spec.id);
  for (std::size_t i = 1; i < group.size(); ++i) {
    const JobId member = group[i]->id;
    accrue(*all_[member], now);
    if (books_[member].partners.empty()) ++sharing_;
    books_[member].partners.push_back(job.spec.id);
    book.partners.push_back(member);
    regrouped_.push_back(member);
    record(now, member, PluginKind::placement, "share",
           Reason::text("job " + std::to_string(job.spec.id) + " joins it on its " + gpu_list(job.allocation)), true);
  }
  ++sharing_;
  std::string with;
  for (const JobId member : book.partners) with += (with.empty() ? "job " : ", job ") + std::to_string(member);
  record(now, job.spec.id, PluginKind::placement, "place",
         Reason::text("shares " + gpu_list(job.allocation) + " with " + with + " (space sharing)"));
}

void Scheduler::leave_group(JobState& job, double now) {
  Book& book = books_[job.spec.id];
  if (book.partners.empty()) return;
  for (const JobId member : book.partners) {
    JobState& partner = *all_[member];
    accrue(partner, now);  // shared until now
    std::vector<JobId>& theirs = books_[member].partners;
    std::erase(theirs, job.spec.id);
    if (theirs.empty()) --sharing_;
    regrouped_.push_back(member);
    record(now, member, PluginKind::placement, "share",
           Reason::text(theirs.empty() ? "runs alone again: job " + std::to_string(job.spec.id) + " left its GPUs"
                                       : "job " + std::to_string(job.spec.id) + " left its GPUs"),
           true);
  }
  book.partners.clear();
  --sharing_;
}

}  // namespace tessel

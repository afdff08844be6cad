#include "workloads/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "common/simulated_clock.hpp"
#include "models/models.hpp"
#include "tessel/rng.hpp"
#include "workloads/kinds.hpp"

#include <sys/resource.h>
#include <sys/sysinfo.h>

namespace tessel {

std::int64_t read_job_count(TableReader& reader, std::int64_t fallback) {
  const std::optional<std::int64_t> jobs = reader.integer("jobs", fallback, 1, 100'000'000);
  if (!jobs) return fallback;
  // Memory and swap together, as a run may page; where the figure cannot be
  // read, no bound: a false refusal would stop a run that fits.
  double usable = std::numeric_limits<double>::infinity();
  if (struct sysinfo info{}; sysinfo(&info) == 0)
    usable = (static_cast<double>(info.totalram) + static_cast<double>(info.totalswap)) * info.mem_unit;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    usable = std::min(usable, static_cast<double>(limit.rlim_cur));
  const double needed = static_cast<double>(*jobs) * static_cast<double>(sizeof(TraceJob) + sizeof(JobSpec));
  if (needed > usable) {
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    auto gib = [&](double bytes) {
      char text[32];
      std::snprintf(text, sizeof text, "%.1f GiB", bytes / kGiB);
      return std::string(text);
    };
    reader.error("jobs", "'jobs' in [workload]: " + count_text(static_cast<std::size_t>(*jobs)) + " jobs need " +
                             gib(needed) + " for their specs alone, more than the " + gib(usable) +
                             " this process may use (memory and swap, or its address-space limit)");
    return fallback;
  }
  return *jobs;
}

std::span<const WorkloadKind> workload_kinds() {
  static const WorkloadKind kinds[] = {
      {"synthetic", parse_synthetic_workload, "Gavel-style generator: Poisson arrivals, log-uniform durations"},
      {"csv", parse_csv_workload, "plain CSV trace: arrival,gpus,duration[,name,...]"},
      {"pollux-csv", parse_pollux_csv_workload, "Pollux's Philly-derived job list: timestamp,duration,num_gpus,..."},
      {"pollux-workload", parse_pollux_workload, "a Pollux (OSDI'21) workload: name,time,application,num_replicas,..."},
      {"gavel-trace", parse_gavel_trace_workload, "Gavel's tab-separated .trace files, sized in steps"},
      {"tiresias-csv", parse_tiresias_csv_workload, "Tiresias's job trace: job_id,num_gpu,submit_time,..."},
      {"openb", parse_openb_workload, "Alibaba 2023 GPU trace pod list, fractional GPUs included"},
      {"philly-json", parse_philly_json_workload, "Microsoft Philly cluster_job_log (JSON list of jobs), streamed"},
      {"synergy", parse_synergy_workload, "Synergy's own job generator, draw for draw (Python's random, seeded)"},
  };
  return kinds;
}

namespace {

// A job's GPU demand in milli-GPUs: what it asks for, all GPUs together.
double gpu_demand_milli(const JobSpec& spec) { return static_cast<double>(spec.gpus) * spec.gpu_milli; }

// Jobs in random order over the same arrival times: the i-th earliest time
// goes to the i-th job of a seeded permutation.
void shuffle_jobs(std::uint64_t seed, std::vector<TraceJob>& jobs) {
  Rng rng(derive_seed(seed, 0x73687566));  // a stream of its own: "shuf"
  std::vector<double> arrivals;
  arrivals.reserve(jobs.size());
  for (const TraceJob& job : jobs) arrivals.push_back(job.spec.arrival);
  for (std::size_t i = jobs.size(); i > 1; --i) std::swap(jobs[i - 1], jobs[rng.below(i)]);
  for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i].spec.arrival = arrivals[i];
}

// FGD's workload tuning (hkust-adsl/kubernetes-scheduler-simulator,
// pkg/simulator/simulator.go: tuneUpPods, tuneDownPods): while the jobs ask
// for less than `ratio` times the cluster's GPUs, append a job drawn
// uniformly (with replacement) from the trace as it was, arriving with the
// last one, and stop at the first draw that would overshoot; while they ask
// for more, drop a job drawn uniformly. (The simulator tests the overshoot
// with the per-GPU share of the drawn pod, not its total; here the total.)
void resample_to_gpu_demand(double ratio, int cluster_gpus, std::uint64_t seed, std::vector<TraceJob>& jobs,
                            std::vector<std::string>& notes) {
  if (cluster_gpus <= 0)
    throw UserError("[workload] gpu_demand_ratio: the cluster has no GPUs at the start to scale the demand to");
  const double target = ratio * cluster_gpus * 1000.0;
  double total = 0;
  for (const TraceJob& job : jobs) total += gpu_demand_milli(job.spec);
  if (total <= 0) throw UserError("[workload] gpu_demand_ratio: the trace's jobs ask for no GPUs");
  Rng rng(derive_seed(seed, 0x74756e65));  // "tune"
  const std::size_t before = jobs.size();
  if (total < target) {
    const double last_arrival = jobs.back().spec.arrival;
    for (std::size_t added = 1;; ++added) {
      TraceJob drawn = jobs[rng.below(before)];
      if (total + gpu_demand_milli(drawn.spec) > target) break;
      total += gpu_demand_milli(drawn.spec);
      drawn.spec.arrival = last_arrival;
      if (!drawn.spec.name.empty()) drawn.spec.name += "-resampled-" + std::to_string(added);
      jobs.push_back(std::move(drawn));
    }
    notes.push_back("gpu_demand_ratio: added " + count_text(jobs.size() - before) + " jobs drawn from the " +
                    count_text(before) + " of the trace");
  } else if (total > target) {
    while (total > target) {
      const std::size_t drop = rng.below(jobs.size());
      total -= gpu_demand_milli(jobs[drop].spec);
      jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(drop));
    }
    notes.push_back("gpu_demand_ratio: kept " + count_text(jobs.size()) + " of " + count_text(before) + " jobs");
  }
}

// The transforms that change one job at a time, the last ones applied: a
// workload without end has only these.
void apply_job_transforms(const TraceTransforms& t, TraceJob& job) {
  job.spec.arrival /= t.arrival_rate_scale;
  job.duration *= t.duration_scale;
  job.spec.total_work *= t.duration_scale;
  const bool made_elastic =
      t.elastic_models.empty() ||
      std::find(t.elastic_models.begin(), t.elastic_models.end(), job.spec.model) != t.elastic_models.end();
  if (!made_elastic) return;
  if (t.elastic_min_gpus > 0) job.spec.min_gpus = std::min(t.elastic_min_gpus, job.spec.gpus);
  if (t.elastic_max_gpus > 0) job.spec.max_gpus = std::max(t.elastic_max_gpus, job.spec.gpus);
}

void apply_transforms(const TraceTransforms& t, std::uint64_t seed, int cluster_gpus, std::vector<TraceJob>& jobs,
                      std::vector<std::string>& notes) {
  auto keep_if = [&](auto&& keep, const std::string& what) {
    const std::size_t before = jobs.size();
    std::erase_if(jobs, [&](const TraceJob& job) { return !keep(job); });
    if (jobs.size() != before)
      notes.push_back(what + ": kept " + count_text(jobs.size()) + " of " + count_text(before) + " jobs");
  };
  if (t.window) {
    const auto [start, end] = *t.window;
    keep_if([&](const TraceJob& j) { return j.spec.arrival >= start && j.spec.arrival < end; }, "window");
    for (TraceJob& job : jobs) job.spec.arrival -= start;
  }
  if (!t.vcs.empty())
    keep_if([&](const TraceJob& j) { return std::find(t.vcs.begin(), t.vcs.end(), j.spec.vc) != t.vcs.end(); },
            "vcs");
  if (!t.tenants.empty())
    keep_if([&](const TraceJob& j) {
      return std::find(t.tenants.begin(), t.tenants.end(), j.spec.tenant) != t.tenants.end();
    }, "tenants");
  if (t.max_jobs && jobs.size() > static_cast<std::size_t>(*t.max_jobs)) {
    notes.push_back("max_jobs: kept the first " + count_text(*t.max_jobs) + " of " + count_text(jobs.size()) +
                    " jobs");
    jobs.resize(static_cast<std::size_t>(*t.max_jobs));
  }
  if (t.shuffle) shuffle_jobs(seed, jobs);
  if (t.gpu_demand_ratio && !jobs.empty())
    resample_to_gpu_demand(*t.gpu_demand_ratio, cluster_gpus, seed, jobs, notes);
  if (t.poisson_jobs_per_hour) {
    Rng rng(derive_seed(seed, 0x706f6973));  // a stream of its own: "pois"
    double now = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (i > 0) now += rng.exponential(*t.poisson_jobs_per_hour / 3600.0);
      jobs[i].spec.arrival = now;
    }
  }
  for (TraceJob& job : jobs) apply_job_transforms(t, job);
}

// The work `job` does in `seconds` on `shape` from the start of its
// training. A rate that changes with progress at points the model names is
// followed from one to the next, so the job takes exactly `seconds` there;
// otherwise the training-long rate() prices it, as it does a job that never
// ends (infinite seconds: following its changes would never stop).
double work_in(const ThroughputModel& model, const JobSpec& job, double seconds, const Shape& shape) {
  if (!model.rate_depends_on_progress() || std::isinf(seconds) || std::isinf(model.next_rate_change(job, 0)))
    return seconds * model.rate(job, shape);
  double work = 0;
  while (true) {
    const double rate = model.rate_at(job, shape, work);
    const double change = model.next_rate_change(job, work);
    const double until_change = (change - work) / rate;
    if (!(until_change < seconds)) return work + seconds * rate;
    work = change;
    seconds -= until_change;
  }
}

// [workload] profile_weights = { alexnet = 4, gnmt = 23.3 }: each a profile of
// the model, with a weight >= 0; at least one positive.
std::vector<std::pair<std::string, double>> read_profile_weights(TableReader& reader, const toml::table& table,
                                                                 const ThroughputModel* model) {
  std::vector<std::pair<std::string, double>> weights;
  TableReader entries = reader.nested(&table, reader.table_name() + ".profile_weights");
  const std::span<const std::string> profiles = model ? model->profiles() : std::span<const std::string>();
  if (model && profiles.empty()) {
    reader.error("profile_weights", "throughput model '" + std::string(model->name()) +
                                        "' has no profiles to weight; 'profile_weights' needs a model that has");
    return weights;
  }
  double total = 0;
  for (auto&& [key, value] : table) {
    const std::string profile(key.str());
    const auto weight = entries.number(profile, std::nullopt, 0);
    if (!weight) continue;  // reported
    if (model && std::find(profiles.begin(), profiles.end(), profile) == profiles.end()) {
      std::string valid;
      for (const std::string& p : profiles) valid += (valid.empty() ? "" : ", ") + p;
      entries.error(profile, "throughput model '" + std::string(model->name()) + "' has no profile '" + profile +
                                 "' (valid: " + valid + ")");
      continue;
    }
    weights.emplace_back(profile, *weight);
    total += *weight;
  }
  if (weights.size() == table.size() && !(total > 0))
    reader.error("profile_weights", "'profile_weights' in [workload] needs at least one positive weight");
  return weights;
}

// The profiles a job of some GPU count may be given at random, with weights.
struct ProfileDraw {
  std::vector<const std::string*> names;
  std::vector<double> weights;  // empty: all equally likely
  bool unsuited = false;        // no profile suits the count; drawn among all weighted ones
  std::vector<std::size_t> given;  // jobs given each name so far (profile_assignment = "exact_shares")
};

// profile_assignment = "exact_shares", Synergy's ModelAssignment.OVERALL
// (msr-fiddle/synergy simulator/jobs/model_zoo.py, task.py): the next job
// gets the profile furthest below its share of the jobs given one so far,
// the first in the draw's order on a tie (profile_weights' keys in name
// order, else the model's order), so the split is exact at every point rather
// than right on average. (Synergy splits by class, then cycles through a
// class's models; with one weight per profile that is the same split.)
std::size_t furthest_below_share(ProfileDraw& draw) {
  const std::size_t n = draw.names.size();
  if (draw.given.empty()) draw.given.assign(n, 0);
  double total_weight = 0;
  std::size_t total_given = 0;
  for (std::size_t i = 0; i < n; ++i) {
    total_weight += draw.weights.empty() ? 1.0 : draw.weights[i];
    total_given += draw.given[i];
  }
  std::size_t pick = 0;
  double largest = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    const double share = (draw.weights.empty() ? 1.0 : draw.weights[i]) / total_weight;
    const double deficit = share * static_cast<double>(total_given) - static_cast<double>(draw.given[i]);
    if (deficit > largest) {
      largest = deficit;
      pick = i;
    }
  }
  ++draw.given[pick];
  return pick;
}

ProfileDraw profile_draw(const ThroughputModel& model, const std::vector<std::pair<std::string, double>>& weights,
                         int gpus) {
  ProfileDraw draw;
  auto collect = [&](bool suited_only) {
    draw.names.clear();
    draw.weights.clear();
    if (weights.empty()) {
      for (const std::string& profile : model.profiles())
        if (!suited_only || model.profile_suits(profile, gpus)) draw.names.push_back(&profile);
      return;
    }
    for (const auto& [profile, weight] : weights)
      if (weight > 0 && (!suited_only || model.profile_suits(profile, gpus))) {
        draw.names.push_back(&profile);
        draw.weights.push_back(weight);
      }
  };
  collect(true);
  if (draw.names.empty()) {
    draw.unsuited = true;
    collect(false);
  }
  return draw;
}

// A workload without end needs `track`: the jobs whose end stops it. The
// transforms that need the whole trace (to filter, cut, permute, resample
// or re-time it) cannot apply to jobs that never run out.
void check_endless(const WorkloadSettings& settings, TableReader& reader) {
  const char* const endless = "a workload without end (jobs = \"until_tracked_done\")";
  if (!settings.track)
    reader.error("jobs", std::string("'jobs = \"until_tracked_done\"' in [workload] needs 'track = [first, last)': "
                                     "the jobs whose end stops the generator"));
  const TraceTransforms& t = settings.transforms;
  const std::pair<bool, const char*> whole_trace[] = {
      {t.window.has_value(), "window"},         {!t.vcs.empty(), "vcs"},
      {!t.tenants.empty(), "tenants"},          {t.max_jobs.has_value(), "max_jobs"},
      {t.shuffle, "shuffle"},                   {t.gpu_demand_ratio.has_value(), "gpu_demand_ratio"},
      {t.poisson_jobs_per_hour.has_value(), "poisson_jobs_per_hour"},
  };
  for (const auto& [set, key] : whole_trace)
    if (set)
      reader.error(key, "'" + std::string(key) + "' in [workload] works on the whole trace; " + endless +
                            " has none (the per-job transforms arrival_rate_scale, duration_scale and "
                            "elastic_* apply)");
}

// What [workload] builds: the kind's source and the model, and the weights
// of the model's profiles.
struct WorkloadParts {
  std::unique_ptr<WorkloadSource> source;
  std::shared_ptr<const ThroughputModel> model;
  std::vector<std::pair<std::string, double>> profile_weights;
  bool exact_shares = false;  // profile_assignment
};

// Reads what config left in [workload] and builds from it: the kind, the
// model, profile_weights, the kind's own keys, then reports unknown keys.
// `model`, when given, stands in for the configured one.
WorkloadParts read_parts(const WorkloadSettings& settings, Diagnostics& diagnostics,
                         std::shared_ptr<const ThroughputModel> model = nullptr) {
  WorkloadParts parts;
  TableReader reader(settings.options, diagnostics);
  const WorkloadKind* kind = nullptr;
  if (settings.kind) {  // else config reported it
    std::vector<std::string> names;
    for (const auto& k : workload_kinds()) names.emplace_back(k.name);
    if (reader.choice("kind", names, std::nullopt))
      for (const auto& k : workload_kinds())
        if (k.name == *settings.kind) kind = &k;
  }
  parts.model = model ? std::move(model) : build_throughput_model(settings.model, diagnostics);
  if (const toml::table* weights = reader.table("profile_weights"))
    parts.profile_weights = read_profile_weights(reader, *weights, parts.model.get());
  if (auto assignment = reader.choice("profile_assignment", {"random", "exact_shares"}, "random")) {
    parts.exact_shares = *assignment == "exact_shares";
    if (parts.exact_shares && parts.model && parts.model->profiles().empty())
      reader.error("profile_assignment", "throughput model '" + std::string(parts.model->name()) +
                                             "' has no profiles to assign; 'profile_assignment' needs a model "
                                             "that has");
  }
  if (kind == nullptr) return parts;  // which keys are valid is unknown: no unknown-key reports
  parts.source = kind->parse(reader);
  if (parts.source->endless())
    check_endless(settings, reader);
  else if (settings.give_up_seconds)
    reader.error("give_up_hours", "'give_up_hours' in [workload] applies only to jobs without end "
                                  "(kind = \"synthetic\", jobs = \"until_tracked_done\")");
  reader.finish();
  return parts;
}

WorkloadParts build_parts(const WorkloadSettings& settings, std::shared_ptr<const ThroughputModel> model = nullptr) {
  Diagnostics diagnostics;
  WorkloadParts parts = read_parts(settings, diagnostics, std::move(model));
  diagnostics.raise_if_any();
  return parts;
}

// Numbers, marks and prices jobs one at a time, in arrival order: gives a
// job without a profile one the model knows (seeded, so the same jobs get
// the same profiles), and turns its duration into work on the reference shape.
struct JobPricer {
  JobPricer(const WorkloadSettings& settings, std::shared_ptr<const ThroughputModel> model,
            const ClusterState& cluster,
            std::shared_ptr<const std::vector<std::pair<std::string, double>>> weights, bool exact_shares)
      : model(std::move(model)), cluster(&cluster), weights(std::move(weights)), exact_shares(exact_shares),
        reference(settings.reference_gpu_type), track(settings.track),
        profile_rng(derive_seed(settings.seed, 0x70726f66)) {}  // "prof"

  JobSpec price(TraceJob entry, JobId id) {
    const ThroughputModel& m = *model;
    const std::span<const std::string> profiles = m.profiles();
    JobSpec spec = std::move(entry.spec);
    spec.id = id;
    spec.tracked = !track || (spec.id >= track->first && spec.id < track->second);
    if (!profiles.empty() && std::find(profiles.begin(), profiles.end(), spec.model) == profiles.end()) {
      if (!spec.model.empty())
        throw UserError("job " + std::to_string(spec.id) + (spec.name.empty() ? "" : " ('" + spec.name + "')") +
                        " has model '" + spec.model + "', which throughput model '" + std::string(m.name()) +
                        "' has no data for");
      auto found = draws.find(spec.gpus);
      if (found == draws.end()) found = draws.emplace(spec.gpus, profile_draw(m, *weights, spec.gpus)).first;
      ProfileDraw& draw = found->second;
      const std::size_t pick = exact_shares          ? furthest_below_share(draw)
                               : draw.weights.empty() ? profile_rng.below(draw.names.size())
                                                      : profile_rng.weighted(draw.weights);
      spec.model = *draw.names[pick];
      ++assigned;
      unsuited += draw.unsuited;
    }
    if (spec.gpu_milli == 0 && !(m.rate(spec, cluster->packed_shape(spec, spec.gpus, reference)) > 0))
      throw UserError("job " + std::to_string(spec.id) + (spec.name.empty() ? "" : " ('" + spec.name + "')") +
                      " holds no share of its GPU (a CPU-only pod: [workload] cpu_only = \"keep\"), and "
                      "throughput model '" + std::string(m.name()) +
                      "' gives such a job no progress; the 'linear' model runs it at rate 1");
    if (spec.total_work <= 0 && entry.duration > 0)
      spec.total_work = work_in(m, spec, entry.duration, cluster->packed_shape(spec, spec.gpus, reference));
    if (spec.total_work <= 0) spec.total_work = m.default_work(spec);
    if (!(spec.total_work > 0))
      throw UserError("job " + std::to_string(spec.id) + (spec.name.empty() ? "" : " ('" + spec.name + "')") +
                      " has no duration or work, and throughput model '" + std::string(m.name()) +
                      "' cannot size it");
    return spec;
  }

  std::shared_ptr<const ThroughputModel> model;
  const ClusterState* cluster;  // outlives the pricer (a stream owns its copy)
  // Shared, so that the draws' names stay valid in copies.
  std::shared_ptr<const std::vector<std::pair<std::string, double>>> weights;
  bool exact_shares;
  std::string reference;
  std::optional<std::pair<JobId, JobId>> track;
  Rng profile_rng;
  std::map<int, ProfileDraw> draws;  // by GPU count
  std::size_t assigned = 0, unsuited = 0;
};

}  // namespace

// A stream's generator, the transforms of one job, and its pricing; its
// copies clone the generator.
struct JobStream::State {
  State(std::unique_ptr<JobGenerator> generator, TraceTransforms transforms, std::pair<JobId, JobId> track,
        JobPricer pricer, std::shared_ptr<const ClusterState> cluster)
      : generator(std::move(generator)), transforms(std::move(transforms)), track(track),
        pricer(std::move(pricer)), cluster(std::move(cluster)) {}
  State(const State& other)
      : generator(other.generator->clone()), transforms(other.transforms), track(other.track),
        pricer(other.pricer), cluster(other.cluster), made(other.made) {}

  std::unique_ptr<JobGenerator> generator;
  TraceTransforms transforms;
  std::pair<JobId, JobId> track;
  JobPricer pricer;
  std::shared_ptr<const ClusterState> cluster;  // what pricer.cluster points to
  JobId made = 0;
};

void check_workload(const WorkloadSettings& settings, Diagnostics& diagnostics) {
  (void)read_parts(settings, diagnostics);
}

std::unique_ptr<WorkloadSource> build_workload_source(const WorkloadSettings& settings) {
  return build_parts(settings).source;
}

Workload build_workload(const WorkloadSettings& settings, const ClusterState& cluster,
                        std::shared_ptr<const ThroughputModel> given_model) {
  WorkloadParts parts = build_parts(settings, std::move(given_model));
  const std::string& reference = settings.reference_gpu_type;
  const auto& types = cluster.gpu_types();
  if (!reference.empty() && std::find(types.begin(), types.end(), reference) == types.end())
    throw UserError("[workload] reference_gpu_type '" + reference + "' is not a GPU type of the cluster");
  const ThroughputModel& model = *parts.model;
  if (const std::string problem = model.check(cluster); !problem.empty())
    throw UserError("throughput model '" + std::string(model.name()) + "': " + problem);

  Workload workload;
  workload.model = parts.model;
  auto weights = std::make_shared<const std::vector<std::pair<std::string, double>>>(std::move(parts.profile_weights));
  if (parts.source->endless()) {
    // Priced on the cluster as it starts, as a finite workload's jobs are;
    // the stream keeps its own copy of it.
    auto owned = std::make_shared<const ClusterState>(cluster);
    auto state = std::make_unique<JobStream::State>(parts.source->generate(settings.seed), settings.transforms,
                                                    *settings.track,
                                                    JobPricer(settings, parts.model, *owned, weights,
                                                              parts.exact_shares),
                                                    owned);
    workload.stream.emplace(std::move(state));
    workload.notes.push_back("jobs are generated until the tracked ones (ids " + std::to_string(settings.track->first) +
                             " to " + std::to_string(settings.track->second - 1) + ") are done");
    return workload;
  }

  Trace trace = parts.source->read(settings.seed);
  // Most sources read in arrival order already; a stable sort of sorted jobs
  // changes nothing but still moves every job (a sixth of a 100k-job run).
  const auto by_arrival = [](const TraceJob& a, const TraceJob& b) { return a.spec.arrival < b.spec.arrival; };
  if (!std::is_sorted(trace.jobs.begin(), trace.jobs.end(), by_arrival))
    std::stable_sort(trace.jobs.begin(), trace.jobs.end(), by_arrival);
  workload.notes = std::move(trace.notes);
  apply_transforms(settings.transforms, settings.seed, cluster.installed_gpus(), trace.jobs, workload.notes);
  // Said here, not when a run would get there, so that `tessel validate`
  // says it too; a stream's arrivals are found as they come.
  const auto far = std::find_if(trace.jobs.begin(), trace.jobs.end(),
                                [](const TraceJob& job) { return job.spec.arrival > kLastSimulatedSecond; });
  if (far != trace.jobs.end())  // ids count in arrival order
    throw UserError(arrival_past_the_simulated_clock(far - trace.jobs.begin(), far->spec.name, far->spec.arrival));

  JobPricer pricer(settings, parts.model, cluster, weights, parts.exact_shares);
  workload.jobs.reserve(trace.jobs.size());
  for (TraceJob& entry : trace.jobs)
    workload.jobs.push_back(pricer.price(std::move(entry), static_cast<JobId>(workload.jobs.size())));
  if (pricer.assigned > 0)
    workload.notes.push_back("gave " + count_text(pricer.assigned) + " jobs " +
                             (parts.exact_shares ? "a profile" : "a random profile") + " of '" +
                             std::string(model.name()) + "'" +
                             (parts.exact_shares ? ", in exact shares" : "") +
                             (weights->empty() ? "" : parts.exact_shares ? " of profile_weights"
                                                                          : ", drawn by profile_weights"));
  if (pricer.unsuited > 0)
    workload.notes.push_back(count_text(pricer.unsuited) + " of them have a GPU count no profile suits; they got "
                             "any profile");
  return workload;
}

JobStream::JobStream(std::unique_ptr<State> state) : state_(std::move(state)) {}
JobStream::JobStream(const JobStream& other) : state_(std::make_unique<State>(*other.state_)) {}
JobStream& JobStream::operator=(const JobStream& other) {
  if (this != &other) state_ = std::make_unique<State>(*other.state_);
  return *this;
}
JobStream::JobStream(JobStream&&) noexcept = default;
JobStream& JobStream::operator=(JobStream&&) noexcept = default;
JobStream::~JobStream() = default;

JobSpec JobStream::next() {
  TraceJob job = state_->generator->next();
  apply_job_transforms(state_->transforms, job);
  return state_->pricer.price(std::move(job), state_->made++);
}

std::pair<JobId, JobId> JobStream::track() const { return state_->track; }

}  // namespace tessel

// The synthetic workload of Gavel's generator, also used by Blox:
// Poisson arrivals at `jobs_per_hour`; durations 60*10^U(1.5,3) s for 80% of
// jobs and 60*10^U(3,4) s for the rest; GPU counts 1/2/4/8 with weights
// 0.7/0.1/0.15/0.05. Every number is a key in [workload]. `jobs` is a count,
// or "until_tracked_done": jobs without end, made as the run asks for them.
// Two options make Blox's bursty load (its Figure 13, after msr-fiddle/blox
// simulator_runner/simulator_dual_load.py): `duration_seconds`, durations
// uniform in whole seconds, and `burst`, a second Poisson stream of jobs added
// to the first inside periodic windows.
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "tessel/rng.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

// Durations uniform in whole seconds, both ends included: Python's
// random.randint(low, high), which Blox's simulator_dual_load.py draws each
// job's duration with (_clean_sim_job: 36000..86400, the burst jobs'
// _clean_sim_job_second_work: 600..3600).
using WholeSeconds = std::pair<std::int64_t, std::int64_t>;

double draw_whole_seconds(Rng& rng, const WholeSeconds& range) {
  const auto values = static_cast<std::uint64_t>(range.second - range.first + 1);
  return static_cast<double>(range.first + static_cast<std::int64_t>(rng.below(values)));
}

// The second stream of Blox's bursty load (simulator_dual_load.py GetJobs):
// from every `every` seconds on (the first at `every`: its bursts begin when
// simulator_time % 14400 == 0, at 4 h), for `length` seconds, jobs arrive by a
// Poisson process at `rate_factor` times the base stream's rate
// (_generate_workload_second: jobs_per_hour=4 * load), with their own
// durations. What Blox's code feeds its scheduler departs from this
// (experiments/blox-fig12-13/README.md); this is the load the paper describes.
struct BurstParameters {
  double every = 4 * 3600.0;   // 14400 s: `simulator_time % 14400 == 0` starts a burst
  // The code ends a burst at the next multiple of 6 h (simulator_time % 21600
  // == 0): after 2 h, 4 h or a single round in turn (4-6, 8-12, 12-12 h, ...),
  // 2 h on average; make_bursty_trace.py made the same choice.
  double length = 2 * 3600.0;
  double rate_factor = 4;      // jobs_per_hour=4 * load
  WholeSeconds duration_seconds{600, 3600};  // _clean_sim_job_second_work: random.randint(600, 3600)
};

// The generator's numbers; `jobs` is how many a finite workload holds.
struct SyntheticParameters {
  std::int64_t jobs = 400;
  bool endless = false;      // jobs = "until_tracked_done": no count, the run stops the generator
  double jobs_per_hour = 6;  // 0: every job arrives at time 0
  std::vector<double> gpu_counts{1, 2, 4, 8};
  std::vector<double> gpu_weights{0.7, 0.1, 0.15, 0.05};
  double short_fraction = 0.8;
  std::vector<double> short_log10_minutes{1.5, 3};
  std::vector<double> long_log10_minutes{3, 4};
  // Set: durations uniform in these whole seconds instead of the short/long mix.
  std::optional<WholeSeconds> duration_seconds;
  // Set: a second stream of bursts, merged with the first by arrival; jobs
  // are then labelled by stream (tenant "base" or "burst").
  std::optional<BurstParameters> burst;
};

// The base stream: Poisson arrivals at jobs_per_hour, the first at time 0.
class BaseJobs {
 public:
  explicit BaseJobs(std::uint64_t seed) : rng_(seed) {}

  TraceJob next(const SyntheticParameters& p) {
    if (made_ > 0 && p.jobs_per_hour > 0) now_ += rng_.exponential(p.jobs_per_hour / 3600.0);
    ++made_;
    TraceJob job;
    job.spec.arrival = now_;
    job.spec.gpus = static_cast<int>(p.gpu_counts[rng_.weighted(p.gpu_weights)]);
    job.spec.min_gpus = job.spec.max_gpus = job.spec.gpus;
    if (p.duration_seconds) {
      job.duration = draw_whole_seconds(rng_, *p.duration_seconds);
    } else {
      const auto& range = rng_.uniform() < p.short_fraction ? p.short_log10_minutes : p.long_log10_minutes;
      job.duration = 60.0 * std::pow(10.0, rng_.uniform(range[0], range[1]));
    }
    return job;
  }

 private:
  Rng rng_;
  double now_ = 0;
  std::uint64_t made_ = 0;
};

// The burst stream: a Poisson process at rate_factor x jobs_per_hour inside
// [k*every, k*every + length), k >= 1. Restarting the clock at each window's
// start is exact, the exponential gaps being memoryless.
class BurstJobs {
 public:
  // Its own random stream (the seed plus an arbitrary odd constant), so that
  // adding bursts leaves the base stream's jobs as they were.
  BurstJobs(const SyntheticParameters& p, std::uint64_t seed)
      : rng_(seed + 0x5851f42d4c957f2dULL), window_(p.burst->every), now_(p.burst->every) {}

  TraceJob next(const SyntheticParameters& p) {
    const BurstParameters& b = *p.burst;
    const double rate = b.rate_factor * p.jobs_per_hour / 3600.0;
    now_ += rng_.exponential(rate);
    while (now_ >= window_ + b.length) {  // past this burst: the next one starts afresh
      window_ += b.every;
      now_ = window_ + rng_.exponential(rate);
    }
    TraceJob job;
    job.spec.arrival = now_;
    job.spec.gpus = static_cast<int>(p.gpu_counts[rng_.weighted(p.gpu_weights)]);
    job.spec.min_gpus = job.spec.max_gpus = job.spec.gpus;
    job.spec.tenant = "burst";
    job.duration = draw_whole_seconds(rng_, b.duration_seconds);
    return job;
  }

 private:
  Rng rng_;
  double window_;  // start of the current burst window
  double now_;
};

// One job after another: a finite workload reads `jobs` of them, one without
// end as many as the run asks for; the same seed gives the same jobs either
// way. With bursts, the next job of either stream, whichever arrives first
// (the base one on a tie), so that ids count both streams in arrival order,
// as Blox's job counter does.
class SyntheticGenerator final : public JobGenerator {
 public:
  SyntheticGenerator(std::shared_ptr<const SyntheticParameters> parameters, std::uint64_t seed)
      : p_(std::move(parameters)), base_(seed) {
    if (p_->burst) burst_.emplace(*p_, seed);
  }

  TraceJob next() override {
    if (!burst_) return base_.next(*p_);
    if (!next_base_) {
      next_base_ = base_.next(*p_);
      next_base_->spec.tenant = "base";
    }
    if (!next_burst_) next_burst_ = burst_->next(*p_);
    std::optional<TraceJob>& first =
        next_burst_->spec.arrival < next_base_->spec.arrival ? next_burst_ : next_base_;
    TraceJob job = std::move(*first);
    first.reset();
    return job;
  }

  std::unique_ptr<JobGenerator> clone() const override { return std::make_unique<SyntheticGenerator>(*this); }

 private:
  std::shared_ptr<const SyntheticParameters> p_;
  BaseJobs base_;
  std::optional<BurstJobs> burst_;
  std::optional<TraceJob> next_base_, next_burst_;  // drawn, not yet given out
};

class SyntheticWorkload final : public WorkloadSource {
 public:
  explicit SyntheticWorkload(std::shared_ptr<const SyntheticParameters> parameters)
      : p_(std::move(parameters)) {}

  Trace read(std::uint64_t seed) const override {
    SyntheticGenerator generator(p_, seed);
    Trace trace;
    trace.jobs.reserve(static_cast<std::size_t>(p_->jobs));
    for (std::int64_t i = 0; i < p_->jobs; ++i) trace.jobs.push_back(generator.next());
    return trace;
  }

  bool endless() const override { return p_->endless; }
  std::unique_ptr<JobGenerator> generate(std::uint64_t seed) const override {
    return std::make_unique<SyntheticGenerator>(p_, seed);
  }

 private:
  std::shared_ptr<const SyntheticParameters> p_;
};

void check_range(TableReader& reader, std::string_view key, const std::vector<double>& range) {
  if (range.size() != 2 || range[0] > range[1])
    reader.error(key, "'" + std::string(key) + "' in [workload] must be [low, high] with low <= high");
}

// `key` as [low, high] whole seconds, 1 <= low <= high; nullopt after a reported problem.
std::optional<WholeSeconds> read_whole_seconds(TableReader& reader, std::string_view key) {
  const auto range = reader.numbers(key, std::nullopt, 1, 1e9);
  if (!range) return std::nullopt;
  if (range->size() != 2 || (*range)[0] > (*range)[1] || (*range)[0] != std::floor((*range)[0]) ||
      (*range)[1] != std::floor((*range)[1])) {
    reader.error(key, "'" + std::string(key) + "' in [" + reader.table_name() +
                          "] must be [low, high] whole seconds with low <= high");
    return std::nullopt;
  }
  return WholeSeconds{static_cast<std::int64_t>((*range)[0]), static_cast<std::int64_t>((*range)[1])};
}

// [workload] burst = { every_hours, hours, rate_factor, duration_seconds }.
std::optional<BurstParameters> read_burst(TableReader& workload, double jobs_per_hour) {
  const toml::table* table = workload.table("burst");
  if (table == nullptr) return std::nullopt;
  TableReader reader = workload.nested(table, workload.table_name() + ".burst");
  BurstParameters b;
  bool ok = true;
  for (auto [key, seconds] : {std::pair<std::string_view, double*>{"every_hours", &b.every}, {"hours", &b.length}}) {
    const auto hours = reader.number(key, *seconds / 3600, 0);
    if (hours && *hours <= 0) {
      reader.error(key, "'" + std::string(key) + "' in [workload.burst] must be > 0");
      ok = false;
    } else if (hours)
      *seconds = 3600 * *hours;
  }
  if (ok && b.length > b.every) {
    reader.error("hours", "'hours' in [workload.burst] must be at most 'every_hours': a burst ends before "
                              "the next one starts");
    ok = false;
  }
  const auto factor = reader.number("rate_factor", b.rate_factor, 0);
  if (factor && *factor <= 0) {
    reader.error("rate_factor", "'rate_factor' in [workload.burst] must be > 0");
    ok = false;
  } else if (factor)
    b.rate_factor = *factor;
  if (reader.present("duration_seconds")) {
    const auto durations = read_whole_seconds(reader, "duration_seconds");
    ok = ok && durations;
    if (durations) b.duration_seconds = *durations;
  }
  reader.finish();
  if (jobs_per_hour <= 0) {
    workload.error("burst", "'burst' in [workload] needs 'jobs_per_hour' > 0: the bursts come at "
                            "'rate_factor' times its rate");
    ok = false;
  }
  return ok ? std::optional(b) : std::nullopt;
}

}  // namespace

std::unique_ptr<WorkloadSource> parse_synthetic_workload(TableReader& reader) {
  auto w = std::make_shared<SyntheticParameters>();
  // A count, or "until_tracked_done": generate until every tracked job is
  // done (Blox's simulator; check_workload asks for `track` with it).
  if (const toml::node* jobs = reader.node("jobs"); jobs != nullptr && jobs->is_string()) {
    const auto value = reader.string("jobs", std::nullopt);
    if (value == "until_tracked_done")
      w->endless = true;
    else if (value)
      reader.error("jobs", "'jobs' in [workload] must be a count of jobs, or \"until_tracked_done\" (generate "
                           "until every tracked job is done), got '" + *value + "'");
  } else
    w->jobs = read_job_count(reader, w->jobs);
  w->jobs_per_hour = reader.number("jobs_per_hour", w->jobs_per_hour, 0).value_or(w->jobs_per_hour);
  w->gpu_counts = reader.numbers("gpu_counts", w->gpu_counts, 1, 1 << 20).value_or(w->gpu_counts);
  w->gpu_weights = reader.numbers("gpu_weights", w->gpu_weights, 0).value_or(w->gpu_weights);
  w->short_fraction = reader.number("short_fraction", w->short_fraction, 0, 1).value_or(w->short_fraction);
  w->short_log10_minutes =
      reader.numbers("short_log10_minutes", w->short_log10_minutes, -3, 6).value_or(w->short_log10_minutes);
  w->long_log10_minutes =
      reader.numbers("long_log10_minutes", w->long_log10_minutes, -3, 6).value_or(w->long_log10_minutes);

  for (double count : w->gpu_counts)
    if (count != std::floor(count)) reader.error("gpu_counts", "'gpu_counts' in [workload] must hold whole numbers");
  double total_weight = 0;
  for (double weight : w->gpu_weights) total_weight += weight;
  if (w->gpu_weights.size() != w->gpu_counts.size() || w->gpu_counts.empty() || total_weight <= 0)
    reader.error("gpu_weights", "'gpu_weights' in [workload] needs one positive-summing weight per "
                                "entry of 'gpu_counts' (" + std::to_string(w->gpu_counts.size()) + ")");
  check_range(reader, "short_log10_minutes", w->short_log10_minutes);
  check_range(reader, "long_log10_minutes", w->long_log10_minutes);
  if (reader.present("duration_seconds")) {
    w->duration_seconds = read_whole_seconds(reader, "duration_seconds");
    // It replaces the short/long mix: setting both contradicts.
    for (const char* key : {"short_fraction", "short_log10_minutes", "long_log10_minutes"})
      if (reader.present(key))
        reader.error(key, "'" + std::string(key) + "' in [workload] shapes the short/long duration mix, which "
                          "'duration_seconds' replaces: give one or the other");
  }
  w->burst = read_burst(reader, w->jobs_per_hour);
  return std::make_unique<SyntheticWorkload>(std::move(w));
}

}  // namespace tessel

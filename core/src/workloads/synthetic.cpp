// The synthetic workload of Gavel's generator, also used by Blox:
// Poisson arrivals at `jobs_per_hour`; durations 60*10^U(1.5,3) s for 80% of
// jobs and 60*10^U(3,4) s for the rest; GPU counts 1/2/4/8 with weights
// 0.7/0.1/0.15/0.05. Every number is a key in [workload]. `jobs` is a count,
// or "until_tracked_done": jobs without end, made as the run asks for them.
#include <cmath>
#include <memory>

#include "tessel/rng.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

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
};

// One job after another: a finite workload reads `jobs` of them, one without
// end as many as the run asks for; the same seed gives the same jobs either way.
class SyntheticGenerator final : public JobGenerator {
 public:
  SyntheticGenerator(std::shared_ptr<const SyntheticParameters> parameters, std::uint64_t seed)
      : p_(std::move(parameters)), rng_(seed) {}

  TraceJob next() override {
    if (made_ > 0 && p_->jobs_per_hour > 0) now_ += rng_.exponential(p_->jobs_per_hour / 3600.0);
    ++made_;
    TraceJob job;
    job.spec.arrival = now_;
    job.spec.gpus = static_cast<int>(p_->gpu_counts[rng_.weighted(p_->gpu_weights)]);
    job.spec.min_gpus = job.spec.max_gpus = job.spec.gpus;
    const auto& range = rng_.uniform() < p_->short_fraction ? p_->short_log10_minutes : p_->long_log10_minutes;
    job.duration = 60.0 * std::pow(10.0, rng_.uniform(range[0], range[1]));
    return job;
  }

  std::unique_ptr<JobGenerator> clone() const override { return std::make_unique<SyntheticGenerator>(*this); }

 private:
  std::shared_ptr<const SyntheticParameters> p_;
  Rng rng_;
  double now_ = 0;
  std::uint64_t made_ = 0;
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
    w->jobs = reader.integer("jobs", w->jobs, 1, 100'000'000).value_or(w->jobs);
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
  return std::make_unique<SyntheticWorkload>(std::move(w));
}

}  // namespace tessel

// The synthetic workload of Gavel's generator, also used by Blox:
// Poisson arrivals at `jobs_per_hour`; durations 60*10^U(1.5,3) s for 80% of
// jobs and 60*10^U(3,4) s for the rest; GPU counts 1/2/4/8 with weights
// 0.7/0.1/0.15/0.05. Every number is a key in [workload].
#include <cmath>

#include "tessel/rng.hpp"
#include "workloads/kinds.hpp"

namespace tessel {

namespace {

class SyntheticWorkload final : public WorkloadSource {
 public:
  std::int64_t jobs = 400;
  double jobs_per_hour = 6;  // 0: every job arrives at time 0
  std::vector<double> gpu_counts{1, 2, 4, 8};
  std::vector<double> gpu_weights{0.7, 0.1, 0.15, 0.05};
  double short_fraction = 0.8;
  std::vector<double> short_log10_minutes{1.5, 3};
  std::vector<double> long_log10_minutes{3, 4};

  Trace read(std::uint64_t seed) const override {
    Rng rng(seed);
    Trace trace;
    auto& out = trace.jobs;
    out.reserve(static_cast<std::size_t>(jobs));
    double now = 0;
    for (std::int64_t i = 0; i < jobs; ++i) {
      if (i > 0 && jobs_per_hour > 0) now += rng.exponential(jobs_per_hour / 3600.0);
      TraceJob job;
      job.spec.arrival = now;
      job.spec.gpus = static_cast<int>(gpu_counts[rng.weighted(gpu_weights)]);
      job.spec.min_gpus = job.spec.max_gpus = job.spec.gpus;
      const auto& range = rng.uniform() < short_fraction ? short_log10_minutes : long_log10_minutes;
      job.duration = 60.0 * std::pow(10.0, rng.uniform(range[0], range[1]));
      out.push_back(std::move(job));
    }
    return trace;
  }
};

void check_range(TableReader& reader, std::string_view key, const std::vector<double>& range) {
  if (range.size() != 2 || range[0] > range[1])
    reader.error(key, "'" + std::string(key) + "' in [workload] must be [low, high] with low <= high");
}

}  // namespace

std::unique_ptr<WorkloadSource> parse_synthetic_workload(TableReader& reader) {
  auto w = std::make_unique<SyntheticWorkload>();
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
  return w;
}

}  // namespace tessel

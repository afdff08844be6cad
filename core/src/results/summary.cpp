#include "results/summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>

namespace tessel {

namespace {

template <auto Field>
double get(const RunSummary& s) {
  return static_cast<double>(s.*Field);
}

template <auto Field>
void set(RunSummary& s, double value) {
  using T = std::remove_reference_t<decltype(s.*Field)>;
  if constexpr (std::is_integral_v<T>)
    s.*Field = static_cast<T>(std::llround(value));
  else
    s.*Field = value;
}

template <auto Field>
constexpr Figure figure(const char* name, const char* title, FigureUnit unit, const char* definition,
                        bool rare = false) {
  using T = std::remove_reference_t<decltype(std::declval<RunSummary&>().*Field)>;
  return {name,       title,       unit, std::is_integral_v<T> ? Averaging::rounded_mean : Averaging::mean,
          definition, &get<Field>, &set<Field>, rare};
}

constexpr Figure kFigures[] = {
    figure<&RunSummary::jobs>("jobs", "jobs", FigureUnit::count, "tracked jobs"),
    figure<&RunSummary::finished>("finished", "finished", FigureUnit::count, "tracked jobs that finished"),
    figure<&RunSummary::unfinished>("unfinished", "unfinished", FigureUnit::count,
                                    "tracked jobs that did not finish: rejected, failed or still waiting", true),
    figure<&RunSummary::avg_jct>("avg_jct_s", "avg JCT", FigureUnit::seconds,
                                 "mean of finish - arrival over tracked finished jobs"),
    figure<&RunSummary::p50_jct>("p50_jct_s", "p50 JCT", FigureUnit::seconds,
                                 "median JCT (linear interpolation between ranks)"),
    figure<&RunSummary::p95_jct>("p95_jct_s", "p95 JCT", FigureUnit::seconds, "95th percentile of JCT"),
    figure<&RunSummary::p99_jct>("p99_jct_s", "p99 JCT", FigureUnit::seconds, "99th percentile of JCT"),
    figure<&RunSummary::avg_queueing_delay>("avg_queueing_delay_s", "avg queueing", FigureUnit::seconds,
                                            "mean of first start - arrival over tracked jobs that started"),
    figure<&RunSummary::makespan>("makespan_s", "makespan", FigureUnit::seconds,
                                  "last finish - first arrival, over all jobs"),
    figure<&RunSummary::gpu_utilization>("gpu_utilization", "GPU util", FigureUnit::fraction,
                                         "GPU-seconds held by jobs / GPU-seconds the cluster offered"),
    // Only runs whose jobs never leave end with GPUs allocated.
    figure<&RunSummary::gpu_allocation>("gpu_allocation", "GPU alloc", FigureUnit::fraction,
                                        "GPU shares held when the run ended / the cluster's GPUs (FGD's metric)",
                                        true),
    figure<&RunSummary::preemptions>("preemptions", "preemptions", FigureUnit::count, "preemptions of all jobs"),
    // Last, so that the columns before it keep their places in CSV files read by position.
    figure<&RunSummary::avg_jct_bound>("avg_jct_bound_s", "avg JCT bound", FigureUnit::seconds,
                                       "mean of finish - arrival over tracked finished jobs and of run end - "
                                       "arrival over tracked jobs still waiting or running at the end (rejected, "
                                       "failed and cancelled ones left out): a lower bound on the avg JCT of the "
                                       "run continued until they finish"),
};

}  // namespace

std::span<const Figure> figures() { return kFigures; }

const Figure* find_figure(std::string_view name) {
  for (const Figure& f : kFigures)
    if (name == f.name) return &f;
  return nullptr;
}

std::string figure_title(const Figure& figure) {
  switch (figure.unit) {
    case FigureUnit::seconds: return std::string(figure.title) + " (s)";
    case FigureUnit::fraction: return std::string(figure.title) + " (fraction)";
    case FigureUnit::count: return figure.title;
  }
  return figure.title;
}

RunSummary average(std::span<const RunSummary> runs) {
  RunSummary mean;
  if (runs.empty()) return mean;
  for (const Figure& f : kFigures) {
    double sum = 0;
    for (const RunSummary& run : runs) sum += f.get(run);
    const double value = sum / static_cast<double>(runs.size());
    f.set(mean, f.over_seeds == Averaging::rounded_mean ? std::round(value) : value);
  }
  return mean;
}

double percentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double position = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - static_cast<double>(below));
}

RunSummary summarize(std::span<const JobRecord> jobs, double capacity_gpu_seconds, int cluster_gpus,
                     double end_time) {
  RunSummary s;
  std::vector<double> jcts;
  // Time in the system of the tracked jobs still there at the end; a job
  // that had not arrived yet (a trace cut short) has spent none.
  double waited_to_end = 0;
  std::size_t still_in = 0;
  double queueing = 0;
  std::size_t started = 0;
  double first_arrival = std::numeric_limits<double>::infinity();
  double last_finish = -std::numeric_limits<double>::infinity();
  double held = 0;
  double held_at_end = 0;  // in GPUs
  for (const JobRecord& job : jobs) {
    held += job.gpu_seconds;
    held_at_end += job.held_gpus * (job.gpu_milli / 1000.0);
    s.preemptions += job.preemptions;
    first_arrival = std::min(first_arrival, job.arrival);
    if (job.finish && job.status == "finished") last_finish = std::max(last_finish, *job.finish);
    if (!job.tracked) continue;
    ++s.jobs;
    if (job.first_start) {
      queueing += *job.first_start - job.arrival;
      ++started;
    }
    if (job.status == "finished" && job.finish) {
      jcts.push_back(*job.finish - job.arrival);
    } else if (job.status == "pending" || job.status == "queued" || job.status == "running" ||
               job.status == "preempted") {  // not rejected, failed or (real nodes) cancelled
      waited_to_end += std::max(0.0, end_time - job.arrival);
      ++still_in;
    }
  }
  std::sort(jcts.begin(), jcts.end());
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();  // a figure over no jobs
  s.avg_jct = s.p50_jct = s.p95_jct = s.p99_jct = s.avg_jct_bound = s.avg_queueing_delay = s.makespan = kNone;
  s.finished = jcts.size();
  s.unfinished = s.jobs - s.finished;
  double jct_sum = 0;
  for (double x : jcts) jct_sum += x;
  if (!jcts.empty()) {
    s.avg_jct = jct_sum / static_cast<double>(jcts.size());
    s.p50_jct = percentile(jcts, 50);
    s.p95_jct = percentile(jcts, 95);
    s.p99_jct = percentile(jcts, 99);
  }
  if (!jcts.empty() || still_in)
    s.avg_jct_bound = (jct_sum + waited_to_end) / static_cast<double>(jcts.size() + still_in);
  if (started) s.avg_queueing_delay = queueing / static_cast<double>(started);
  if (std::isfinite(last_finish)) s.makespan = last_finish - first_arrival;  // a job finished
  if (capacity_gpu_seconds > 0) s.gpu_utilization = held / capacity_gpu_seconds;
  if (cluster_gpus > 0) s.gpu_allocation = held_at_end / cluster_gpus;
  return s;
}

std::vector<GroupSummary> summarize_by_vc(std::span<const JobRecord> jobs, double capacity_gpu_seconds,
                                          int cluster_gpus, double end_time) {
  std::map<std::string, std::vector<JobRecord>> by_vc;  // in name order
  for (const JobRecord& job : jobs) by_vc[job.vc].push_back(job);
  std::vector<GroupSummary> groups;
  groups.reserve(by_vc.size());
  for (const auto& [vc, members] : by_vc)
    groups.push_back({vc, summarize(members, capacity_gpu_seconds, cluster_gpus, end_time)});
  return groups;
}

}  // namespace tessel

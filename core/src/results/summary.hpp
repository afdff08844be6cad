// The per-run figures every report prints, computed one way for simulated
// and real runs alike, from the rows of the `jobs` table.
//
//   JCT               finish - arrival, over tracked finished jobs
//   JCT bound         the same, with each tracked job still in the system when
//                     the run ended counted to that end: a lower bound on the
//                     average of a run continued until they finish, which is
//                     the average Blox reports (all tracked jobs, run until
//                     the last of them is done)
//   queueing delay    first start - arrival, over tracked jobs that started
//   percentiles       linear interpolation between ranks (numpy's default)
//   makespan          last finish - first arrival, over all jobs
//   GPU utilization   GPU-seconds held by jobs / GPU-seconds the cluster had
//   GPU allocation    GPU shares held when the run ended / the cluster's GPUs
//                     (the metric of FGD, ATC'23: allocated GPU milli / total;
//                     0 for a run that ends with every job done)
//   preemptions       over all jobs
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "results/job_row.hpp"

namespace tessel {

// A figure over no jobs (the JCTs of a run where no tracked job finished)
// is NaN, not 0: it is stored as NULL, and reports show it as "-" (CSV:
// empty, JSON: null).
struct RunSummary {
  std::size_t jobs = 0;        // tracked
  std::size_t finished = 0;    // tracked and finished
  std::size_t unfinished = 0;  // tracked, not finished (rejected, failed, still waiting)
  double avg_jct = 0, p50_jct = 0, p95_jct = 0, p99_jct = 0;
  double avg_jct_bound = 0;  // unfinished jobs still in the system counted to the run's end
  double avg_queueing_delay = 0;
  double makespan = 0;
  double gpu_utilization = 0;  // 0..1
  double gpu_allocation = 0;   // 0..1, at the end of the run
  std::int64_t preemptions = 0;
};

// The one list of figures. A figure has one name everywhere: the `metrics`
// table, the CSV columns and JSON fields of `report`, `plot --metric` and the
// Python package. Times are in seconds wherever a machine reads them.
enum class FigureUnit { count, seconds, fraction };
// How a sweep group (the runs of one point over seeds and replicates)
// combines its runs' values: the arithmetic mean, rounded for counts, since a
// group stands for one typical run.
enum class Averaging { mean, rounded_mean };

struct Figure {
  const char* name;        // "avg_jct_s"
  const char* title;       // a table's header: "avg JCT"
  FigureUnit unit;
  Averaging over_seeds;
  const char* definition;  // how it is computed, for people
  double (*get)(const RunSummary&);
  void (*set)(RunSummary&, double);
  bool rare = false;  // most runs leave it at 0: a table shows it only where some run does not
};

std::span<const Figure> figures();
// nullptr for a name that is no figure.
const Figure* find_figure(std::string_view name);
// `title (unit)`, e.g. "avg JCT (s)", for axes and lists.
std::string figure_title(const Figure& figure);

// The figures of a group of runs, each combined as its Averaging says.
RunSummary average(std::span<const RunSummary> runs);

// `capacity_gpu_seconds` is the GPU time the cluster offered over the run,
// `cluster_gpus` the GPUs it had when the run ended, `end_time` the run time
// when it ended.
RunSummary summarize(std::span<const JobRecord> jobs, double capacity_gpu_seconds, int cluster_gpus,
                     double end_time);

// The jobs split by virtual cluster (JobRecord::vc, "" for none), each part
// summarised by summarize() against the whole run's capacity: a VC's GPU
// utilization is the share of the cluster's GPU time its jobs held (its GPU
// allocation, of the cluster's GPUs at the end), its makespan runs from its
// first arrival to its last finish. VCs in name order.
struct GroupSummary {
  std::string group;
  RunSummary summary;
};
std::vector<GroupSummary> summarize_by_vc(std::span<const JobRecord> jobs, double capacity_gpu_seconds,
                                          int cluster_gpus, double end_time);

// Linear-interpolation percentile of sorted values; p in [0, 100].
double percentile(std::span<const double> sorted, double p);

}  // namespace tessel

// The per-run figures every report prints, computed one way for simulated
// and real runs alike, from the rows of the `jobs` table.
//
//   JCT               finish - arrival, over tracked finished jobs
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
#include <type_traits>
#include <vector>

#include "tessel/ids.hpp"
#include "tessel/job.hpp"

namespace tessel {

struct JobRecord {
  JobId id = 0;
  std::string name, tenant, vc, model;
  double arrival = 0;
  std::optional<double> first_start, finish;
  int gpus = 0, min_gpus = 0, max_gpus = 0;
  int gpu_milli = 1000;  // share of each GPU, 1000 = whole GPUs
  int held_gpus = 0;     // GPUs the job held when the run ended (0 unless still running)
  double total_work = 0, executed_work = 0, attained_service = 0, gpu_seconds = 0;
  int preemptions = 0, attempts = 0;
  std::string status;
  bool tracked = true;
  double priority = 1;
};

// `job` as it stands: its spec, its progress, and the GPUs it holds now.
JobRecord job_record(const JobState& job);
// The job a record describes, as far as a record can: spec, progress and
// counters, but no GPUs (a running job comes back waiting), for a runner
// that restores its jobs from the database. A status tessel does not know
// (a real-node job's 'cancelled') reads as failed.
JobState job_state(const JobRecord& record);

struct RunSummary {
  std::size_t jobs = 0;        // tracked
  std::size_t finished = 0;    // tracked and finished
  std::size_t unfinished = 0;  // tracked, not finished (rejected, failed, still waiting)
  double avg_jct = 0, p50_jct = 0, p95_jct = 0, p99_jct = 0;
  double avg_queueing_delay = 0;
  double makespan = 0;
  double gpu_utilization = 0;  // 0..1
  double gpu_allocation = 0;   // 0..1, at the end of the run
  std::int64_t preemptions = 0;
};

// Calls visit(name, field) for every figure of `summary`, by the name the
// `metrics` table stores it under. The one list of figures: the store writes
// them, and a sweep's groups average them, through it.
template <class Summary, class Visit>
  requires std::is_same_v<std::remove_const_t<Summary>, RunSummary>
void visit_figures(Summary& summary, Visit&& visit) {
  visit("jobs", summary.jobs);
  visit("finished", summary.finished);
  visit("unfinished", summary.unfinished);
  visit("avg_jct", summary.avg_jct);
  visit("p50_jct", summary.p50_jct);
  visit("p95_jct", summary.p95_jct);
  visit("p99_jct", summary.p99_jct);
  visit("avg_queueing_delay", summary.avg_queueing_delay);
  visit("makespan", summary.makespan);
  visit("gpu_utilization", summary.gpu_utilization);
  visit("gpu_allocation", summary.gpu_allocation);
  visit("preemptions", summary.preemptions);
}

// `capacity_gpu_seconds` is the GPU time the cluster offered over the run,
// `cluster_gpus` the GPUs it had when the run ended.
RunSummary summarize(std::span<const JobRecord> jobs, double capacity_gpu_seconds, int cluster_gpus);

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
                                          int cluster_gpus);

// Linear-interpolation percentile of sorted values; p in [0, 100].
double percentile(std::span<const double> sorted, double p);

}  // namespace tessel

// Workloads: where jobs come from.
//
// A workload kind (`[workload] kind = ...`) is a parser that reads its own
// keys from [workload] and returns a WorkloadSource; the source produces the
// jobs when the run starts. build_jobs then orders them by arrival, numbers
// them, marks the tracked ones and turns durations into work with the
// throughput model. Adding a trace format means adding one WorkloadKind.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/toml_document.hpp"
#include "engine/errors.hpp"
#include "tessel/cluster.hpp"
#include "tessel/job.hpp"
#include "tessel/throughput.hpp"

namespace tessel {

// One job as a trace or generator describes it.
struct TraceJob {
  JobSpec spec;         // id is assigned later; total_work may be left 0
  double duration = 0;  // seconds on spec.gpus packed GPUs of the reference type,
                        // turned into work when spec.total_work is 0
};

// What a source read: the jobs, and lines for the user about what it left
// out ("skipped 312 jobs with no attempts").
struct Trace {
  std::vector<TraceJob> jobs;
  std::vector<std::string> notes;
};

class WorkloadSource {
 public:
  virtual ~WorkloadSource() = default;
  // Produces the jobs, in any order. Throws TraceError on malformed input.
  virtual Trace read(std::uint64_t seed) const = 0;
};

using WorkloadParser = std::unique_ptr<WorkloadSource> (*)(TableReader& workload,
                                                           const TomlDocument& document);

struct WorkloadKind {
  std::string_view name;
  WorkloadParser parse;
  std::string_view description;
};

std::span<const WorkloadKind> workload_kinds();

// Reshaping any trace, applied in this order.
struct TraceTransforms {
  std::optional<std::pair<double, double>> window;  // keep arrivals in [start, end), shifted to start at 0
  std::vector<std::string> vcs;                     // keep only these virtual clusters (empty: all)
  std::vector<std::string> tenants;                 // keep only these users (empty: all)
  std::optional<std::int64_t> max_jobs;             // then keep the first N by arrival
  bool shuffle = false;                             // permute the jobs over the arrival times (seeded)
  // Resample until the jobs ask for this multiple of the cluster's GPUs (FGD's
  // workload tuning): random jobs appended, or dropped when there are more.
  std::optional<double> gpu_demand_ratio;
  std::optional<double> poisson_jobs_per_hour;      // re-draw arrivals; sizes, durations and order stay
  double arrival_rate_scale = 1;                    // load factor: arrival times divided by it
  double duration_scale = 1;                        // durations multiplied by it
  // Make every job elastic: it may run on [min(elastic_min_gpus, gpus),
  // max(elastic_max_gpus, gpus)] GPUs. 0: leave the trace's own range.
  int elastic_min_gpus = 0;
  int elastic_max_gpus = 0;
  // Only jobs of these models (JobSpec::model, as the trace names them) are
  // made elastic; empty: all of them.
  std::vector<std::string> elastic_models;
};

struct WorkloadConfig {
  std::string kind;
  std::uint64_t seed = 1;
  // Jobs with ids in [first, last) count in the metrics; all jobs when unset.
  std::optional<std::pair<JobId, JobId>> track;
  std::shared_ptr<const WorkloadSource> source;
  std::shared_ptr<const ThroughputModel> model;
  std::string reference_gpu_type;  // durations were measured on this type (default: the cluster's first)
  // Relative weights of the model's profiles when a job without one is given
  // one at random; profiles not listed are never drawn. Empty: all equally.
  std::vector<std::pair<std::string, double>> profile_weights;
  TraceTransforms transforms;
};

// Reads [workload]: kind, seed, track, model, transforms and the kind's own keys.
WorkloadConfig read_workload_config(TableReader& workload, const TomlDocument& document);

struct Workload {
  std::vector<JobSpec> jobs;  // in arrival order, ids 0..n-1 in that order
  std::vector<std::string> notes;
};

// Reads the source, applies the transforms (gpu_demand_ratio against the
// cluster's installed GPUs), gives jobs without a profile one the throughput
// model knows (at random, seeded: among the profiles that suit the job's GPU
// count, ThroughputModel::profile_suits, weighted by `profile_weights`), and
// prices each duration on the reference shape: its request packed onto the
// reference GPU type. Throws UserError (TraceError for malformed traces).
Workload build_workload(const WorkloadConfig& config, const ClusterState& cluster);

// A count for notes, with thousands separators: "82,247".
std::string count_text(std::size_t n);

// A malformed trace: names the file, the line and the field.
class TraceError : public UserError {
 public:
  TraceError(const std::string& file, std::size_t line, const std::string& field,
             const std::string& message)
      : UserError(file + (line ? ":" + std::to_string(line) : std::string()) +
                  (field.empty() ? std::string() : ": field '" + field + "'") + ": " + message) {}
};

}  // namespace tessel

// [workload] as read: plain settings, and the keys only the rooms that build
// from them know. The workload kinds (workloads/) and the throughput models
// (models/) build on config, so config cannot check their keys: it reads its
// own, defers the rest (DeferredTable), and the experiment loader has
// check_workload (workloads/workload.hpp) finish the reading before any run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/toml_document.hpp"
#include "tessel/job.hpp"

namespace tessel {

// A throughput model as named: `model = "linear"`, or a table with `name`
// and the model's own arguments, which models/ reads.
struct ModelSettings {
  std::optional<std::string> name;  // as written; none after a reported problem: nothing to build
  DeferredTable arguments;  // the table (`name` read), or no table for a bare name
  std::string where;        // of the key naming the model
};

// Reads the model named by `key` in `parent`; "linear" when absent. Models
// that wrap another (placement-penalty's `base`) read it the same way.
ModelSettings read_model_settings(TableReader& parent, std::shared_ptr<const TomlDocument> document,
                                  std::string_view key = "model");

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

struct WorkloadSettings {
  // As written, "" included (workloads/ checks it against the kinds); none
  // after a reported problem.
  std::optional<std::string> kind;
  std::uint64_t seed = 1;
  // Jobs with ids in [first, last) count in the metrics; all jobs when unset.
  std::optional<std::pair<JobId, JobId>> track;
  // With jobs without end (jobs = "until_tracked_done"): the run stops this
  // long after the last tracked job arrived, done or not (a policy that
  // starves a tracked job forever would otherwise never end). Unset: no limit.
  std::optional<double> give_up_seconds;
  ModelSettings model;
  std::string reference_gpu_type;  // durations were measured on this type (default: the cluster's first)
  TraceTransforms transforms;
  // The rest of [workload]: the kind's own keys, and `profile_weights`
  // (relative weights of the model's profiles, which only the model knows).
  DeferredTable options;
};

// Reads [workload]'s own keys; the kind's keys are left in `options`.
WorkloadSettings read_workload_settings(TableReader& workload, std::shared_ptr<const TomlDocument> document);

}  // namespace tessel

// Workloads: where jobs come from, built from the settings config read
// (config/workload_settings.hpp).
//
// A workload kind (`[workload] kind = ...`) is a parser that reads its own
// keys from [workload] and returns a WorkloadSource; the source produces the
// jobs when the run starts. build_workload then orders them by arrival,
// numbers them, marks the tracked ones and turns durations into work with the
// throughput model (models/). Adding a trace format means adding one
// WorkloadKind.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/workload_settings.hpp"
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

// Jobs one at a time, in arrival order, for a source without end. A clone
// goes on from the same point and makes the same jobs (a simulation's fork).
class JobGenerator {
 public:
  virtual ~JobGenerator() = default;
  virtual TraceJob next() = 0;
  virtual std::unique_ptr<JobGenerator> clone() const = 0;
};

class WorkloadSource {
 public:
  virtual ~WorkloadSource() = default;
  // Produces the jobs, in any order. Throws TraceError on malformed input.
  // Not called for a source without end.
  virtual Trace read(std::uint64_t seed) const = 0;
  // A source without end (`jobs = "until_tracked_done"`) makes its jobs as
  // the run asks for them, with generate(); it never runs out.
  virtual bool endless() const { return false; }
  virtual std::unique_ptr<JobGenerator> generate(std::uint64_t /*seed*/) const {
    throw std::logic_error("a finite workload source has no generator");
  }
};

// Reads the kind's own keys from [workload].
using WorkloadParser = std::unique_ptr<WorkloadSource> (*)(TableReader& workload);

struct WorkloadKind {
  std::string_view name;
  WorkloadParser parse;
  std::string_view description;
};

std::span<const WorkloadKind> workload_kinds();

// Finishes reading [workload] with what only workloads/ and models/ know:
// the kind, its keys, the model's arguments and data files, and the
// profiles `profile_weights` names. Each problem goes to `diagnostics`,
// located. The experiment loader calls it for every run before any starts.
void check_workload(const WorkloadSettings& settings, Diagnostics& diagnostics);

// The kind's source alone, built from the settings: the trace as the file
// has it, before any transform. Throws ConfigError.
std::unique_ptr<WorkloadSource> build_workload_source(const WorkloadSettings& settings);

// The jobs of a workload without end, made one at a time as the simulator
// asks, each numbered, marked and priced as build_workload does a finite
// workload's: ids count from 0 in arrival order. The simulator stops asking
// once every tracked job is done (Blox's simulator: msr-fiddle/blox,
// blox/blox_manager.py, which ends the run when every id of
// job_ids_to_track is in finished_job; simulator_runner/simulator.py GetJobs
// calls workload.generate_next_job until then). Copies go on from the same
// point with the same jobs (a fork). What it holds does not grow with the
// jobs it made: the generator's state and the pricing's.
class JobStream {
 public:
  struct State;
  explicit JobStream(std::unique_ptr<State> state);
  JobStream(const JobStream& other);
  JobStream& operator=(const JobStream& other);
  JobStream(JobStream&&) noexcept;
  JobStream& operator=(JobStream&&) noexcept;
  ~JobStream();

  JobSpec next();
  // The tracked ids [first, last): every job without end is tracked or not.
  std::pair<JobId, JobId> track() const;

 private:
  std::unique_ptr<State> state_;
};

struct Workload {
  std::vector<JobSpec> jobs;  // in arrival order, ids 0..n-1 in that order; empty with a stream
  std::optional<JobStream> stream;  // the jobs of a workload without end
  std::vector<std::string> notes;
  std::shared_ptr<const ThroughputModel> model;  // what prices the jobs' work
};

// Builds the source and the model (ConfigError for what check_workload
// reports), reads the source, applies the transforms (gpu_demand_ratio against the
// cluster's installed GPUs), gives jobs without a profile one the throughput
// model knows (at random, seeded: among the profiles that suit the job's GPU
// count, ThroughputModel::profile_suits, weighted by `profile_weights`), and
// prices each duration on the reference shape: its request packed onto the
// reference GPU type. Throws UserError (TraceError for malformed traces).
// `model`, when given, stands in for the configured one (a model in C++
// that no configuration names). A source without end gives a stream, with
// only the per-job transforms (check_workload refuses the others).
Workload build_workload(const WorkloadSettings& settings, const ClusterState& cluster,
                        std::shared_ptr<const ThroughputModel> model = nullptr);

}  // namespace tessel

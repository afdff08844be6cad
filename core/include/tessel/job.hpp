// The job data model.
//
// JobSpec is what the user asked for and never changes once the job exists.
// JobState is what the core has done with the job so far. Only the core
// writes JobState; plugins see it through `const JobState&` and answer with
// decisions (see stages.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/ids.hpp"
#include "tessel/slots.hpp"

namespace tessel {

inline constexpr int kAnyGpuType = -1;

// A request or a grant of resources for one job.
struct Resources {
  int gpus = 0;
  int gpu_milli = 1000;  // share of each GPU in thousandths; 1000 = whole GPUs; 0 = none of
                         // its time (a CPU-only job, which the GPU only ties to a node)
  double cpus = 0;       // total over the job; 0 = no demand declared
  double mem_gb = 0;     // total over the job; 0 = no demand declared
  int gpu_type = kAnyGpuType;  // index into ClusterState::gpu_types(), or any

  bool operator==(const Resources&) const = default;
};

struct JobSpec {
  JobId id = 0;
  std::string name;    // the trace's own identifier, if any
  std::string tenant;  // user or team
  std::string vc;      // virtual cluster
  std::string model;   // profile key for throughput models
  double arrival = 0;  // seconds since the start of the run
  int gpus = 1;        // requested GPU count
  int min_gpus = 1;    // elastic jobs run anywhere in [min_gpus, max_gpus]
  int max_gpus = 1;
  int gpu_milli = 1000;
  double total_work = 0;  // in the throughput model's work units
  double cpus = 0;
  double mem_gb = 0;
  int batch_size = 0;   // global batch size the user asked for; 0 = unspecified
  double parameters = 0;  // model size in parameters, for memory and reconfiguration models; 0 = unknown
  double priority = 1;  // weight for weighted policies
  bool tracked = true;  // counts in the metrics (see [workload] track)

  bool elastic() const { return min_gpus < max_gpus; }
  Resources request() const { return {gpus, gpu_milli, cpus, mem_gb}; }
};

enum class JobStatus : unsigned char {
  pending,    // arrived, waiting for admission
  queued,     // admitted, never run
  running,
  preempted,  // ran before, now waiting again
  finished,
  failed,
  rejected,   // refused by admission or by the core (can never fit)
};

std::string_view to_string(JobStatus status);

// How a job uses the GPUs it holds. 0 means "the job's own" (batch size)
// or "the model decides" (parallelism). The elasticity stage chooses it.
struct JobLayout {
  int batch_size = 0;         // global batch size
  int tensor_parallel = 0;    // GPUs a layer is split over (within a node)
  int pipeline_parallel = 0;  // pipeline stages; data parallelism is what remains

  bool operator==(const JobLayout&) const = default;
};

struct Allocation {
  std::vector<GpuId> gpus;
  int gpu_milli = 1000;  // share held on each of `gpus`
  double cpus = 0;       // total, spread over nodes in proportion to GPUs
  double mem_gb = 0;
  JobLayout layout{};

  bool empty() const { return gpus.empty(); }
  int gpu_count() const { return static_cast<int>(gpus.size()); }
};

struct JobState {
  JobSpec spec;
  JobStatus status = JobStatus::pending;
  Allocation allocation;

  double attained_service = 0;  // in SchedulerSettings::service units
  double executed_work = 0;     // progress, in spec.total_work's units
  double gpu_seconds = 0;       // GPU time held (for utilization)
  std::optional<double> first_start;
  std::optional<double> finish;
  double waiting_since = 0;     // arrival, or the last preemption
  double last_run_seconds = 0;  // length of the most recent run period
  int preemptions = 0;
  int attempts = 0;             // 1 at the first launch, +1 for each launch after a crash
  double shared_seconds = 0;    // time run on GPUs it shared with other jobs (space sharing)

  SlotStorage slots;  // plugin-owned, see slots.hpp

  bool running() const { return status == JobStatus::running; }
  bool waiting() const { return status == JobStatus::queued || status == JobStatus::preempted; }
  bool active() const { return running() || waiting(); }
  bool done() const {
    return status == JobStatus::finished || status == JobStatus::failed ||
           status == JobStatus::rejected;
  }
  double remaining_work() const { return spec.total_work - executed_work; }
  // What the job holds now, as a request (to keep a running job as it is).
  Resources held() const {
    return {allocation.gpu_count(), allocation.gpu_milli, allocation.cpus, allocation.mem_gb};
  }
};

}  // namespace tessel

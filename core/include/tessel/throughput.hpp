// Throughput models: how fast a job progresses on what it is given.
//
// A job's size is `JobSpec::total_work`, in units the model chooses (the
// linear model uses GPU-seconds at one reference GPU). The simulator advances
// a running job at `rate(job, shape)` units per second; allocation and
// placement plugins may query the same model as an oracle (Optimus, Gavel,
// Synergy do).
#pragma once

#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tessel/cluster.hpp"
#include "tessel/job.hpp"

namespace tessel {

// The global batch sizes a job can train with on some number of GPUs.
struct BatchSizeRange {
  int smallest = 0;
  int largest = 0;
  bool empty() const { return smallest < 1 || largest < smallest; }
};

class ThroughputModel {
 public:
  virtual ~ThroughputModel() = default;
  virtual std::string_view name() const = 0;

  // Work units per second for `job` on an allocation of this shape, averaged
  // over the whole job. Must be positive for any shape with at least one GPU
  // and a share above 0; at share 0 (a CPU-only pod) a model may return 0,
  // and the workload is then refused rather than run forever.
  virtual double rate(const JobSpec& job, const Shape& shape) const = 0;

  // The rate once the job has done `progress` work units. Models whose jobs
  // speed up or slow down as they train (Pollux's statistical efficiency
  // changes by epoch) override both; the simulator then re-reads the rate of
  // running jobs every round, and where next_rate_change says.
  virtual double rate_at(const JobSpec& job, const Shape& shape, double progress) const {
    (void)progress;
    return rate(job, shape);
  }
  virtual bool rate_depends_on_progress() const { return false; }

  // The job profiles (JobSpec::model values) this model has data for; empty
  // when it prices any job. Jobs without a profile get one of these at
  // random when the workload is built; jobs with an unknown one are refused.
  virtual std::span<const std::string> profiles() const { return {}; }

  // The work a job needs when its trace gives neither work nor a duration
  // (Pollux workloads: the application's convergence defines it); 0 when
  // this model cannot tell.
  virtual double default_work(const JobSpec& job) const {
    (void)job;
    return 0;
  }

  // Why this model cannot price jobs on `cluster` (say, a GPU type it has
  // no data for), or an empty string. Checked before a run starts.
  virtual std::string check(const ClusterState& cluster) const {
    (void)cluster;
    return {};
  }

  // For models whose rate depends on the batch size (Shape::layout.batch_size,
  // where 0 means the job's own): the global batch sizes `job` can train with
  // on `gpus` GPUs; empty when it cannot use that many GPUs (each needs a
  // micro-batch the model has data for); nullopt when the batch size does not
  // matter. Policies that tune batch sizes (Pollux) search this range.
  virtual std::optional<BatchSizeRange> batch_sizes(const JobSpec& job, int gpus) const {
    (void)job, (void)gpus;
    return std::nullopt;
  }

  // The progress beyond `progress` at which rate_at next changes, whatever
  // the shape (Pollux: the end of the epoch under way); infinity when it
  // never does or the model cannot tell.
  virtual double next_rate_change(const JobSpec& job, double progress) const {
    (void)job, (void)progress;
    return std::numeric_limits<double>::infinity();
  }

  // Whether `profile` is one this model's data describes for a job of
  // `gpus` GPUs. A job without a profile is given one at random among those
  // that suit its GPU count (Gavel's generator gives multi-GPU jobs only job
  // types it measured on several GPUs). Models that price every profile at
  // any count keep the default.
  virtual bool profile_suits(std::string_view profile, int gpus) const {
    (void)profile, (void)gpus;
    return true;
  }

  // The work units of one training iteration of `job` on `gpus` GPUs, for a
  // simulator that advances jobs in whole iterations per round ([simulation]
  // progress = "whole_iterations", as Synergy's Job.allocate does); 0 when
  // this model does not know a job's iterations.
  virtual double iteration_work(const JobSpec& job, int gpus) const {
    (void)job, (void)gpus;
    return 0;
  }

  // Space sharing: the most jobs one GPU may hold at once by this model's
  // data (Gavel measured pairs: 2); 1 when it has none.
  virtual int max_colocated() const { return 1; }

  // Work units per second of `job` while it shares each of its GPUs (of
  // `shape`) with every job of `others`; 0 when the data says that the group
  // cannot run together (Gavel records 0 for pairs that did not fit in
  // memory). Throws UserError, naming the data, when it lacks the group.
  virtual double rate_colocated(const JobSpec& job, std::span<const JobSpec* const> others,
                                const Shape& shape) const {
    (void)job, (void)others, (void)shape;
    return 0;
  }

  // Seconds to finish `work` units on `shape`.
  double seconds_for(const JobSpec& job, double work, const Shape& shape) const {
    return work / rate(job, shape);
  }
};

}  // namespace tessel

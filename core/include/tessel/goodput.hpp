// Pollux's goodput and speedup, for the `pollux` allocation and elasticity
// plugins and any policy that tunes batch sizes. Header-only, so each plugin
// library stays self-contained; it asks the throughput model through the public
// interface only (rate_at with candidate batch sizes in the shape's layout,
// batch_sizes for the range to search).
//
// Sources: Pollux (Qiao et al., OSDI'21) §3.1 and §4.2; the artifact's
// simulator, petuum/adaptdl branch osdi21-artifact: simulator/goodput.py
// (GoodputFunction.optimize), simulator/speedup.py (SpeedupFunction) and
// simulator/pollux.py (Problem.__init__, which rebases speedups on the fair
// share).
//
// - Goodput of a job on an allocation = progress per second (the
//   throughput model's rate_at at the job's progress), at the batch size
//   that maximizes it. Pollux tries 50 batch sizes spaced geometrically over
//   [max(initial batch, smallest micro-batch x GPUs), largest batch]; we try
//   the same 50, rounded to whole samples, over the model's batch_sizes().
// - Jobs whose batch size Pollux does not choose train at their own: rigid
//   jobs (Pollux's simulator pins ncf at 32768 on one GPU), and any job when
//   the model's rate does not depend on the batch size.
// - Speedup on g GPUs = goodput on g / goodput on a fair share, ceil(GPUs /
//   jobs) GPUs on one node: Pollux's fair_replicas on fair_nodes = ceil(nodes
//   x one GPU's share of the cluster), which is one node.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessel/cluster.hpp"
#include "tessel/job.hpp"
#include "tessel/throughput.hpp"

namespace tessel::pollux {

// GoodputFunction.optimize: np.geomspace's default count.
inline constexpr int kBatchSizeCandidates = 50;

// How a job trains on one allocation shape: the batch size (0: the job's
// own) and its progress per second there. rate 0: it cannot use that shape.
struct Configuration {
  int batch_size = 0;
  double rate = 0;
};

// Does Pollux choose this job's batch size?
inline bool tunes_batch_size(const ThroughputModel& model, const JobSpec& job) {
  return job.elastic() && model.batch_sizes(job, 1).has_value();
}

// Whether `job` can train on `gpus` GPUs at all: a batch size it tunes must
// leave every GPU a micro-batch (Pollux's max_replicas = largest batch /
// smallest micro-batch).
inline bool can_use(const ThroughputModel& model, const JobSpec& job, int gpus) {
  if (!tunes_batch_size(model, job)) return true;
  const auto range = model.batch_sizes(job, gpus);
  return range && !range->empty();
}

// 50 batch sizes from range.smallest to range.largest, geometrically spaced,
// rounded, without repeats.
inline std::vector<int> candidate_batch_sizes(BatchSizeRange range) {
  std::vector<int> sizes;
  if (range.empty()) return sizes;
  const double ratio = static_cast<double>(range.largest) / range.smallest;
  for (int i = 0; i < kBatchSizeCandidates; ++i) {
    const double fraction = static_cast<double>(i) / (kBatchSizeCandidates - 1);
    const int size = std::clamp(static_cast<int>(std::lround(range.smallest * std::pow(ratio, fraction))),
                                range.smallest, range.largest);
    if (sizes.empty() || size != sizes.back()) sizes.push_back(size);
  }
  return sizes;
}

// The goodput-best configuration of `job` on `shape` once it has made
// `progress`. Ties go to the smaller batch size.
inline Configuration best_configuration(const ThroughputModel& model, const JobSpec& job, Shape shape,
                                        double progress) {
  if (!tunes_batch_size(model, job)) {
    shape.layout.batch_size = 0;
    return {0, model.rate_at(job, shape, progress)};
  }
  const auto range = model.batch_sizes(job, shape.gpus);
  Configuration best;
  if (!range) return best;
  for (int batch_size : candidate_batch_sizes(*range)) {
    shape.layout.batch_size = batch_size;
    const double rate = model.rate_at(job, shape, progress);
    if (rate > best.rate) best = {batch_size, rate};
  }
  return best;
}

// Pollux's fair share: the cluster's GPUs split evenly over the jobs, rounded up.
inline int fair_share_gpus(int cluster_gpus, std::size_t jobs) {
  if (jobs == 0) return std::max(cluster_gpus, 1);
  const auto n = static_cast<int>(jobs);
  return std::max(1, (cluster_gpus + n - 1) / n);
}

// The shape speedups are measured against: the fair share on one node.
inline Shape fair_share_shape(const ClusterState& cluster, const JobSpec& job, int fair_gpus) {
  Shape shape = cluster.packed_shape(job, fair_gpus);
  shape.nodes = 1;
  return shape;
}

// A stretch of a job's progress over which its rate stays as measured: from
// the point it was measured at to the model's next change. What is
// remembered about the job's goodput holds while its progress lies in it.
struct RateStretch {
  double from = -1;
  double until = -1;

  // Whether `progress` still lies in the stretch; if not, a new one starts there.
  bool holds(const ThroughputModel& model, const JobSpec& job, double progress) {
    const bool inside = progress == from || (progress >= from && progress < until);
    if (from >= 0 && (inside || !model.rate_depends_on_progress())) return true;
    from = progress;
    until = model.next_rate_change(job, progress);
    if (std::isinf(until)) until = progress;  // cannot tell: valid at this point only
    return false;
  }
};

}  // namespace tessel::pollux

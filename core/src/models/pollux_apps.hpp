// `pollux-apps`: the per-application performance traces of Pollux's
// simulator (OSDI'21 artifact) as a throughput model, plus the goodput
// terms a Pollux policy needs. pollux_apps.cpp states the source, the rules
// and every simplification.
//
// Units. Progress is Pollux's: training steps at the application's initial
// (smallest validated) batch size, each step weighted by statistical
// efficiency, so that a larger batch earns more than one unit per step but
// less than its size ratio. Throughput is in samples per second; goodput is
// throughput x efficiency, in samples per second at the initial batch
// size's efficiency, so goodput / init_batch_size() is progress per second.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/throughput.hpp"

namespace tessel {

// Seconds per training step, and the part of it spent synchronising
// gradients (the rest is computation, which gradient accumulation repeats).
struct StepTime {
  double step = 0;
  double sync = 0;
};

// Gradient statistics Pollux measured while training: the squared norm of
// the true gradient and the variance of the per-sample gradient.
struct GradientStats {
  double sqr = 0;
  double var = 0;
};

// How a global batch runs on its replicas: each processes `atomic_bsz`
// samples per micro-step, and `accum_steps` micro-steps accumulate locally
// before the one that synchronises. Global batch = replicas x atomic_bsz x
// (accum_steps + 1).
struct BatchSplit {
  int atomic_bsz = 0;
  int accum_steps = 0;
};

// One application's tables: apps/<name>/{placements,scalability,validation-*}.csv.
class PolluxApplication {
 public:
  // Reads the directory. Throws TraceError naming the file (and line) that
  // is missing or malformed.
  static PolluxApplication load(const std::filesystem::path& directory);

  const std::string& name() const { return name_; }
  int init_batch_size() const { return init_batch_size_; }  // smallest validated batch size
  int max_batch_size() const { return max_batch_size_; }    // largest validated batch size
  int min_local_bsz() const { return min_local_bsz_; }
  int max_local_bsz() const { return max_local_bsz_; }
  int max_gpus_per_node() const { return max_gpus_per_node_; }  // in any measured placement
  int max_epochs() const { return static_cast<int>(epoch_start_.size()) - 1; }
  // Progress at which epoch `epoch` (0-based) starts; epoch_start(max_epochs()) ends training.
  double epoch_start(int epoch) const { return epoch_start_[static_cast<std::size_t>(epoch)]; }
  // The progress a job needs to complete: the end of its last epoch.
  double target_progress() const { return epoch_start_.back(); }
  // The epoch under way at `progress`: how many epoch ends it has reached.
  int epoch_at(double progress) const;
  // Where the epoch under way at `progress` ends; infinity past the last.
  double epoch_end_after(double progress) const;

  // Step time of `placement` (GPUs on each node, in any order) at a local
  // batch size, measured or interpolated as Pollux's simulator does.
  StepTime step_time(std::span<const int> placement, double local_bsz) const;
  // Step time of `replicas` GPUs over `nodes` nodes, averaged over the
  // measured placements of that size (exact when the placement is
  // determined: one node, one GPU per node, or full 4-GPU nodes).
  StepTime step_time(int nodes, int replicas, double local_bsz) const;

  // Pollux's split of a global batch over `replicas` GPUs, for a job that
  // fixes its batch size; `batch_size` 0 takes Pollux's choice before it
  // has profiled the job: the initial batch size, or the smallest local
  // batch on every replica if that is larger.
  BatchSplit split(int batch_size, int replicas) const;
  // Samples per second of `split` on `placement`.
  double throughput(std::span<const int> placement, BatchSplit split) const;

  // Gradient statistics of training at `batch_size` during the epoch under
  // way at `progress`, interpolated between the validated batch sizes.
  GradientStats gradient_stats(double batch_size, double progress) const;
  // Statistical efficiency of `batch_size` relative to the initial batch
  // size: progress per sample at `batch_size` / progress per sample at the
  // initial one. 1 at the initial batch size, falling as the batch grows.
  double efficiency(double batch_size, GradientStats stats) const;
  // Throughput x efficiency: samples per second, discounted to what they
  // are worth at the initial batch size.
  double goodput(std::span<const int> placement, BatchSplit split, double progress) const;

  // The global batch sizes Pollux lets a job try on `replicas` GPUs: from
  // the initial batch size (or the smallest local batch on every replica,
  // if that is more) to the largest validated one. Empty when even the
  // smallest local batches exceed the largest batch (Pollux's max_replicas).
  BatchSizeRange batch_sizes(int replicas) const;

  // Progress per second of a job with a fixed global batch size (0: Pollux's
  // initial choice) on `replicas` GPUs over `nodes` nodes, averaged over
  // its whole training so that target_progress() / rate is the time Pollux's
  // simulator takes to train it on that allocation. With a `placement` (GPUs
  // on each node, `replicas` in all), its step time is that placement's
  // (step_time(placement, ...)); without, the (nodes, replicas) mean.
  double progress_rate(int nodes, int replicas, int batch_size, std::span<const int> placement = {}) const;
  // The same during the epoch under way at `progress`: what Pollux's
  // simulator (Job.step) makes a job progress at until that epoch ends.
  double progress_rate_at(int nodes, int replicas, int batch_size, double progress,
                          std::span<const int> placement = {}) const;

 private:
  class StepTimeCurve {
   public:
    explicit StepTimeCurve(const std::map<double, StepTime>& by_local_bsz);
    StepTime at(double local_bsz) const;

   private:
    std::vector<double> local_bsz_;
    std::vector<StepTime> times_;
  };
  // The measurements on one number of nodes, by number of replicas.
  struct NodeLayer {
    std::vector<double> replicas;
    std::vector<StepTimeCurve> curves;
    StepTime at(double replica_count, double local_bsz) const;
  };
  // One validation-<batch size>.csv: gradient statistics by epoch.
  struct ValidationCurve {
    int batch_size = 0;
    std::vector<double> progress;  // at the end of each epoch
    std::vector<GradientStats> stats;
  };

  PolluxApplication() = default;
  // The parts of load(), in order: each relies on what the previous read.
  void read_step_times(const std::filesystem::path& directory);
  std::map<int, std::filesystem::path> read_validation(const std::filesystem::path& directory);
  void read_epochs(const std::filesystem::path& directory, const std::map<int, std::filesystem::path>& validation_files);
  // A batch of `batch_size` (0: Pollux's initial choice) split over `replicas`
  // GPUs on `nodes` nodes: the samples it really holds and its seconds.
  struct BatchRun {
    double samples = 0;
    double seconds = 0;
  };
  BatchRun run_batch(int nodes, int replicas, int batch_size, std::span<const int> placement) const;
  GradientStats stats_in_epoch(double batch_size, int epoch) const;
  double gain(double batch_size, GradientStats stats) const;
  double mean_gain(double batch_size) const;

  std::string name_;
  int init_batch_size_ = 0;
  int max_batch_size_ = 0;
  int min_local_bsz_ = 0;
  int max_local_bsz_ = 0;
  int max_gpus_per_node_ = 0;
  std::map<std::vector<int>, StepTimeCurve> by_placement_;  // keyed by canonical placement
  std::map<int, NodeLayer> by_nodes_;
  std::vector<ValidationCurve> validation_;  // ascending batch sizes
  std::vector<double> validated_batch_sizes_;
  std::vector<double> epoch_start_;  // max_epochs + 1 entries, from 0
};

// What step time a shape is priced at: the mean over the measured
// placements with its numbers of nodes and GPUs, or the step time of its
// exact placement (Shape::node_gpus), as Pollux's simulator prices a job
// (Application.get_throughput of Job.placement).
enum class PolluxPlacementPricing { by_node_count, exact };

class PolluxAppsModel final : public ThroughputModel {
 public:
  // Reads every application directory under `apps_directory`. Throws
  // UserError (TraceError for a malformed file).
  explicit PolluxAppsModel(const std::filesystem::path& apps_directory,
                           PolluxPlacementPricing pricing = PolluxPlacementPricing::by_node_count);

  std::string_view name() const override { return "pollux-apps"; }
  // Progress per second of `job.model` on the shape, at the shape's batch
  // size (its layout's, else the job's): over the whole training (rate) or
  // during the epoch under way at `progress` (rate_at).
  double rate(const JobSpec& job, const Shape& shape) const override;
  double rate_at(const JobSpec& job, const Shape& shape, double progress) const override;
  bool rate_depends_on_progress() const override { return true; }
  double next_rate_change(const JobSpec& job, double progress) const override;
  std::optional<BatchSizeRange> batch_sizes(const JobSpec& job, int gpus) const override;
  std::span<const std::string> profiles() const override { return names_; }
  double default_work(const JobSpec& job) const override;
  std::string check(const ClusterState& cluster) const override;

  // Null when there is no such application.
  const PolluxApplication* application(std::string_view name) const;

 private:
  const PolluxApplication& application_of(const JobSpec& job) const;

  // The placement to price `shape` at: its node_gpus when pricing exactly
  // and they account for its GPUs, else none (the node-count mean).
  std::span<const int> placement_of(const Shape& shape) const;

  std::vector<PolluxApplication> applications_;  // sorted by name
  std::vector<std::string> names_;
  PolluxPlacementPricing pricing_;
};

}  // namespace tessel

// dp_only: elastic scaling by data parallelism alone, the baseline Tenplex
// (Wagenländer et al., SOSP'24) compares with: a job keeps the tensor- and
// pipeline-parallel split of its first layout, and a change of GPUs only adds
// or removes model replicas (Tenplex's "Tenplex-DP"; elastic frameworks such
// as TorchElastic or DeepSpeed's elasticity scale the same way).
//
// The rule, with the state model of parallel_state.hpp:
//  - arrange: on the job's first start, the throughput-best (tp, pp) that fits
//    in memory, as tenplex chooses it; that split is then fixed, and later
//    GPU counts that are multiples of tp x pp only change dp. Any other count
//    cannot be expressed: the job restarts from its checkpoint with the best
//    split for the new count, which becomes its fixed one (what a user does
//    by converting the checkpoint offline).
//  - reconfiguration_seconds: a change of dp alone, with every old GPU
//    alive, costs the restart of the workers plus copying the replica state to
//    the new GPUs from surviving replicas (plan_transfer). Anything else (a
//    new split, or a lost node, from which a data-parallel job recovers by
//    restarting from its checkpoint) costs view.settings().restart_seconds
//    plus reading the whole state, bytes_per_parameter x parameters, from
//    storage at storage_gb_per_s.
//  - keep_after_loss: the job restarts on its remaining GPUs (paying the
//    restart above) when they are at least min_gpus and fit it; otherwise it
//    waits to be placed again.
//  - resize: grows running jobs into free GPUs by tenplex's rule, each count
//    priced as dp_only runs it: multiples of the fixed split add replicas,
//    other counts restart from the checkpoint with their best split.
//
// Two options make it the baselines of Tenplex's artifact
// (benchmark/dynamic_resources):
//  - `split = "TPxPP"` fixes the split from the start, as Tenplex-DP's
//    configuration file does (pytorch-para-config.json: tp 2, pp 4 at 8 and
//    16 GPUs). The job never re-splits: on fewer GPUs than tp x pp it pauses,
//    stopping and holding nothing until its request fits again, as the
//    artifact's DP-only run has no configuration for 4 GPUs and skips those
//    phases (pytorch-schedule.json); growth goes to multiples of tp x pp only.
//  - `reconfiguration = "checkpoint"` makes every change a restart from the
//    checkpoint (the cost above), as Torch Distributed Elastic, the artifact's
//    third system (run.sh, -no-tenplex), restarts its workers on every change
//    and reloads the checkpoint Megatron-LM saved; "move" (the default) moves
//    replicas as above.
//
// Simplifications: the checkpoint is read once for the whole job at one
// aggregate bandwidth, whatever the number of readers; the progress lost
// since the last checkpoint is the simulator's ([failures]
// checkpoint_interval_seconds), the same as for tenplex.
#include <optional>
#include <string>

#include <tessel/tessel.hpp>

#include "parallel_state.hpp"

namespace {

using namespace tessel;
using namespace tessel::elasticity;

// The tensor- and pipeline-parallel degrees a job keeps; zero until it starts.
struct FixedSplit {
  int tensor_parallel = 0;
  int pipeline_parallel = 0;

  int gpus() const { return tensor_parallel * pipeline_parallel; }
  JobLayout layout() const { return {0, tensor_parallel, pipeline_parallel}; }
};

constexpr ArgSpec kArgs[] = {
    TESSEL_PARALLEL_STATE_ARGS,
    {"split", ArgType::string, "\"\"",
     "the (tp, pp) split every job keeps from its start, as \"TPxPP\" (\"2x4\"): never re-split, pause on fewer "
     "GPUs; empty: the best split of the first start, re-chosen after a restart"},
    {"reconfiguration", ArgType::string, "\"move\"",
     "what a change of GPUs costs: moving replicas where the split is kept (move), or always a restart from the "
     "checkpoint (checkpoint: Torch Distributed Elastic)",
     "move|checkpoint"},
};

FixedSplit pinned_split(const std::string& text) {
  if (text.empty()) return {};
  const JobLayout split = parse_split(text, "split");
  return {split.tensor_parallel, split.pipeline_parallel};
}

class DpOnly final : public ElasticityPolicy {
 public:
  explicit DpOnly(const PluginContext& context)
      : settings_(context.args()),
        pinned_(pinned_split(context.args().string("split"))),
        always_checkpoint_(context.args().string("reconfiguration") == "checkpoint"),
        split_(context.job_slot<FixedSplit>()) {}

  bool time_sensitive() const override { return false; }

  JobLayout arrange(const SchedulerView& view, const JobState& job, const Allocation& allocation) override {
    if (pinned_.gpus() > 0) {
      // A job starts on its request (or more), never on fewer GPUs; below tp x pp it could never run.
      if (allocation.gpu_count() < pinned_.gpus())
        throw ArgumentError("split", "job " + std::to_string(job.spec.id) + " got " + std::to_string(allocation.gpu_count()) +
                                         " GPUs, fewer than the split's " + std::to_string(pinned_.gpus()) +
                                         ": its request (gpus) must be at least tp x pp");
      return pinned_.layout();
    }
    FixedSplit& split = split_(job.slots);
    if (split.gpus() > 0 && allocation.gpu_count() % split.gpus() == 0) return split.layout();
    const JobLayout best = best_layout(view, job.spec, view.cluster().shape_of(allocation), settings_.memory).layout;
    split = {best.tensor_parallel, best.pipeline_parallel};
    return best;
  }

  double reconfiguration_seconds(const SchedulerView& view, const JobState& job, const Allocation& from,
                                 const Allocation& to) const override {
    const bool same_split = from.layout.tensor_parallel == to.layout.tensor_parallel &&
                            from.layout.pipeline_parallel == to.layout.pipeline_parallel &&
                            data_parallel(from.layout, from.gpu_count()) > 0;
    if (always_checkpoint_ || !same_split || lost_any(view.cluster(), from))
      return restart_seconds(view, job.spec, settings_);
    return view.settings().restart_seconds +
           plan_transfer(view.cluster(), settings_.state_bytes(job.spec), from, to, settings_).seconds(settings_);
  }

  bool keep_after_loss(const SchedulerView& view, const JobState& job, const Allocation& remaining) override {
    // The core has checked [min_gpus, max_gpus]; what is left must also hold the model.
    const Shape shape = view.cluster().shape_of(remaining);
    if (pinned_.gpus() > 0)  // too few GPUs for the split: pause
      return remaining.gpu_count() >= pinned_.gpus() &&
             priced(view, job.spec, shape, pinned_.layout(), settings_.memory).fits;
    return best_layout(view, job.spec, shape, settings_.memory).fits;
  }

  std::vector<ResizeProposal> resize(const SchedulerView& view) override {
    return grow_into_free_gpus(view, [&](const JobState& job, int gpus) -> std::optional<GrowthOption> {
      const FixedSplit& split = pinned_.gpus() > 0 ? pinned_ : split_(job.slots);
      const Shape shape = packed_like(view.cluster(), job, gpus);
      if (split.gpus() == 0 || gpus % split.gpus() != 0) {
        if (pinned_.gpus() > 0) return std::nullopt;  // never re-split
        // a new split: restart from the checkpoint
        return GrowthOption{best_layout(view, job.spec, shape, settings_.memory),
                            restart_seconds(view, job.spec, settings_)};
      }
      return GrowthOption{priced(view, job.spec, shape, split.layout(), settings_.memory),
                          always_checkpoint_ ? restart_seconds(view, job.spec, settings_)
                                             : estimated_move_seconds(view, job.spec, split.layout(), settings_)};
    });
  }

 private:
  static bool lost_any(const ClusterState& cluster, const Allocation& allocation) {
    for (GpuId gpu : allocation.gpus)
      if (!cluster.node(cluster.gpu(gpu).node).up) return true;
    return false;
  }

  ParallelStateSettings settings_;
  FixedSplit pinned_;       // from `split`; zero: chosen per job
  bool always_checkpoint_;  // reconfiguration = "checkpoint"
  Slot<FixedSplit> split_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(DpOnly, elasticity, "dp_only", "1.0",
                        "DP-only elastic scaling (Tenplex's baseline): tp and pp fixed at the first layout, "
                        "dp changes move replicas, anything else restarts from the checkpoint",
                        kArgs)

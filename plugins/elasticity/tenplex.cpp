// tenplex: reconfigure a job's multi-dimensional parallelism whenever its GPU
// count changes, after Tenplex (Wagenländer et al., "Tenplex: Dynamic
// Parallelism for Deep Learning using Parallelizable Tensor Collections",
// SOSP'24). Tenplex keeps a job's state as a parallelizable tensor
// collection, and on a change of resources chooses a new (dp, tp, pp)
// configuration and moves only the sub-tensors whose owner changes,
// in place of stopping, converting a checkpoint and restarting.
//
// The rule, with the state model of parallel_state.hpp:
//  - arrange: on every start, resize or loss, the (tp, pp) split, with dp
//    filling the GPUs, that the throughput model says runs fastest among
//    those that fit in GPU memory (tessel/parallelism.hpp), each candidate
//    probed as view.throughput().rate(job, shape with that layout). The
//    global batch stays the job's, as Tenplex keeps it for convergence.
//  - reconfiguration_seconds: the restart of the workers
//    (view.settings().restart_seconds) plus the state transfer: each GPU of
//    the new layout receives the parts of its new shard it did not hold,
//    from a surviving holder on its node (NVLink) or elsewhere (network), in
//    parallel, the busiest receiver setting the time; parts no surviving GPU
//    holds (a lost node took every replica) are read from the checkpoint in
//    storage.
//  - keep_after_loss: a job that loses a node keeps running on its remaining
//    GPUs, reconfigured, when they are at least min_gpus and some layout of
//    them fits in memory; otherwise it waits to be placed again.
//  - resize: grows running jobs into GPUs left free, up to max_gpus
//    (grow_into_free_gpus in parallel_state.hpp): only while no job waits,
//    to the count that saves the most time net of the move's estimated cost.
//    So jobs that shrank after a failure grow back once nodes return or are
//    added.
//
// Simplifications: only receivers limit a transfer, never senders or the
// network's core, and which surviving replica sends a piece does not matter.
// Ranks follow GPU ids, not an assignment chosen to minimize movement. A crash still costs the progress
// since the last checkpoint ([failures] checkpoint_interval_seconds), which
// the simulator takes from every job on a failed node, although Tenplex
// recovers it from surviving replicas. The plugin never shrinks a job to make
// room for others; the allocation policy may.
#include <tessel/tessel.hpp>

#include "parallel_state.hpp"

namespace {

using namespace tessel;
using namespace tessel::elasticity;

class Tenplex final : public ElasticityPolicy {
 public:
  explicit Tenplex(const PluginContext& context) : settings_(context.args()) {}

  bool time_sensitive() const override { return false; }

  JobLayout arrange(const SchedulerView& view, const JobState& job, const Allocation& allocation) override {
    return best_layout(view, job.spec, view.cluster().shape_of(allocation), settings_.memory).layout;
  }

  double reconfiguration_seconds(const SchedulerView& view, const JobState& job, const Allocation& from,
                                 const Allocation& to) const override {
    if (data_parallel(from.layout, from.gpu_count()) == 0) return restart_seconds(view, job.spec, settings_);
    return view.settings().restart_seconds +
           plan_transfer(view.cluster(), settings_.state_bytes(job.spec), from, to, settings_).seconds(settings_);
  }

  bool keep_after_loss(const SchedulerView& view, const JobState& job, const Allocation& remaining) override {
    // The core has checked [min_gpus, max_gpus]; what is left must also hold the model.
    return best_layout(view, job.spec, view.cluster().shape_of(remaining), settings_.memory).fits;
  }

  std::vector<ResizeProposal> resize(const SchedulerView& view) override {
    return grow_into_free_gpus(view, [&](const JobState& job, int gpus) -> std::optional<GrowthOption> {
      const LayoutChoice choice = best_layout(view, job.spec, packed_like(view.cluster(), job, gpus), settings_.memory);
      return GrowthOption{choice, estimated_move_seconds(view, job.spec, choice.layout, settings_)};
    });
  }

 private:
  ParallelStateSettings settings_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Tenplex, elasticity, "tenplex", "1.0",
                        "Tenplex (SOSP'24): re-choose (dp, tp, pp) on every GPU change, move only the shards "
                        "whose owner changes, keep running after a node loss, grow into free GPUs",
                        kParallelStateArgs)

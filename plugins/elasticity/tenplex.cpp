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
//    `layouts` pins the split for given GPU counts instead, as Tenplex's
//    artifact does with a configuration file per experiment
//    (benchmark/dynamic_resources/tenplex-para-config.json: "4=2x2",
//    "8=2x4", "16=2x4", GPUS=TPxPP); each count must be a multiple of its
//    tp x pp. Counts not pinned get the throughput-best split.
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
#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include "parallel_state.hpp"

namespace {

using namespace tessel;
using namespace tessel::elasticity;

constexpr ArgSpec kArgs[] = {
    TESSEL_PARALLEL_STATE_ARGS,
    {"layouts", ArgType::string_list, "[]",
     "the (tp, pp) split for given GPU counts, as \"GPUS=TPxPP\" (\"8=2x4\"); other counts get the "
     "throughput-best split"},
};

std::map<int, JobLayout> pinned_layouts(const std::vector<std::string>& entries) {
  std::map<int, JobLayout> pinned;
  for (const std::string& entry : entries) {
    const auto equals = entry.find('=');
    int gpus = 0;
    const auto [end, error] = std::from_chars(entry.data(), entry.data() + std::min(equals, entry.size()), gpus);
    if (equals == std::string::npos || error != std::errc{} || end != entry.data() + equals || gpus < 1)
      throw ArgumentError("layouts", "'" + entry + "' is not GPUS=TPxPP, as \"8=2x4\"");
    const JobLayout split = parse_split(std::string_view(entry).substr(equals + 1), "layouts");
    if (gpus % (split.tensor_parallel * split.pipeline_parallel) != 0)
      throw ArgumentError("layouts",
                          "'" + entry + "': " + std::to_string(gpus) + " GPUs are not a multiple of tp x pp");
    if (!pinned.emplace(gpus, split).second)
      throw ArgumentError("layouts", "pins " + std::to_string(gpus) + " GPUs twice");
  }
  return pinned;
}

class Tenplex final : public ElasticityPolicy {
 public:
  explicit Tenplex(const PluginContext& context)
      : settings_(context.args()), pinned_(pinned_layouts(context.args().strings("layouts"))) {}

  bool time_sensitive() const override { return false; }

  JobLayout arrange(const SchedulerView& view, const JobState& job, const Allocation& allocation) override {
    return choose(view, job.spec, view.cluster().shape_of(allocation)).layout;
  }

  double reconfiguration_seconds(const SchedulerView& view, const JobState& job, const Allocation& from,
                                 const Allocation& to) const override {
    if (data_parallel(from.layout, from.gpu_count()) == 0) return restart_seconds(view, job.spec, settings_);
    return view.settings().restart_seconds +
           plan_transfer(view.cluster(), settings_.state_bytes(job.spec), from, to, settings_).seconds(settings_);
  }

  bool keep_after_loss(const SchedulerView& view, const JobState& job, const Allocation& remaining) override {
    // The core has checked [min_gpus, max_gpus]; what is left must also hold the model.
    return choose(view, job.spec, view.cluster().shape_of(remaining)).fits;
  }

  std::vector<ResizeProposal> resize(const SchedulerView& view) override {
    return grow_into_free_gpus(view, [&](const JobState& job, int gpus) -> std::optional<GrowthOption> {
      const LayoutChoice choice = choose(view, job.spec, packed_like(view.cluster(), job, gpus));
      return GrowthOption{choice, estimated_move_seconds(view, job.spec, choice.layout, settings_)};
    });
  }

 private:
  // The pinned split of this GPU count, else the throughput-best that fits.
  LayoutChoice choose(const SchedulerView& view, const JobSpec& job, const Shape& shape) const {
    const auto pinned = pinned_.find(shape.gpus);
    if (pinned != pinned_.end()) return priced(view, job, shape, pinned->second, settings_.memory);
    return best_layout(view, job, shape, settings_.memory);
  }

  ParallelStateSettings settings_;
  std::map<int, JobLayout> pinned_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Tenplex, elasticity, "tenplex", "1.0",
                        "Tenplex (SOSP'24): re-choose (dp, tp, pp) on every GPU change, move only the shards "
                        "whose owner changes, keep running after a node loss, grow into free GPUs",
                        kArgs)

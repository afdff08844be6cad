// pollux: Pollux's per-job agent. A job trains at the batch size with the
// best goodput on the GPUs it holds, re-tuned as its statistical efficiency
// changes; a new allocation costs a restart.
//
// Paper: A. Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
// Goodput-Optimized Deep Learning", OSDI'21, §4.1 (PolluxAgent). Semantics
// follow the artifact's simulator, petuum/adaptdl branch osdi21-artifact:
// simulator/simulator.py (Job.update_local_bsz, Job.step, Job.reallocate)
// and simulator/goodput.py (GoodputFunction.optimize). Goodput is in
// tessel/goodput.hpp, shared with the `pollux` allocation plugin,
// which decides how many GPUs each job gets.
//
// The rule:
//  * arrange(): a job that gets GPUs (a start, a restart, a resize) trains
//    at the goodput-best batch size for that shape at its progress.
//  * resize(): every round, a running elastic job whose best batch size on
//    its GPUs has changed (its gradient statistics move from epoch to
//    epoch) switches to it on the same GPUs. Pollux re-tunes after every
//    stretch of training (each 60 s step and each epoch end).
//  * reconfiguration_seconds(): `restart_seconds` (30) whenever a job's GPUs
//    change, since Pollux's simulator restarts a job on every new
//    allocation; nothing when only the batch size changes, which AdaptDL
//    does in place and the simulator does not charge.
//  * keep_after_loss(): an elastic job that loses GPUs goes on on the rest,
//    paying the restart, as Pollux would reallocate it.
//  * Jobs whose batch size Pollux does not choose (rigid jobs, models whose
//    rate ignores the batch size) train at their own (layout 0).
//
// Simplifications:
//  - Oracle goodput, as in the allocation plugin: the throughput model's
//    rate_at with each candidate's own gradient statistics, where Pollux
//    uses its fitted model and the statistics measured at the current batch
//    size.
//  - Re-tuning happens at rounds, not also at epoch ends between them.
//  - Pollux's simulator charges the 30 s on a job's first allocation too;
//    that is [simulation] start_overhead_seconds, as restarts after a
//    preemption are preemption_overhead_seconds.
#include <cmath>
#include <vector>

#include <tessel/tessel.hpp>


namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"restart_seconds", tessel::ArgType::number, "30",
     "seconds without progress after a job's GPUs change (Pollux's simulator: 30)"},
};

// A job's best batch size on the shape it holds, valid while its progress
// stays in [from, until) (the model's rate cannot change there) or at `from`.
struct BestBatch {
  tessel::pollux::RateStretch stretch;
  int gpus = 0;
  int nodes = 0;
  std::vector<int> node_gpus;  // a model may price the exact placement (pollux-apps, placement = "exact")
  int batch_size = 0;
};

class PolluxAgent final : public tessel::ElasticityPolicy {
 public:
  explicit PolluxAgent(const tessel::PluginContext& context)
      : restart_seconds_(context.args().number("restart_seconds")), best_(context.job_slot<BestBatch>()) {
    if (!(restart_seconds_ >= 0)) throw tessel::ArgumentError("restart_seconds", "must be >= 0 seconds");
  }

  // Batch sizes follow the jobs' progress.
  bool time_sensitive() const override { return true; }

  tessel::JobLayout arrange(const tessel::SchedulerView& view, const tessel::JobState& job,
                            const tessel::Allocation& allocation) override {
    tessel::JobLayout layout = allocation.layout;
    layout.batch_size = best_batch_size(view, job, view.cluster().shape_of(allocation));
    return layout;
  }

  std::vector<tessel::ResizeProposal> resize(const tessel::SchedulerView& view) override {
    std::vector<tessel::ResizeProposal> proposals;
    for (const tessel::JobState* job : view.active()) {
      if (!job->running() || !tessel::pollux::tunes_batch_size(view.throughput(), job->spec)) continue;
      const int batch_size = best_batch_size(view, *job, view.cluster().shape_of(job->allocation));
      if (batch_size == job->allocation.layout.batch_size) continue;
      tessel::JobLayout layout = job->allocation.layout;
      layout.batch_size = batch_size;
      proposals.push_back({job->spec.id, job->allocation.gpu_count(), layout,
                           tessel::Reason("batch size {} -> {}: the best goodput on its {} GPUs now that its "
                                          "gradient noise has changed",
                                          job->allocation.layout.batch_size, batch_size,
                                          job->allocation.gpu_count())});
    }
    return proposals;
  }

  double reconfiguration_seconds(const tessel::SchedulerView&, const tessel::JobState&,
                                 const tessel::Allocation& from, const tessel::Allocation& to) const override {
    return from.gpus == to.gpus ? 0 : restart_seconds_;
  }

  bool keep_after_loss(const tessel::SchedulerView&, const tessel::JobState&, const tessel::Allocation&) override {
    return true;
  }

 private:
  int best_batch_size(const tessel::SchedulerView& view, const tessel::JobState& job, const tessel::Shape& shape) {
    const tessel::ThroughputModel& model = view.throughput();
    if (!tessel::pollux::tunes_batch_size(model, job.spec)) return 0;
    BestBatch& best = best_(job.slots);
    const double progress = job.executed_work;
    if (best.stretch.holds(model, job.spec, progress) && best.gpus == shape.gpus && best.nodes == shape.nodes &&
        best.node_gpus == shape.node_gpus)
      return best.batch_size;
    best.gpus = shape.gpus;
    best.nodes = shape.nodes;
    best.node_gpus = shape.node_gpus;
    best.batch_size = tessel::pollux::best_configuration(model, job.spec, shape, progress).batch_size;
    return best.batch_size;
  }

  double restart_seconds_;
  tessel::Slot<BestBatch> best_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(PolluxAgent, elasticity, "pollux", "1.0",
                        "Pollux (OSDI'21) agent: each job at its goodput-best batch size, re-tuned as it "
                        "trains; a restart whenever its GPUs change",
                        kArgs)

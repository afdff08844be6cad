// shrink_on_failure: an elastic job that loses a node keeps running on the
// GPUs it still has, if that is at least its min_gpus; otherwise (and for
// rigid jobs, which the core never asks about) it goes back to the queue.
//
// It never grows a job back: pair it with an allocation policy that resizes
// elastic jobs (optimus) for that. The shrink costs what a restart costs
// (`[simulation] preemption_overhead_seconds`): the job restores its
// checkpoint on fewer GPUs.
#include <tessel/tessel.hpp>

namespace {

class ShrinkOnFailure final : public tessel::ElasticityPolicy {
 public:
  explicit ShrinkOnFailure(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }

  std::vector<tessel::ResizeProposal> resize(const tessel::SchedulerView&) override { return {}; }

  bool keep_after_loss(const tessel::SchedulerView&, const tessel::JobState& job,
                       const tessel::Allocation& remaining) override {
    return remaining.gpu_count() >= job.spec.min_gpus;
  }
};

}  // namespace

TESSEL_PLUGIN(ShrinkOnFailure, elasticity, "shrink_on_failure", "1.0",
              "elastic jobs that lose a node shrink to the GPUs they still have")

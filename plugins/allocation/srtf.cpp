// srtf: shortest remaining time first, preemptive, with an oracle.
//
// Sources: L. Schrage, "A proof of the optimality of the shortest remaining
// processing time discipline", Operations Research 16(3), 1968, the classic
// rule; for GPU clusters, the `shortest` schedule of Tiresias's simulator
// (SymbioticLab/Tiresias, simulator/run_sim.py `shortest_first_sim_jobs`),
// which knows every job's duration.
//
// Rule as implemented: every active job is ranked by the seconds it still
// needs on its requested GPUs packed onto the fewest nodes, as the throughput
// model predicts (an oracle in simulation); the shortest first, ties by
// arrival. Running jobs keep what they hold, waiting jobs ask for their
// request. A job that does not fit preempts lower-ranked running jobs (the
// core picks them, lowest first); one that cannot fit even so is skipped and
// later jobs may start, as in the simulator's pass over the sorted list.
//
// Simplifications: the remaining time is priced on the packed shape of the
// request, not on the shape a running job actually has; elastic jobs are
// priced at their requested GPU count. Remaining time, not remaining
// GPU-time (the simulator's `shortest-gpu`), decides.
#include <algorithm>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

class Srtf final : public tessel::AllocationPolicy {
 public:
  explicit Srtf(const tessel::PluginContext&) {}

  // Waiting jobs' remaining times stand still while running ones only
  // shrink, so with no arrival, completion or cluster change no waiting job
  // can overtake a running one: skipped rounds would decide the same.
  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    order_.clear();
    for (const tessel::JobState* job : view.active()) {
      const tessel::Shape packed = view.cluster().packed_shape(job->spec, job->spec.gpus);
      order_.push_back({job, view.remaining_seconds(*job, packed)});
    }
    // view.active() is in arrival order; a stable sort keeps it among ties.
    std::stable_sort(order_.begin(), order_.end(),
                     [](const Ranked& a, const Ranked& b) { return a.remaining < b.remaining; });
    tessel::AllocationPlan plan;
    plan.ranked.reserve(order_.size());
    for (const Ranked& entry : order_) {
      const tessel::JobState& job = *entry.job;
      plan.ranked.push_back({job.spec.id, tessel::allocation::current_or_requested(job),
                             tessel::Reason("{~} s left on {} GPUs; the shortest remaining time runs first",
                                            entry.remaining, job.spec.gpus)});
    }
    return plan;
  }

 private:
  struct Ranked {
    const tessel::JobState* job;
    double remaining;
  };
  std::vector<Ranked> order_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN(Srtf, allocation, "srtf", "1.0",
              "shortest remaining time first (oracle from the throughput model), preemptive")

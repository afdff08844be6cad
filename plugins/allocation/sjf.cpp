// sjf: shortest job first, non-preemptive, with an oracle.
//
// Source: the classic non-preemptive shortest-job-first (shortest processing
// time) discipline, as in M. Harchol-Balter, "Performance Modeling and
// Design of Computer Systems", 2013, on size-based scheduling. (Tiresias's simulator has an `sjf` too,
// but there it means the smallest GPU request first; this is not that.)
//
// Rule as implemented: running jobs rank first, in arrival order, and keep
// what they hold, so nothing is ever preempted. Waiting jobs follow, ranked
// by the seconds their whole work takes on their requested GPUs packed onto
// the fewest nodes, as the throughput model predicts (an oracle in
// simulation); the shortest first, ties by arrival. A waiting job that does
// not fit is skipped and longer ones behind it may start.
//
// Simplifications: the run time is priced on the packed shape of the
// request; elastic jobs are priced at their requested GPU count. A job that
// ran before (after a crash) is still ordered by its total run time.
#include <algorithm>
#include <vector>

#include <tessel/tessel.hpp>

namespace {

class Sjf final : public tessel::AllocationPolicy {
 public:
  explicit Sjf(const tessel::PluginContext&) {}

  // The order depends only on which jobs are there and what they need.
  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::AllocationPlan plan;
    plan.ranked.reserve(view.active().size());
    waiting_.clear();
    for (const tessel::JobState* job : view.active()) {
      if (job->running()) {
        plan.ranked.push_back({job->spec.id, job->held(), tessel::Reason("running; SJF never preempts")});
      } else {
        const tessel::Shape packed = view.cluster().packed_shape(job->spec, job->spec.gpus);
        waiting_.push_back({job, view.throughput().seconds_for(job->spec, job->spec.total_work, packed)});
      }
    }
    // view.active() is in arrival order; a stable sort keeps it among ties.
    std::stable_sort(waiting_.begin(), waiting_.end(),
                     [](const Waiting& a, const Waiting& b) { return a.run_seconds < b.run_seconds; });
    for (const Waiting& entry : waiting_)
      plan.ranked.push_back({entry.job->spec.id, entry.job->spec.request(),
                             tessel::Reason("runs {} s on {} GPUs in all; the shortest waiting job starts first",
                                            entry.run_seconds, entry.job->spec.gpus)});
    return plan;
  }

 private:
  struct Waiting {
    const tessel::JobState* job;
    double run_seconds;
  };
  std::vector<Waiting> waiting_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN(Sjf, allocation, "sjf", "1.0",
              "shortest job first (oracle run time from the throughput model), never preempts")

// smallest_first: jobs asking for the fewest GPUs go first; running jobs
// keep their GPUs. Ties go to the earlier arrival.
#include <algorithm>

#include <tessel/tessel.hpp>

namespace {

class SmallestFirst final : public tessel::AllocationPolicy {
 public:
  explicit SmallestFirst(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    std::vector<const tessel::JobState*> jobs(view.active().begin(), view.active().end());
    std::stable_sort(jobs.begin(), jobs.end(), [](auto* a, auto* b) {
      if (a->running() != b->running()) return a->running();
      return a->spec.gpus < b->spec.gpus;
    });
    tessel::AllocationPlan plan;
    for (const tessel::JobState* job : jobs)
      plan.ranked.push_back({job->spec.id, tessel::allocation::current_or_requested(*job),
                             tessel::Reason("asks for {} GPUs; the smallest go first", job->spec.gpus)});
    return plan;
  }
};

}  // namespace

TESSEL_PLUGIN(SmallestFirst, allocation, "smallest_first", "1.0", "fewest GPUs first, without preemption")

// A test policy with provisional plans (AllocationPlan::provisional):
// allocate() lists view.waiting() newest first and keeps the running jobs;
// allocate_whole() lists the same queue without keeping them, so a waiting
// job that does not fit preempts them (unranked, they are the first
// victims): queue_only's plan with `keep = false`. The `mode` argument
// breaks the whole plan in one way each, for the core's checks:
//   agree              as above
//   whole_provisional  allocate_whole returns a provisional plan
//   no_override        allocate_whole is the SDK's, which throws
//   no_keep            the provisional plan keeps nothing (keep_running unset)
//   ahead              the provisional plan leaves the oldest waiting job
//                      out; the whole plan ranks it first
//   after              the whole plan ranks the queue oldest first
//   started_last       the whole plan ranks the jobs the provisional one
//                      started this round last
//   deny_listed        the whole plan denies the queue its GPUs
//   regrant_kept       the whole plan also lists the running jobs, each
//                      with one more CPU than it holds
//   leave_out          the whole plan ranks nothing
//   resize_kept        the provisional plan also lists the running jobs,
//                      each with one more CPU, last; the whole plan keeps
//                      them (keep_running) without listing them
#include <algorithm>
#include <string>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"mode", tessel::ArgType::string, "\"agree\"", "how the whole plan agrees with the provisional one",
     "agree|whole_provisional|no_override|no_keep|ahead|after|started_last|deny_listed|regrant_kept|leave_out|"
     "resize_kept"},
};

class ProvisionalQueue final : public tessel::AllocationPolicy {
 public:
  explicit ProvisionalQueue(const tessel::PluginContext& context) : mode_(context.args().string("mode")) {}
  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::AllocationPlan plan;
    plan.provisional = true;
    if (mode_ != "no_keep") plan.keep_running = tessel::Reason("running; kept");
    const auto waiting = view.waiting();
    for (auto it = waiting.rbegin(); it != waiting.rend(); ++it)
      if (mode_ != "ahead" || it + 1 != waiting.rend()) plan.ranked.push_back(grant(**it));
    if (mode_ == "resize_kept") add_running_with_a_cpu_more(view, plan);
    return plan;
  }

  tessel::AllocationPlan allocate_whole(const tessel::SchedulerView& view) override {
    if (mode_ == "whole_provisional") return allocate(view);
    if (mode_ == "no_override") return AllocationPolicy::allocate_whole(view);  // as if not overridden
    tessel::AllocationPlan plan;
    if (mode_ == "leave_out") return plan;
    if (mode_ == "resize_kept") plan.keep_running = tessel::Reason("running; kept");
    // view.waiting() is the round's: jobs the provisional plan started since
    // are still listed, and run.
    const auto waiting = view.waiting();
    if (mode_ == "after") {
      for (const tessel::JobState* job : waiting)
        if (job->waiting()) plan.ranked.push_back(grant(*job));
      return plan;
    }
    for (auto it = waiting.rbegin(); it != waiting.rend(); ++it)
      if ((*it)->waiting()) plan.ranked.push_back(grant(**it));
    if (mode_ == "started_last")
      for (auto it = waiting.rbegin(); it != waiting.rend(); ++it)
        if ((*it)->running()) plan.ranked.push_back({(*it)->spec.id, (*it)->spec.request(), tessel::Reason("started")});
    if (mode_ == "deny_listed")
      for (tessel::Grant& g : plan.ranked) g.resources.gpus = 0;
    if (mode_ == "regrant_kept") add_running_with_a_cpu_more(view, plan);
    if (mode_ == "ahead" && !plan.ranked.empty())
      std::rotate(plan.ranked.begin(), plan.ranked.end() - 1, plan.ranked.end());
    return plan;
  }

 private:
  static void add_running_with_a_cpu_more(const tessel::SchedulerView& view, tessel::AllocationPlan& plan) {
    for (const tessel::JobState* job : view.active())
      if (job->running() && !job->waiting()) {
        tessel::Resources more = job->held();
        more.cpus += 1;
        plan.ranked.push_back({job->spec.id, more, tessel::Reason("one more CPU")});
      }
  }

  static tessel::Grant grant(const tessel::JobState& job) {
    return {job.spec.id, job.spec.request(), tessel::Reason("newest waiting first")};
  }

  std::string mode_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(ProvisionalQueue, allocation, "provisional_queue", "1.0",
                        "test policy: the queue newest first, in provisional plans; mode breaks the whole plan", kArgs)

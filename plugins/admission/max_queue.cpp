// max_queue: refuse jobs once too many are waiting.
//
// Source: no single paper; the bounded waiting queue of batch systems, which
// turn a submission away when the queue is full instead of letting waits grow
// without bound.
//
// The rule as implemented, each round, over the pending jobs in arrival
// order: a job is admitted while fewer than `max_waiting` admitted jobs wait
// (queued, or preempted and not yet running again), counting those admitted
// before it this round; otherwise it is rejected, with the reason. Rejection
// is final: the job never runs. Running jobs do not count, so a job admitted
// now may start at once and free its place in the queue.
//
// Simplification: jobs admitted this round count as waiting even if the
// round then starts them; the limit holds at the moment of admission.
#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"max_waiting", tessel::ArgType::integer, nullptr,
     "the most admitted jobs that may wait at once; jobs arriving beyond it are rejected"},
};

class MaxQueue final : public tessel::AdmissionPolicy {
 public:
  explicit MaxQueue(const tessel::PluginContext& context) : max_waiting_(context.args().integer("max_waiting")) {
    if (max_waiting_ < 0) throw tessel::ArgumentError("max_waiting", "must not be negative");
  }

  bool time_sensitive() const override { return false; }

  std::vector<tessel::AdmissionDecision> admit(const tessel::SchedulerView& view) override {
    std::int64_t waiting = 0;
    for (const tessel::JobState* job : view.active()) waiting += job->waiting();

    std::vector<tessel::AdmissionDecision> decisions;
    decisions.reserve(view.pending().size());
    for (const tessel::JobState* job : view.pending()) {
      if (waiting < max_waiting_) {
        ++waiting;
        decisions.push_back({job->spec.id, tessel::AdmissionVerdict::admit,
                             tessel::Reason("admitted: {} of at most {} jobs waiting", waiting, max_waiting_)});
      } else {
        decisions.push_back({job->spec.id, tessel::AdmissionVerdict::reject,
                             tessel::Reason("rejected: {} jobs already wait, the limit is {}", waiting,
                                            max_waiting_)});
      }
    }
    return decisions;
  }

 private:
  std::int64_t max_waiting_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(MaxQueue, admission, "max_queue", "1.0",
                        "admit while fewer than max_waiting admitted jobs wait; reject the rest for good", kArgs)

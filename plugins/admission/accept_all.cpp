// accept_all: every arriving job enters the queue at once (Blox's default).
#include <tessel/tessel.hpp>

namespace {

class AcceptAll final : public tessel::AdmissionPolicy {
 public:
  explicit AcceptAll(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }
  bool reads_progress() const override { return false; }

  std::vector<tessel::AdmissionDecision> admit(const tessel::SchedulerView& view) override {
    std::vector<tessel::AdmissionDecision> decisions;
    decisions.reserve(view.pending().size());
    for (const tessel::JobState* job : view.pending())
      decisions.push_back({job->spec.id, tessel::AdmissionVerdict::admit, tessel::Reason("accept_all admits every job")});
    return decisions;
  }
};

}  // namespace

TESSEL_PLUGIN(AcceptAll, admission, "accept_all", "1.0", "admit every job as soon as it arrives")

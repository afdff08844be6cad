// load_based: admit jobs while the admitted GPU demand stays under a limit.
//
// Source: Blox (Agarwal et al., EuroSys'24), msr-fiddle/blox,
// admission_control/load_based_accept.py (loadBasedAccept): arriving jobs
// join a FIFO overflow queue, and jobs leave it, in order, while the GPU
// demand of all active jobs (admitted and not finished, running or not) stays
// within load_thresh x the cluster's GPUs. Blox's examples use thresholds of
// 1.0 to 1.5 (1.2 in blox_new_flow_dynamic_policy.py); 1.2 is the default.
//
// The rule as implemented, each round, over the pending jobs in arrival
// order: a job is admitted if the demand of the active jobs (queued, running,
// preempted) plus the jobs admitted before it this round plus its own stays
// within `factor` x the GPUs of the nodes that are up. The first job that
// would exceed it is held, and so is every job behind it (FIFO). A job whose
// demand alone exceeds `factor` x all installed GPUs could never enter and
// is rejected.
//
// Differences from Blox: Blox checks the limit before adding a job, so the
// last job it admits may overshoot the limit; here no admission ever does.
// A job's demand is its requested GPUs times its share of each (gpu_milli /
// 1000), so fractional jobs count for what they take. Blox keeps the overflow
// queue itself; here the pending jobs are that queue.
#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"factor", tessel::ArgType::number, "1.2",
     "admit while the GPU demand of admitted jobs stays within factor x the cluster's GPUs"},
};

double demand_of(const tessel::JobSpec& spec) { return spec.gpus * (spec.gpu_milli / 1000.0); }

class LoadBased final : public tessel::AdmissionPolicy {
 public:
  explicit LoadBased(const tessel::PluginContext& context) : factor_(context.args().number("factor")) {
    if (!(factor_ > 0)) throw tessel::ArgumentError("factor", "must be positive");
  }

  bool time_sensitive() const override { return false; }

  std::vector<tessel::AdmissionDecision> admit(const tessel::SchedulerView& view) override {
    const tessel::ClusterState& cluster = view.cluster();
    const double limit = factor_ * cluster.total_gpus();
    const double ceiling = factor_ * cluster.installed_gpus();
    double admitted = 0;
    for (const tessel::JobState* job : view.active()) admitted += demand_of(job->spec);

    std::vector<tessel::AdmissionDecision> decisions;
    decisions.reserve(view.pending().size());
    const tessel::JobState* blocker = nullptr;
    for (const tessel::JobState* job : view.pending()) {
      const tessel::JobId id = job->spec.id;
      const double demand = demand_of(job->spec);
      if (demand > ceiling + 1e-9) {
        decisions.push_back({id, tessel::AdmissionVerdict::reject,
                             tessel::Reason("rejected: {} GPUs is more than the {} x {} GPUs ever admitted", demand,
                                            factor_, cluster.installed_gpus())});
        continue;
      }
      if (blocker != nullptr) {
        decisions.push_back({id, tessel::AdmissionVerdict::hold,
                             tessel::Reason("held: behind job {} in the admission queue", blocker->spec.id)});
        continue;
      }
      if (admitted + demand > limit + 1e-9) {
        blocker = job;
        decisions.push_back({id, tessel::AdmissionVerdict::hold,
                             tessel::Reason("held: admitted demand {} GPUs + {} would exceed {} x {}", admitted,
                                            demand, factor_, cluster.total_gpus())});
        continue;
      }
      admitted += demand;
      decisions.push_back({id, tessel::AdmissionVerdict::admit,
                           tessel::Reason("admitted: demand now {} GPUs, within {} x {}", admitted, factor_,
                                          cluster.total_gpus())});
    }
    return decisions;
  }

 private:
  double factor_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(LoadBased, admission, "load_based", "1.0",
                        "Blox: admit in arrival order while the GPU demand of admitted jobs stays within "
                        "factor x the cluster's GPUs",
                        kArgs)

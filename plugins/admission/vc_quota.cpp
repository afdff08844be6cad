// vc_quota: cap the GPU demand each virtual cluster may have admitted.
//
// Source: the virtual clusters (VCs) of Microsoft's Philly (Jeon et al.,
// USENIX ATC'19): the cluster is shared by teams through VCs, each with its
// share of the GPUs, and a VC's jobs queue when its share is used up. Philly
// enforces shares in its scheduler; here caps act at admission, the one
// stage that can hold a job back before allocation and placement.
//
// The rule as implemented, each round, over the pending jobs in arrival
// order: a job of a VC listed in `caps` is admitted if the GPU demand of its
// VC's active jobs (queued, running, preempted), plus that of the VC's jobs
// admitted before it this round, plus its own stays within the VC's cap;
// otherwise it is held, and so is every later job of the same VC (FIFO
// within a VC; other VCs are not affected). A job whose demand alone exceeds
// its VC's cap could never enter and is rejected. Jobs of VCs not listed
// (including jobs with no VC, listed as "") are admitted at once: unlisted
// VCs are unlimited.
//
// A job's demand is its requested GPUs times its share of each (gpu_milli /
// 1000). Simplification: caps are hard: a VC never borrows the idle share
// of another.
#include <map>
#include <string>

#include <tessel/tessel.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"caps", tessel::ArgType::number_table, "{}",
     "GPUs each VC may have admitted at once, by VC name: { research = 16, prod = 48 }; unlisted VCs are unlimited"},
};

double demand_of(const tessel::JobSpec& spec) { return spec.gpus * (spec.gpu_milli / 1000.0); }

std::string gpus_text(double gpus) {
  std::string text = std::to_string(gpus);
  text.erase(text.find_last_not_of('0') + 1);  // 6.500000 -> 6.5, 6.000000 -> 6.
  if (text.back() == '.') text.pop_back();
  return text;
}

class VcQuota final : public tessel::AdmissionPolicy {
 public:
  explicit VcQuota(const tessel::PluginContext& context) : caps_(context.args().number_table("caps")) {
    for (const auto& [vc, cap] : caps_)
      if (!(cap >= 0)) throw tessel::ArgumentError("caps", "the cap of vc '" + vc + "' must not be negative");
  }

  bool time_sensitive() const override { return false; }

  std::vector<tessel::AdmissionDecision> admit(const tessel::SchedulerView& view) override {
    // Per capped VC: its admitted demand, and its first held job this round.
    struct Books {
      double admitted = 0;
      const tessel::JobState* held = nullptr;
    };
    std::map<std::string, Books, std::less<>> books;
    for (const tessel::JobState* job : view.active())
      if (caps_.contains(job->spec.vc)) books[job->spec.vc].admitted += demand_of(job->spec);

    std::vector<tessel::AdmissionDecision> decisions;
    decisions.reserve(view.pending().size());
    for (const tessel::JobState* job : view.pending()) {
      const tessel::JobId id = job->spec.id;
      const std::string& vc = job->spec.vc;
      const auto cap = caps_.find(vc);
      if (cap == caps_.end()) {
        decisions.push_back({id, tessel::AdmissionVerdict::admit,
                             tessel::Reason::text("admitted: vc '" + vc + "' has no cap")});
        continue;
      }
      Books& vc_books = books[vc];
      const double demand = demand_of(job->spec);
      if (demand > cap->second + 1e-9) {
        decisions.push_back({id, tessel::AdmissionVerdict::reject,
                             tessel::Reason::text("rejected: asks for " + gpus_text(demand) + " GPUs, more than vc '" +
                                                  vc + "' may ever have (cap " + gpus_text(cap->second) + ")")});
        continue;
      }
      if (vc_books.held != nullptr) {
        decisions.push_back({id, tessel::AdmissionVerdict::hold,
                             tessel::Reason::text("held: behind job " + std::to_string(vc_books.held->spec.id) +
                                                  " of vc '" + vc + "'")});
        continue;
      }
      if (vc_books.admitted + demand > cap->second + 1e-9) {
        vc_books.held = job;
        decisions.push_back({id, tessel::AdmissionVerdict::hold,
                             tessel::Reason::text("held: vc '" + vc + "' has " + gpus_text(vc_books.admitted) +
                                                  " GPUs admitted, " + gpus_text(demand) +
                                                  " more would exceed its cap of " + gpus_text(cap->second))});
        continue;
      }
      vc_books.admitted += demand;
      decisions.push_back({id, tessel::AdmissionVerdict::admit,
                           tessel::Reason::text("admitted: vc '" + vc + "' now has " + gpus_text(vc_books.admitted) +
                                                " of its " + gpus_text(cap->second) + " GPUs")});
    }
    return decisions;
  }

 private:
  tessel::NumberTable caps_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(VcQuota, admission, "vc_quota", "1.0",
                        "per-VC caps on the GPU demand of admitted jobs; over-cap jobs wait, unlisted VCs are "
                        "unlimited",
                        kArgs)

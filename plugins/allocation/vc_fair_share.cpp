// vc_fair_share: per-virtual-cluster GPU quotas, with idle quota lent out
// and reclaimed by preemption; FIFO within a VC.
//
// Sources: the capacity scheduler of Hadoop YARN (queues with a guaranteed
// share of the cluster; a queue may run beyond it on idle capacity, which
// preemption takes back for the owning queue; applications in a queue in
// FIFO order), and Philly's scheduler as Jeon et al. describe it ("Analysis
// of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads",
// ATC'19): each VC has a GPU quota for fairness among the teams sharing the
// cluster, jobs wait in their VC's queue, jobs may run on other VCs' idle
// GPUs, and those are preempted when the owning VC needs its quota back.
//
// The rule, every round:
//  - `quotas` maps a VC to its share of the GPUs on nodes that are up.
//    Shares are in [0, 1] and sum to at most 1. All VCs not listed (and jobs
//    without a VC) form one pool that shares what is left, like YARN's
//    default queue; with every share listed, that pool gets nothing of its
//    own and can only borrow.
//  - Each VC's queue holds its running jobs, then its waiting jobs, each in
//    arrival order. Walking it, a job is within quota while the VC's GPUs so
//    far plus its own fit in the quota. A running job that does not fit is a
//    borrower; the first waiting job that does not fit ends the VC's quota
//    for this round (FIFO: no later job of the VC overtakes it there), and it
//    and every later waiting job of the VC are borrowers too.
//  - Ranked: jobs within quota (running, then waiting), then borrowers
//    (running, then waiting, in arrival order) if `lend_idle`; without it,
//    borrowers wait. Quotas fit in the cluster, so a VC's job within quota
//    can always be placed by preempting borrowers, and the core preempts the
//    lowest-ranked first and only as many as that placement needs: lent GPUs
//    come back exactly when and as far as their owner's jobs need them.
//
// Simplifications: borrowers are served in arrival order, where YARN offers
// idle capacity to the queue furthest below its guarantee first; there is
// no maximum capacity per VC; fit is counted in GPUs only (placement checks
// the rest). A round costs O(J + V) for J active jobs in V pools.
#include <algorithm>
#include <sstream>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"quotas", tessel::ArgType::number_table, "{}",
     "VC -> share of the cluster's GPUs in [0, 1], summing to at most 1; VCs not listed share the rest"},
    {"lend_idle", tessel::ArgType::boolean, "true",
     "let jobs beyond their VC's quota run on idle GPUs, preempted when the owner needs them"},
};

// Quota arithmetic is in GPUs times shares; this absorbs rounding (0.3 * 10).
constexpr double kSlack = 1e-9;

class VcFairShare final : public tessel::AllocationPolicy {
 public:
  explicit VcFairShare(const tessel::PluginContext& context)
      : lend_idle_(context.args().boolean("lend_idle")), vcs_(context) {
    double listed = 0;
    for (const auto& [vc, share] : context.args().number_table("quotas")) {
      if (!(share >= 0 && share <= 1)) {
        std::ostringstream message;
        message << "the share of VC '" << vc << "' must be in [0, 1], got " << share;
        throw tessel::ArgumentError("quotas", message.str());
      }
      vcs_.add(vc);
      shares_.push_back(share);
      listed += share;
    }
    if (listed > 1 + kSlack) {
      std::ostringstream message;
      message << "the shares add up to " << listed << ", more than the whole cluster (1)";
      throw tessel::ArgumentError("quotas", message.str());
    }
    shares_.push_back(std::max(0.0, 1 - listed));  // the pool of VCs not listed
    pools_.resize(shares_.size());
  }

  // Decisions depend on the jobs and the cluster only.
  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const double total = view.cluster().total_gpus();
    for (std::size_t p = 0; p < pools_.size(); ++p) pools_[p] = Pool{shares_[p] * total, 0, false};
    tessel::AllocationPlan plan;
    plan.ranked.reserve(view.active().size());  // within quota first; borrowers appended after
    borrowing_.clear();
    for (bool running : {true, false})
      for (const tessel::JobState* job : view.active()) {
        if (job->running() != running) continue;
        Pool& pool = pools_[pool_of(*job)];
        const tessel::Resources demand = tessel::allocation::current_or_requested(*job);
        const double gpus = tessel::allocation::gpu_count(demand);
        if (!pool.closed && pool.used + gpus <= pool.quota + kSlack) {
          pool.used += gpus;
          plan.ranked.push_back(
              {job->spec.id, demand,
               tessel::Reason("within its VC's quota: {} of {} GPUs with this job", pool.used, pool.quota)});
          continue;
        }
        if (!running) pool.closed = true;
        borrowing_.push_back(borrower(*job, demand, pool));
      }
    plan.ranked.insert(plan.ranked.end(), borrowing_.begin(), borrowing_.end());
    return plan;
  }

 private:
  struct Pool {
    double quota;  // GPUs
    double used;   // GPUs of its jobs within quota so far
    bool closed;   // a waiting job did not fit: the rest of its queue waits behind it
  };

  std::size_t pool_of(const tessel::JobState& job) {
    // Listed VCs have the first indices; every other name maps to the last pool.
    return std::min(vcs_.of(job, job.spec.vc), pools_.size() - 1);
  }

  tessel::Grant borrower(const tessel::JobState& job, const tessel::Resources& demand, const Pool& pool) const {
    if (!lend_idle_)
      return tessel::allocation::deny(job, tessel::Reason("its VC's quota of {} GPUs is taken ({} in use or queued "
                                                          "ahead) and lend_idle is off",
                                                          pool.quota, pool.used));
    if (job.running())
      return {job.spec.id, demand,
              tessel::Reason("borrows idle GPUs beyond its VC's quota of {} GPUs; preempted first when a VC "
                             "needs its own",
                             pool.quota)};
    return {job.spec.id, demand,
            tessel::Reason("its VC's quota of {} GPUs is taken ({} in use or queued ahead); may borrow idle GPUs "
                           "until their VC needs them",
                           pool.quota, pool.used)};
  }

  bool lend_idle_;
  tessel::allocation::NameIndex vcs_;
  std::vector<double> shares_;  // by pool: listed VCs, then the rest
  std::vector<Pool> pools_;     // by pool, reused across rounds
  std::vector<tessel::Grant> borrowing_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(VcFairShare, allocation, "vc_fair_share", "1.0",
                        "per-VC GPU quotas (YARN capacity scheduler, Philly): FIFO within a VC, idle quota lent "
                        "and reclaimed by preemption",
                        kArgs)

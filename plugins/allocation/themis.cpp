// themis: finish-time fairness, after Themis (Mahajan et al., "Themis: Fair
// and Efficient GPU Cluster Scheduling", NSDI'20).
//
// A job's finish-time fairness is rho = T_shared / T_isolated:
//   T_shared   = (now - arrival) + its remaining time on what it holds if it
//                runs, or on its request if it waits (throughput model);
//   T_isolated = its whole work on an isolated 1/N_avg share of the cluster:
//                C / N_avg GPUs (C GPUs on nodes that are up), or its request
//                if that is fewer; a share smaller than the request is
//                time-shared, so the job runs that fraction of the time.
// N_avg is the average number of active jobs over the rounds the job has
// been active, kept in a job slot, which is how the Themis simulators we
// read estimate contention; with a steady N it is N. rho > 1 means the job
// does worse than it would on its own 1/N of the cluster.
//
// Each round every lease ends (a lease is one round; the authors' YARN
// arbiter defaults to 5-minute leases, tessel's rounds to 300 s): the worst-off
// max(1, floor((1 - f) * N)) jobs by rho bid, f = `fairness_knob` (0.8, the
// paper's default; its authors' YARN arbiter sizes the bidding set the same
// way), and are ranked first, highest rho first. The GPUs they leave are
// handed out to stay work-conserving: first to the other running jobs,
// which keep what they hold (a renewed lease costs no restart), then to the
// other waiting jobs, highest rho first. Equal rho: earlier arrival first.
// So f trades churn for fairness: at f = 0 every job bids and the ranking is
// pure rho (any job may displace one with a lower rho); as f grows only the
// worst-off few may take GPUs from running jobs.
//
// Simplifications:
//  - No auction: Themis's bidders offer valuations for bundles of GPUs and
//    the arbiter picks the allocation that maximises the product of their
//    rho improvements (a partial-allocation auction with hidden payments).
//    Here bidders are served in rho order, each at its own size; placement
//    preferences are the placement plugin's. In Themis f trades the
//    auction's efficiency among many bidders for fairness to a few; without
//    the auction what f still decides is how many jobs may displace running
//    ones.
//  - The Themis simulator (com.wisr.mlsched) breaks ties at the boundary of
//    the bidding set at random; here by arrival.
//  - A job is one app with one job; Themis's apps may hold several jobs
//    (hyper-parameter searches) and report their best one's rho.
//  - Jobs keep their size: a waiting job asks for its request, a running one
//    for what it holds; no partial allocations.
//
// A round costs O(N log N) for N active jobs (one sort).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"fairness_knob", tessel::ArgType::number, "0.8",
     "f in [0, 1): each round the worst-off max(1, floor((1 - f) N)) of the N active jobs, by finish-time "
     "fairness, bid first; f = 0 ranks every job by rho"},
};

// Rounds a job has been active and the active jobs it saw, summed.
struct Contention {
  double active_jobs = 0;
  int rounds = 0;
};

class Themis final : public tessel::AllocationPolicy {
 public:
  explicit Themis(const tessel::PluginContext& context)
      : knob_(context.args().number("fairness_knob")), contention_(context.job_slot<Contention>()) {
    if (!(knob_ >= 0 && knob_ < 1)) {
      std::ostringstream message;
      message << "must be in [0, 1), got " << knob_;
      throw tessel::ArgumentError("fairness_knob", message.str());
    }
  }

  // rho grows while a job waits.
  bool time_sensitive() const override { return true; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const auto active = view.active();
    tessel::AllocationPlan plan;
    if (active.empty()) return plan;
    const tessel::ClusterState& cluster = view.cluster();
    const double jobs = static_cast<double>(active.size());
    fairness_.clear();
    fairness_.reserve(active.size());
    for (const tessel::JobState* job : active) {
      Contention& seen = contention_(job->slots);
      seen.active_jobs += jobs;
      ++seen.rounds;
      fairness_.push_back(finish_time_fairness(view, *job, cluster.total_gpus() * seen.rounds / seen.active_jobs));
    }
    std::sort(fairness_.begin(), fairness_.end(), [](const Fairness& a, const Fairness& b) {
      return a.rho != b.rho ? a.rho > b.rho : a.job->spec.id < b.job->spec.id;
    });
    // The epsilon keeps (1 - 0.8) * 10 from flooring to 1.
    const std::size_t bidders =
        std::max<std::size_t>(1, static_cast<std::size_t>(std::floor((1 - knob_) * jobs + 1e-9)));
    // Leftovers: running jobs keep what they hold before waiting ones start.
    std::stable_partition(fairness_.begin() + static_cast<std::ptrdiff_t>(bidders), fairness_.end(),
                          [](const Fairness& f) { return f.job->running(); });

    plan.ranked.reserve(fairness_.size());
    for (std::size_t i = 0; i < fairness_.size(); ++i) {
      const Fairness& f = fairness_[i];
      tessel::Reason reason;
      if (i < bidders)
        reason = tessel::Reason("finish-time fairness rho {} (shared {} s / isolated {} s), among the {} worst-off "
                                "that bid first",
                                f.rho, std::round(f.shared_seconds), std::round(f.isolated_seconds), bidders);
      else if (f.job->running())
        reason = tessel::Reason("rho {}, not among the {} worst-off: keeps its GPUs unless a bidder needs them",
                                f.rho, bidders);
      else
        reason = tessel::Reason("rho {}, not among the {} worst-off: runs on GPUs that bidders and running jobs "
                                "leave",
                                f.rho, bidders);
      plan.ranked.push_back({f.job->spec.id, tessel::allocation::current_or_requested(*f.job), reason});
    }
    return plan;
  }

 private:
  struct Fairness {
    const tessel::JobState* job;
    double rho;
    double shared_seconds;
    double isolated_seconds;
  };

  static Fairness finish_time_fairness(const tessel::SchedulerView& view, const tessel::JobState& job,
                                       double fair_share_gpus) {
    const tessel::ClusterState& cluster = view.cluster();
    const int gpus = tessel::allocation::current_or_requested(job).gpus;
    const tessel::Shape packed = cluster.packed_shape(job.spec, gpus);
    const tessel::Shape now = job.running() ? cluster.shape_of(job.allocation) : packed;
    const double shared = (view.now() - job.spec.arrival) + view.remaining_seconds(job, now);
    const double isolated_rate = view.throughput().rate(job.spec, packed) * std::min(1.0, fair_share_gpus / gpus);
    const double isolated = job.spec.total_work / isolated_rate;  // infinite on a cluster with no GPU up
    return {&job, shared / isolated, shared, isolated};
  }

  double knob_;
  tessel::Slot<Contention> contention_;
  std::vector<Fairness> fairness_;  // reused across rounds
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Themis, allocation, "themis", "1.0",
                        "Themis (NSDI'20): the worst-off jobs by finish-time fairness rho = T_shared / T_isolated "
                        "bid first",
                        kArgs)

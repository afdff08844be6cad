// themis: finish-time fairness and its partial-allocation auction, after
// Themis (Mahajan et al., "Themis: Fair and Efficient GPU Cluster
// Scheduling", NSDI'20, Section 5 and its Pseudocode 1), whose auction is the
// partial allocation (PA) mechanism of Cole, Gkatzelis and Goel ("Mechanism
// Design for Fair Division", EC'13).
//
// Finish-time fairness. A job's rho = T_shared / T_isolated:
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
// The round, as implemented. A lease is one round (the authors' YARN arbiter
// defaults to 5-minute leases, tessel's rounds to 300 s), so every round all
// C GPUs on nodes that are up are offered:
//  1. Bidders: the worst-off max(1, floor((1 - f) N)) of the N active jobs by
//     rho, f = `fairness_knob` (0.8, the paper's default). Equal rho: earlier
//     arrival first; the bidders in that order are the "rank" below.
//  2. Bids: bidder i values a bundle of g GPUs at v_i(g) = rho_old / rho_new(g),
//     the improvement in its rho: rho_old is its rho above; rho_new(g) puts
//     T_shared(g) = (now - arrival) + its remaining time on g GPUs of the bid
//     shape below for each g it can run at (its request if rigid,
//     [min_gpus, max_gpus] if elastic, at most C), and for g = 0 it waits one
//     lease and then runs as it would now: (now - arrival) + round_seconds +
//     its remaining time on its current or requested count, of the bid shape.
//     T_isolated cancels, so v_i(g) = T_shared_old / T_shared(g).
//     The bid shape, argument `bid_shape`:
//      - "packed" (default): g GPUs on as few nodes as the cluster's largest
//        node allows (ClusterState::packed_shape), whichever GPUs are busy.
//      - "offered": g GPUs as tightly as the offer allows, Themis's bids
//        being over the GPUs the arbiter offers, whose placement a
//        placement-sensitive job prices. The offer is, on each node that is
//        up, the GPUs that no running non-bidder holds: the free ones and the
//        bidders' own, which the auction divides again. The tightest packing
//        of g GPUs on it takes the nodes with the most offered GPUs whole
//        until the rest fits on one node, then the node with the fewest
//        offered GPUs that holds the rest: the fewest nodes there are (ties:
//        lower node id first; gpu_choice::split_over_fewest_nodes, as
//        placements spread a job). The throughput model prices that shape,
//        so a job slowed by spanning nodes bids less for g GPUs scattered
//        over several nodes than for g on one. For g above the offer the bidder
//        needs GPUs that running non-bidders hold; which ones the core's
//        preemption frees is not known when bidding, so such g is priced
//        packed, as under "packed".
//  3. Proportional-fair allocation: the counts g_i, sum <= C, that maximize
//     the product of v_i(g_i) (Nash social welfare), solved exactly as a sum
//     of log(1 / T_shared(g_i)) (log v_i less a constant per bidder) by
//     dynamic programming over bidders and GPUs
//     (tessel::allocation::CountKnapsack). Ties go to fewer GPUs for the
//     lowest-ranked bidder, then the next lowest, and so on.
//  4. Partial allocation: bidder i keeps the fraction
//        c_i = prod_{j != i} v_j(g_j) / max over allocations of C GPUs to the
//              bidders other than i of prod_{j != i} v_j
//     of its bundle: what its presence costs the others is its hidden
//     payment. c_i <= 1, and 1 for a lone bidder. Scaling every v_j by a
//     constant changes neither the allocation nor c_i, so bidding the
//     improvement rho_old / rho_new and bidding 1 / rho_new, as the paper's
//     pseudocode writes its objective, are the same auction.
//     GPUs are indivisible and jobs gang-scheduled, so c_i * g_i is rounded
//     to the nearest count the job can run at, 0 or [min_gpus, g_i], ties up.
//  5. Leftovers, everything the bidders do not keep, go to the other jobs,
//     work-conserving: first running non-bidders keep what they hold (a
//     renewed lease costs no restart), then waiting non-bidders start,
//     highest rho first (equal rho: earlier arrival), then the bidders left
//     with nothing, highest rho first, on GPUs that would otherwise idle
//     (say, when every job bids). A bidder that keeps part of its bundle is
//     not given the rest back even if no one takes it: that is its payment
//     (an elasticity plugin may still grow it).
// The plan lists, in order: bidders that keep GPUs (those that shrink, keep
// their size, grow, then start, each group by rank, so no bidder's growth
// preempts another bidder), then step 5's jobs. The core preempts
// lower-ranked running jobs for a bidder's bundle, so at f = 0 (everyone
// bids) the auction alone decides, and as f grows only the worst-off few may
// take GPUs from running jobs.
//
// Simplifications:
//  - Bids are over GPU counts, each priced on one shape (step 2); Themis's
//    bidders bid on GPU subsets. The DP over counts stays, and the placement
//    plugin picks the GPUs of the count the auction gives. Under "offered"
//    each bidder prices g on the whole offer as if it were alone: the other
//    bidders' bundles, which take part of the offer, are ignored; the
//    offer's racks are not minimized (the shape spans the racks of the
//    nodes its tightest packing picks); and a bidder that keeps its size is
//    priced on the offer's tightest packing, not on the GPUs it holds.
//    Pricing g above the offer packed can make such a bid worth more to a
//    placement-sensitive job than one for the whole offer.
//  - The PA fraction is rounded to a whole runnable count (step 4); the
//    mechanism divides goods. The authors' arbiter, which we could not read,
//    may round otherwise.
//  - Bundles count whole GPUs: a job sharing GPUs (gpu_milli < 1000) is sized
//    in the auction as if it held its GPUs whole; the leftover pass places it
//    by its share.
//  - Valuations leave out restart costs; a bidder moved to another size
//    pays the elasticity plugin's reconfiguration time all the same.
//  - Themis gives leftovers to the non-bidders at random, and its simulator
//    (com.wisr.mlsched) breaks ties at the boundary of the bidding set at
//    random; here both follow rho, then arrival, so runs repeat exactly.
//  - A job is one app with one job; Themis's apps may hold several jobs
//    (hyper-parameter searches) and report their best one's rho.
//
// A round costs O(N log N) for N active jobs (one sort) plus
// O(B x C x S) for B bidders, C GPUs and S sizes a bidder can run at; under
// "offered", O(C + M log M) more to gather the offer on M nodes and O(M)
// for each of the B x S shapes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>
#include <tessel/gpu_choice.hpp>

namespace {

using tessel::gpu_choice::NodeRoom;  // a node and the GPUs offered there

constexpr tessel::ArgSpec kArgs[] = {
    {"fairness_knob", tessel::ArgType::number, "0.8",
     "f in [0, 1]: each round the worst-off max(1, floor((1 - f) N)) of the N active jobs, by finish-time "
     "fairness, bid in a partial-allocation auction for the cluster's GPUs; the others share its leftovers"},
    {"bid_shape", tessel::ArgType::string, "\"packed\"",
     "the shape a bidder's g GPUs are priced on: packed onto as few nodes as the largest node allows, or "
     "offered: as tightly as the GPUs no running non-bidder holds allow (packed when g is more than those)",
     "packed|offered"},
};

// Rounds a job has been active and the active jobs it saw, summed.
struct Contention {
  double active_jobs = 0;
  int rounds = 0;
};

class Themis final : public tessel::AllocationPolicy {
 public:
  explicit Themis(const tessel::PluginContext& context)
      : knob_(context.args().number("fairness_knob")),
        offered_(context.args().string("bid_shape") == "offered"),
        contention_(context.job_slot<Contention>()) {
    if (!(knob_ >= 0 && knob_ <= 1)) {
      std::ostringstream message;
      message << "must be in [0, 1], got " << knob_;
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
    const std::size_t bidders = std::min(
        fairness_.size(), std::max<std::size_t>(1, static_cast<std::size_t>(std::floor((1 - knob_) * jobs + 1e-9))));
    auction(view, bidders);

    plan.ranked.reserve(fairness_.size());
    // Bidders that keep GPUs: shrinking ones free GPUs before growing and
    // starting ones need them.
    enum Group { shrink, keep, grow, start, groups };
    for (int group = shrink; group < groups; ++group)
      for (const Bid& bid : bids_) {
        const tessel::JobState& job = *fairness_[bid.rank].job;
        const int held = job.running() ? job.allocation.gpu_count() : 0;
        if (bid.kept == 0) continue;
        const Group of = held == 0 ? start : bid.kept < held ? shrink : bid.kept == held ? keep : grow;
        if (of != group) continue;
        tessel::Resources resources = job.spec.request();
        resources.gpus = bid.kept;
        plan.ranked.push_back({job.spec.id, resources,
                               tessel::Reason("bids at rho {}: the proportional-fair bundle is {} GPUs; it keeps {} "
                                              "(partial-allocation fraction {})",
                                              fairness_[bid.rank].rho, bid.bundle, bid.kept, bid.fraction)});
      }
    // Leftovers: running non-bidders, then waiting ones, then bidders left
    // with nothing.
    for (std::size_t i = bidders; i < fairness_.size(); ++i)
      if (fairness_[i].job->running())
        leftover(plan, fairness_[i],
                 tessel::Reason("rho {}, not among the {} worst-off that bid: keeps its GPUs from the auction's "
                                "leftovers unless a bidder needs them",
                                fairness_[i].rho, bidders));
    for (std::size_t i = bidders; i < fairness_.size(); ++i)
      if (!fairness_[i].job->running())
        leftover(plan, fairness_[i],
                 tessel::Reason("rho {}, not among the {} worst-off that bid: runs on the auction's leftovers",
                                fairness_[i].rho, bidders));
    for (const Bid& bid : bids_) {
      if (bid.kept > 0) continue;
      const Fairness& f = fairness_[bid.rank];
      leftover(plan, f,
               bid.bundle == 0
                   ? tessel::Reason("bids at rho {}: the proportional-fair allocation gives it none of the {} "
                                    "GPUs; runs only on GPUs no other job takes",
                                    f.rho, cluster.total_gpus())
                   : tessel::Reason("bids at rho {}: its bundle of {} GPUs times its partial-allocation fraction "
                                    "{} rounds to none; runs only on GPUs no other job takes",
                                    f.rho, bid.bundle, bid.fraction));
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
  // A bundle size a bidder can run at and its term in the sum of logs:
  // log(1 / T_shared(g)), which is log v(g) less the bidder's constant
  // log T_shared_old (constants cancel in the allocation and in c_i).
  struct Option {
    int gpus;
    double log_value;
  };
  struct Bid {
    std::size_t rank;             // index into fairness_
    std::vector<Option> options;  // ascending GPUs, 0 first
    int bundle = 0;               // its share of the proportional-fair allocation
    double fraction = 1;          // c_i
    int kept = 0;                 // what it runs on
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

  // Steps 2 to 4 of the header for the first `bidders` of fairness_: fills bids_.
  void auction(const tessel::SchedulerView& view, std::size_t bidders) {
    const tessel::ClusterState& cluster = view.cluster();
    const int budget = cluster.total_gpus();
    if (offered_) gather_offer(cluster, bidders);
    bids_.resize(bidders);
    for (std::size_t i = 0; i < bidders; ++i) {
      const tessel::JobState& job = *fairness_[i].job;
      Bid& bid = bids_[i];
      bid.rank = i;
      bid.options.clear();
      const double elapsed = view.now() - job.spec.arrival;
      const int resume = tessel::allocation::current_or_requested(job).gpus;
      const double waits = elapsed + view.settings().round_seconds +
                           view.remaining_seconds(job, bid_shape(cluster, job.spec, resume));
      bid.options.push_back({0, log_inverse(waits)});
      for (int g = job.spec.min_gpus; g <= std::min(job.spec.max_gpus, budget); ++g)
        bid.options.push_back({g, log_inverse(elapsed + view.remaining_seconds(job, bid_shape(cluster, job.spec, g)))});
    }
    const auto options_of = [this](std::size_t i) -> const std::vector<Option>& { return bids_[i].options; };
    const auto value_of = [](const Option& option) { return option.log_value; };
    const std::vector<std::size_t>& picked = knapsack_.solve(bidders, budget, options_of, value_of);
    const double best = knapsack_.best();
    const std::vector<double>& without = knapsack_.best_without_each(options_of, value_of);
    for (std::size_t i = 0; i < bidders; ++i) {
      Bid& bid = bids_[i];
      const Option& won = bid.options[picked[i]];
      bid.bundle = won.gpus;
      // log c_i: the others' product in the best allocation (all of it but
      // i's term) less the best product they reach without i.
      bid.fraction = std::min(1.0, std::exp(best - won.log_value - without[i]));
      bid.kept = runnable_count(fairness_[i].job->spec, bid.fraction * bid.bundle, bid.bundle);
    }
  }

  // The offer of step 2 under "offered": for each node that is up, the GPUs
  // no running non-bidder holds, most first (equal: lower node id first).
  void gather_offer(const tessel::ClusterState& cluster, std::size_t bidders) {
    bidder_ids_.clear();
    for (std::size_t i = 0; i < bidders; ++i) bidder_ids_.push_back(fairness_[i].job->spec.id);
    std::sort(bidder_ids_.begin(), bidder_ids_.end());
    const auto bidder = [this](tessel::JobId id) {
      return std::binary_search(bidder_ids_.begin(), bidder_ids_.end(), id);
    };
    offer_.clear();
    for (const tessel::Node& node : cluster.nodes()) {
      if (!node.up) continue;
      int gpus = 0;
      for (const tessel::Gpu& gpu : cluster.gpus_of(node.id))
        if (std::all_of(gpu.jobs.begin(), gpu.jobs.end(), bidder)) ++gpus;
      if (gpus > 0) offer_.push_back({node.id, gpus});
    }
    std::stable_sort(offer_.begin(), offer_.end(),
                     [](const NodeRoom& a, const NodeRoom& b) { return a.gpus > b.gpus; });
  }

  // The shape bidders price `gpus` GPUs on (step 2 of the header).
  tessel::Shape bid_shape(const tessel::ClusterState& cluster, const tessel::JobSpec& spec, int gpus) {
    tessel::Shape shape = cluster.packed_shape(spec, gpus);
    if (!offered_ || gpus == 0) return shape;
    // The offer on nodes of the packed shape's GPU type, as packed_shape
    // prices that type.
    picked_.clear();
    int offered = 0;
    for (const NodeRoom& node : offer_)
      if (cluster.node(node.node).spec.gpu_type == shape.gpu_type) {
        picked_.push_back(node);
        offered += node.gpus;
      }
    if (gpus > offered) return shape;
    shape.node_gpus.clear();
    std::vector<int> racks;
    tessel::gpu_choice::split_over_fewest_nodes(picked_, gpus, [&](const NodeRoom& node, int here) {
      shape.node_gpus.push_back(here);
      const int rack = cluster.node(node.node).spec.rack;
      if (std::find(racks.begin(), racks.end(), rack) == racks.end()) racks.push_back(rack);
    });
    shape.nodes = static_cast<int>(shape.node_gpus.size());
    shape.racks = static_cast<int>(racks.size());
    return shape;
  }

  // log(1 / seconds), finite: a size the throughput model says never ends
  // is worth as little as can be, not -infinity, which would make every
  // sum in the knapsack -infinity alike.
  static double log_inverse(double seconds) {
    return -std::log(std::clamp(seconds, std::numeric_limits<double>::min(), std::numeric_limits<double>::max()));
  }

  // The count the job can run at, 0 or [min_gpus, most], nearest to
  // `share`; ties up.
  static int runnable_count(const tessel::JobSpec& spec, double share, int most) {
    if (most == 0 || share + 1e-9 < spec.min_gpus / 2.0) return 0;
    return std::clamp(static_cast<int>(std::floor(share + 0.5 + 1e-9)), spec.min_gpus, most);
  }

  static void leftover(tessel::AllocationPlan& plan, const Fairness& f, tessel::Reason reason) {
    plan.ranked.push_back({f.job->spec.id, tessel::allocation::current_or_requested(*f.job), std::move(reason)});
  }

  double knob_;
  bool offered_;  // bid_shape = "offered"
  tessel::Slot<Contention> contention_;
  // Reused across rounds.
  std::vector<Fairness> fairness_;
  std::vector<Bid> bids_;
  std::vector<tessel::JobId> bidder_ids_;
  std::vector<NodeRoom> offer_;
  std::vector<NodeRoom> picked_;  // offer_ of one GPU type
  tessel::allocation::CountKnapsack knapsack_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Themis, allocation, "themis", "2.0",
                        "Themis (NSDI'20): the worst-off jobs by finish-time fairness rho = T_shared / T_isolated "
                        "bid in a partial-allocation auction; the others share its leftovers",
                        kArgs)

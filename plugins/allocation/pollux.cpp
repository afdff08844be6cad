// pollux: Pollux's cluster-wide allocation. Every interval, the GPU counts
// that maximize the generalized (power) mean of the jobs' speedups.
//
// Paper: A. Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
// Goodput-Optimized Deep Learning", OSDI'21, §4.2 (PolluxSched). Semantics
// follow the artifact's simulator, petuum/adaptdl branch osdi21-artifact:
// simulator/pollux.py (PolluxPolicy.optimize, Problem.__init__, _evaluate,
// _repair), speedup.py, goodput.py, and simulator.py (Cluster.step,
// get_pollux_job_info, Job.reallocate). Goodput and speedup are in
// tessel/goodput.hpp, shared with the `pollux` elasticity plugin,
// which picks each job's batch size on the GPUs it gets.
//
// The rule, every `interval_seconds` (60):
//  * Each active job j gets g_j GPUs, 0 included, to maximize
//        M_p = ((1/J) sum_j (x_j + 0.001)^p)^(1/p),   p = `mean_exponent` (-1),
//    under sum_j g_j <= the cluster's GPUs, where
//        x_j = SPEEDUP_j(g_j) x RESTART_j(g_j) x nodes / GPUs.
//    - SPEEDUP_j(g): goodput on g GPUs over goodput on the fair share
//      (goodput.hpp); 0 on no GPUs. A job that has never run has measured
//      nothing, and Pollux takes g / fair share for it.
//    - RESTART_j(g) = max(age - d x restarts, 0) / (age + d) when g differs
//      from what the job holds (a start included), else 1: age = seconds
//      since it arrived, restarts = its reallocations after the first,
//      d = `restart_penalty_seconds` (30); 1 when d = 0.
//    - nodes / GPUs (Pollux: each job's dominant share x nodes) makes a
//      node's worth of fair share count 1. With the 0.001 it fixes what a job
//      left without GPUs costs: (0.001)^-1 = 1000 under p = -1, against
//      about 4 for a job at its fair share, so every job gets a GPU while
//      there are enough (but one of age 0, whose RESTART is 0), and beyond that the jobs that would lose most by
//      moving (the restart penalty) keep theirs.
//  * What a job may get: a rigid job its request or nothing; an elastic one
//    nothing or [min_gpus, max_gpus], at most twice the most GPUs it has run
//    on (at least 1, or min_gpus; Pollux's max_replicas: it grows a job only
//    as far as it has measured), and no more than its batch sizes leave a
//    micro-batch on (largest batch / smallest micro-batch).
//  * Goodput on g GPUs is priced on the fewest nodes g GPUs take, which
//    consolidated placement realizes when the free GPUs allow; a job keeping
//    its count keeps its GPUs and is priced on the nodes it spans.
//  * Between optimizations running jobs keep their GPUs and new arrivals
//    wait, as in Pollux. With rounds shorter than the interval, the
//    optimization runs at the first round at least an interval after the last.
//
// The search. For p != 0, maximizing M_p is maximizing sum_j sign(p) (x_j +
// 0.001)^p (for p = 0, the geometric mean: sum_j log max(x_j, 0.001)): one
// term per job, under one budget of GPUs. Dynamic programming over jobs and
// GPU counts finds the exact optimum in O(jobs x GPUs x largest g); ties go
// to fewer GPUs. Pollux searches the same objective with a genetic
// algorithm (NSGA-II, 100 generations of 100 job x node matrices, seeded
// with the previous interval's), which cannot beat the exact optimum of the
// count problem; its node choices are the simplification below.
//
// Simplifications:
//  - Counts, not nodes. Pollux's states say which nodes each job uses, so it
//    may move a job to consolidate it (paying the restart penalty) and it
//    allows at most one multi-node job per node. Here placement picks the
//    GPUs, and a job keeps them unless its count changes.
//  - Oracle goodput. Pollux fits a throughput model to each job's own
//    measurements and applies the gradient statistics last measured at its
//    current batch size to every candidate; we ask the throughput model
//    (rate_at at the job's progress, each candidate at its own statistics).
//  - Pollux's second objective, cluster utility (for autoscaling), only
//    breaks ties among solutions of equal mean; we break them towards fewer
//    GPUs.
//  - Rigid jobs are priced at their own batch size; Pollux searches batch
//    sizes for them too, though they run at their own.
#include <algorithm>
#include <cmath>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

using tessel::allocation::deny;

constexpr tessel::ArgSpec kArgs[] = {
    {"interval_seconds", tessel::ArgType::number, "60",
     "seconds between reallocations; in between jobs keep their GPUs and new arrivals wait"},
    {"mean_exponent", tessel::ArgType::number, "-1",
     "p of the power mean of speedups that is maximized: -1 as in Pollux, more negative is fairer, "
     "0 the geometric mean, 1 the sum of speedups"},
    {"restart_penalty_seconds", tessel::ArgType::number, "30",
     "the restart delay Pollux's objective charges a job whose allocation changes (set it as the "
     "elasticity plugin's restart_seconds)"},
};

// Pollux adds this to every scaled speedup before the power mean, so that a
// job with no GPUs costs a finite amount.
constexpr double kSpeedupFloor = 1e-3;

// What Pollux knows of a job, kept between rounds.
struct PolluxJob {
  int most_gpus_run = 0;  // its measurements reach this many GPUs
  int gpus_last_seen = 0;  // held at the previous allocation
  int allocations = 0;     // non-empty allocations it has had (restarts + 1)
  // Goodput on g GPUs on the fewest nodes, by g, and on the fair share; valid
  // while the job's progress stays in memo_stretch.
  tessel::pollux::RateStretch memo_stretch;
  std::vector<double> goodput_by_gpus;  // NaN: not computed yet
  std::vector<int> nodes_by_gpus;
  int memo_fair_gpus = 0;
  double memo_fair_goodput = 0;
};

class Pollux final : public tessel::AllocationPolicy {
 public:
  explicit Pollux(const tessel::PluginContext& context)
      : interval_(context.args().number("interval_seconds")),
        exponent_(context.args().number("mean_exponent")),
        restart_penalty_(context.args().number("restart_penalty_seconds")),
        state_(context.job_slot<PolluxJob>()) {
    if (!(interval_ > 0)) throw tessel::ArgumentError("interval_seconds", "must be a positive number of seconds");
    if (!(restart_penalty_ >= 0)) throw tessel::ArgumentError("restart_penalty_seconds", "must be >= 0");
    if (!std::isfinite(exponent_)) throw tessel::ArgumentError("mean_exponent", "must be a finite number");
  }

  // Speedups change as jobs progress and age.
  bool time_sensitive() const override { return true; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const auto active = view.active();
    for (const tessel::JobState* job : active) observe(*job);
    const bool due = view.now() >= next_optimization_ - 1e-9;
    if (!due) return keep_until_next(view);
    next_optimization_ = view.now() + interval_;

    const tessel::ClusterState& cluster = view.cluster();
    const int gpus = cluster.total_gpus();
    const int fair = tessel::pollux::fair_share_gpus(gpus, active.size());
    int up_nodes = 0;
    for (const tessel::Node& node : cluster.nodes()) up_nodes += node.up;
    const double scale = gpus > 0 ? static_cast<double>(up_nodes) / gpus : 0;

    // Pollux's job order (attained service, then arrival) settles ties.
    order_.assign(active.begin(), active.end());
    std::stable_sort(order_.begin(), order_.end(), [](const tessel::JobState* a, const tessel::JobState* b) {
      return a->gpu_seconds < b->gpu_seconds;
    });
    choices_.clear();
    for (const tessel::JobState* job : order_) choices_.push_back(options(view, *job, fair, scale, gpus));
    const std::vector<int> picked = best_allocation(gpus);
    return plan(view, picked, fair, gpus);
  }

 private:
  // One allowed GPU count for a job and what it is worth.
  struct Option {
    int gpus;
    double speedup;  // SPEEDUP x RESTART
    double utility;  // its term in the objective
  };
  struct Choices {
    const tessel::JobState* job;
    std::vector<Option> options;  // ascending GPUs, 0 first
    int cap;                      // the most it may get
  };

  // Updates what Pollux has seen of the job since the last round.
  void observe(const tessel::JobState& job) const {
    PolluxJob& state = state_(job.slots);
    const int held = job.running() ? job.allocation.gpu_count() : 0;
    if (held > 0 && held != state.gpus_last_seen) ++state.allocations;
    state.gpus_last_seen = held;
    state.most_gpus_run = std::max(state.most_gpus_run, held);
  }

  double utility(double scaled_speedup) const {
    if (exponent_ == 0) return std::log(std::max(scaled_speedup, kSpeedupFloor));
    const double term = std::pow(scaled_speedup + kSpeedupFloor, exponent_);
    return exponent_ < 0 ? -term : term;
  }

  // The most GPUs the job may get now.
  static int cap_of(const tessel::SchedulerView& view, const tessel::JobState& job, const PolluxJob& state,
                    int cluster_gpus) {
    const tessel::JobSpec& spec = job.spec;
    if (!spec.elastic()) return spec.gpus <= cluster_gpus ? spec.gpus : 0;
    int cap = std::min({spec.max_gpus, cluster_gpus, std::max({2 * state.most_gpus_run, spec.min_gpus, 1})});
    while (cap > 0 && !tessel::pollux::can_use(view.throughput(), spec, cap)) --cap;
    return cap;
  }

  // Goodput on `gpus` GPUs on the fewest nodes, remembered until the job's rate may change.
  double goodput(const tessel::SchedulerView& view, const tessel::JobState& job, PolluxJob& state,
                 int gpus) const {
    const tessel::Shape shape = view.cluster().packed_shape(job.spec, gpus);
    const auto index = static_cast<std::size_t>(gpus);
    if (state.goodput_by_gpus.size() <= index) {
      state.goodput_by_gpus.resize(index + 1, NAN);
      state.nodes_by_gpus.resize(index + 1, 0);
    }
    if (std::isnan(state.goodput_by_gpus[index]) || state.nodes_by_gpus[index] != shape.nodes) {
      state.goodput_by_gpus[index] =
          tessel::pollux::best_configuration(view.throughput(), job.spec, shape, job.executed_work).rate;
      state.nodes_by_gpus[index] = shape.nodes;
    }
    return state.goodput_by_gpus[index];
  }

  // Forgets the remembered goodputs if the job's rate may have changed since.
  static void refresh_memo(const tessel::ThroughputModel& model, const tessel::JobState& job, PolluxJob& state) {
    if (state.memo_stretch.holds(model, job.spec, job.executed_work)) return;
    state.goodput_by_gpus.clear();
    state.nodes_by_gpus.clear();
    state.memo_fair_gpus = 0;
  }

  Choices options(const tessel::SchedulerView& view, const tessel::JobState& job, int fair, double scale,
                  int cluster_gpus) const {
    const tessel::ThroughputModel& model = view.throughput();
    PolluxJob& state = state_(job.slots);
    refresh_memo(model, job, state);
    Choices choices{&job, {}, cap_of(view, job, state, cluster_gpus)};
    const bool measured = state.most_gpus_run > 0;
    double base = 0;
    if (measured) {
      int fair_gpus = fair;
      while (fair_gpus > 1 && !tessel::pollux::can_use(model, job.spec, fair_gpus)) --fair_gpus;
      if (state.memo_fair_gpus != fair_gpus) {
        state.memo_fair_gpus = fair_gpus;
        state.memo_fair_goodput =
            tessel::pollux::best_configuration(
                model, job.spec, tessel::pollux::fair_share_shape(view.cluster(), job.spec, fair_gpus),
                job.executed_work)
                .rate;
      }
      base = state.memo_fair_goodput;
    }
    const int held = job.running() ? job.allocation.gpu_count() : 0;
    const double age = view.now() - job.spec.arrival;
    const int restarts = std::max(state.allocations - 1, 0);
    // With no penalty a move is free; otherwise a job that arrives on this
    // very tick (age 0) scores 0 anywhere new, as in Pollux, and starts at
    // the next optimization.
    const double restart_factor =
        restart_penalty_ == 0 ? 1.0 : std::max(age - restart_penalty_ * restarts, 0.0) / (age + restart_penalty_);
    const int smallest = job.spec.elastic() ? job.spec.min_gpus : job.spec.gpus;
    choices.options.push_back({0, 0, utility(0)});
    for (int g = smallest; g <= choices.cap; ++g) {
      double speedup = static_cast<double>(g) / fair;
      if (measured) {
        const double rate = g == held ? tessel::pollux::best_configuration(
                                            model, job.spec, view.cluster().shape_of(job.allocation),
                                            job.executed_work)
                                            .rate
                                      : goodput(view, job, state, g);
        speedup = base > 0 ? rate / base : 0;
      }
      if (g != held) speedup *= restart_factor;
      choices.options.push_back({g, speedup, utility(speedup * scale)});
    }
    return choices;
  }

  // The GPU count of each job in choices_ that maximizes the sum of their
  // utilities within `gpus` (tessel::allocation::CountKnapsack).
  std::vector<int> best_allocation(int gpus) {
    const auto options_of = [this](std::size_t j) -> const std::vector<Option>& { return choices_[j].options; };
    const std::vector<std::size_t>& best =
        knapsack_.solve(choices_.size(), gpus, options_of, [](const Option& option) { return option.utility; });
    std::vector<int> picked(choices_.size(), 0);
    for (std::size_t j = 0; j < choices_.size(); ++j) picked[j] = choices_[j].options[best[j]].gpus;
    return picked;
  }

  // Jobs that shrink first (they only free GPUs), then those that keep their
  // size, grow, start; jobs left without GPUs last, where the core preempts
  // first.
  tessel::AllocationPlan plan(const tessel::SchedulerView& view, const std::vector<int>& picked, int fair,
                              int gpus) const {
    enum Group { shrink, keep, grow, start, denied, groups };
    auto group_of = [&](std::size_t j) {
      const tessel::JobState& job = *choices_[j].job;
      const int held = job.running() ? job.allocation.gpu_count() : 0;
      if (picked[j] == 0) return denied;
      if (held == 0) return start;
      return picked[j] < held ? shrink : picked[j] == held ? keep : grow;
    };
    tessel::AllocationPlan plan;
    plan.ranked.reserve(choices_.size());
    for (int group = shrink; group < groups; ++group)
      for (std::size_t j = 0; j < choices_.size(); ++j) {
        if (group_of(j) != group) continue;
        const tessel::JobState& job = *choices_[j].job;
        if (picked[j] == 0) {
          plan.ranked.push_back(deny(job, denial(view, choices_[j], gpus)));
          continue;
        }
        tessel::Resources resources = job.spec.request();
        resources.gpus = picked[j];
        double speedup = 0;
        for (const Option& option : choices_[j].options)
          if (option.gpus == picked[j]) speedup = option.speedup;
        tessel::Reason reason;
        if (!job.spec.elastic())
          reason = tessel::Reason("rigid: its request of {} GPUs, speedup {} over a fair share of {} GPUs", picked[j],
                                  speedup, fair);
        else if (state_(job.slots).most_gpus_run == 0)
          reason = tessel::Reason("{} GPU to start with: Pollux grows a job to at most twice the GPUs it has run "
                                  "on (fair share: {} GPUs)",
                                  picked[j], fair);
        else
          reason = tessel::Reason("{} GPUs: speedup {} over a fair share of {} GPUs, in the split that maximizes "
                                  "the power mean (p = {}) of all jobs' speedups",
                                  picked[j], speedup, fair, exponent_);
        plan.ranked.push_back({job.spec.id, resources, reason});
      }
    return plan;
  }

  tessel::Reason denial(const tessel::SchedulerView& view, const Choices& choices, int gpus) const {
    const tessel::JobSpec& spec = choices.job->spec;
    if (choices.cap == 0 && !spec.elastic())
      return tessel::Reason("needs {} GPUs, the cluster has {} up", spec.gpus, gpus);
    if (choices.options.size() == 1)  // only "no GPUs": no count in [min_gpus, cap] it can train on
      return tessel::Reason("can use no GPU count from its minimum of {} up to {}: too few GPUs up, or its batch "
                            "sizes leave no micro-batch for that many",
                            spec.min_gpus, std::min(spec.max_gpus, gpus));
    return tessel::Reason("no GPUs until the next reallocation at {} s: the {} jobs' power mean of speedups "
                          "is higher with the cluster's {} GPUs elsewhere",
                          next_optimization_, view.active().size(), gpus);
  }

  // Between optimizations: running jobs keep their GPUs, the rest wait.
  tessel::AllocationPlan keep_until_next(const tessel::SchedulerView& view) const {
    tessel::AllocationPlan plan;
    for (const tessel::JobState* job : view.active())
      plan.ranked.push_back(job->running()
                                ? tessel::Grant{job->spec.id, job->held(),
                                                tessel::Reason("keeps its {} GPUs until the next reallocation "
                                                               "at {} s",
                                                               job->allocation.gpu_count(), next_optimization_)}
                                : deny(*job, tessel::Reason("waits for the next reallocation at {} s",
                                                            next_optimization_)));
    return plan;
  }

  double interval_;
  double exponent_;
  double restart_penalty_;
  tessel::Slot<PolluxJob> state_;
  double next_optimization_ = 0;
  // Reused across rounds.
  std::vector<const tessel::JobState*> order_;
  std::vector<Choices> choices_;
  tessel::allocation::CountKnapsack knapsack_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Pollux, allocation, "pollux", "1.0",
                        "Pollux (OSDI'21): every interval, the GPUs per job that maximize the power mean of "
                        "goodput speedups over a fair share, with its restart penalty",
                        kArgs)

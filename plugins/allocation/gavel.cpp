// gavel: heterogeneity-aware allocation, after Gavel (Narayanan et al.,
// "Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning
// Workloads", OSDI'20).
//
// Sources, in stanford-futuredata/gavel, scheduler/:
//   policies/max_min_fairness.py    MaxMinFairnessPolicyWithPerf
//   policies/finish_time_fairness.py FinishTimeFairnessPolicyWithPerf
//   policies/min_total_duration.py  MinTotalDurationPolicyWithPerf
//   policies/policy.py              the shared constraints (PolicyWithPacking:
//                                   the pairs' variables and constraints)
//   policies/max_min_fairness.py, finish_time_fairness.py,
//   min_total_duration.py           the `...WithPacking` variants
//   policies/max_min_fairness_water_filling.py  MaxMinFairnessWaterFilling-
//                                   PolicyWithPerf, ...WithPacking
//   policies/max_sum_throughput.py  ThroughputSumWithPerf, ThroughputNormalized-
//                                   ByCostSumWithPerf(SLOs), ...WithPackingSLOs
//   policies/proportional.py, policies/isolated.py   the reference shares
//   scheduler.py                    _update_priorities, _reset_time_run_so_far,
//                                   _schedule_jobs_on_workers_helper: rounds
//
// The allocation. X[j][t] is the fraction of time job j should spend on GPU
// type t, subject to
//   sum_t X[j][t] <= 1                   a job runs on one type at a time
//   sum_j gpus_j X[j][t] <= N_t          type t has N_t GPUs up
//   X >= 0, and X[j][t] = 0 where gpus_j > N_t (a job never mixes types).
// tput[j][t] is the throughput model's rate for the whole job on gpus_j
// GPUs of type t, packed on as few nodes as possible, and job j progresses
// at thr_j(X) = sum_t X[j][t] tput[j][t]. The argument `policy` chooses X
// (Gavel's get_policy names, less its `_perf`: every policy here is the
// heterogeneity-aware one; Gavel's agnostic variants are not offered):
// - max_min_fairness: Gavel's heterogeneity-aware LAS (its `_perf` policy).
//   Maximise z = min_j thr_j(X) gpus_j / (w_j prop_j): w_j is the job's
//   priority weight, prop_j = sum_t tput[j][t] N_t / N its throughput on an
//   equal share of every type (N GPUs in all).
// - max_min_fairness_water_filling: Gavel's WaterFillingAlgorithm, in
//   max_min_fairness's unit. Level by level: raise every job not yet fixed
//   by one amount c above its floor (the level it reached so far) while the
//   fixed jobs keep theirs, c as high as the LP allows; then fix the
//   bottlenecks, the jobs that cannot pass their floor by a relative 1e-4
//   (Gavel's slack) while every job keeps its floor. Stop when every job is
//   fixed or a level fixes none. The first level is max_min_fairness's z;
//   the later ones give the jobs it leaves unconstrained what the
//   bottlenecks cannot use.
// - max_sum_throughput: maximise sum_j thr_j(X), in the model's units.
//   Gavel's code computes a normalising scale (1 / sum_t tput[j][t]) and
//   leaves it unused, so neither is it used here.
//   _normalized_by_cost: each type's term over its cost per GPU
//   (`gpu_costs`). _SLOs: also thr_j(X) >= rem_j / (deadline_j - now) for
//   every job whose deadline is ahead; deadline_j = arrival_j +
//   `slo_factor` x (the job's total work / its fastest rate), fixed at its
//   first solve (Gavel: arrival + SLO x duration); if no X meets them all, they
//   are dropped, as Gavel solves again without them.
// - finish_time_fairness: minimise rho = max_j rho_j, where
//   rho_j = (t_j + rem_j / thr_j(X)) / (iso_time_j + rem_j / iso_j):
//   t_j is the time since arrival, rem_j the remaining work, iso_j the
//   throughput on the isolated share (N_t / n GPUs of each type among n
//   jobs, as a time fraction of gpus_j GPUs, scaled down to at most all of
//   the job's time), and iso_time_j the time the progress made so far would
//   have taken at the isolated throughputs of the solves it was made under.
// - min_total_duration (makespan): minimise T such that every job can
//   finish within T, thr_j(X) >= rem_j / T.
// - max_min_fairness_packed, finish_time_fairness_packed,
//   min_total_duration_packed, max_min_fairness_water_filling_packed,
//   max_sum_throughput_normalized_by_cost_packed_SLOs (the packed variants
//   Gavel offers): Gavel's space sharing. Beside X[j][t], every
//   two jobs a, b of equal GPU counts (both of whole GPUs) get X[ab][t], the
//   fraction of time they run together on the same gpus GPUs of type t, as
//   the job pairs Gavel's scheduler adds (_populate_job_combination_metadata)
//   and PolicyWithPacking's constraints:
//     sum_t (X[j][t] + sum_{pairs with j} X[jk][t]) <= 1
//     sum_j gpus_j X[j][t] + sum_pairs gpus X[ab][t] <= N_t (a pair once)
//   and thr_j(X) gains sum_t X[jk][t] tput_j(jk, t), the job's own rate in
//   the pair by the model's rate_colocated (gavel-table: the measured
//   [own, partner] pair). The policies' objectives are unchanged (a pair's
//   two rates both count in max_sum_throughput's sum, each over the type's
//   cost); prop_j and the isolated shares still come from jobs alone, as in
//   Gavel.
//   The LP holds the pairs by classes of jobs alike (gavel_pairs.hpp: the
//   same optimum, with a column per job, partner class and type instead of
//   per pair and type) and splits the classes' time into pairs after.
// For a fixed z, rho or T each is one LP: the constraints above plus one
// row per job, thr_j(X) >= its target. So each policy searches over its
// level, re-solving the same LP with new row bounds from the last basis:
// - z by bisection between 0 and the least of the jobs' fastest types, to
//   a relative 1e-9. Gavel's LP makes z a variable instead; with z in every
//   job's row, GLPK takes about three times as long on 1,000 jobs.
//   Water filling bisects each level's c alike, from the floors.
// - rho by bisection between max_j t_j / D_j (D_j its denominator), which
//   nothing reaches, and the level of the isolated shares, to a relative
//   1e-9. Gavel gives this convex program to cvxpy.
// - T as Gavel searches it: bisection over [100 s, 10^6 s] until the
//   bracket is within 5%, widened tenfold while nothing in it is feasible;
//   X at the last feasible T is used. Each step's answer is read off the
//   shortest feasible T, found once (T in every job's row, as 1/T
//   maximised), and the LP is solved again only at the T the search ends
//   with: probing each step costs about five solves, most of them on
//   infeasible programs, GLPK's slowest.
// The LP is solved again only when the active jobs or the GPUs up per type
// change; its X is kept in each job's slot.
//
// The rounds (gavel_rounds.hpp, shared with `gandiva`). Each round, for
// each type, jobs are ranked by priority
// X[j][t] / rounds received on t since the last solve, ties broken by the
// rounds owed on t (the deficit), then by X[j][t], then by arrival. Walking
// the types fastest first and each type's ranking, a job is picked for the
// first type that still has GPUs for it (a job with no share there too:
// spare GPUs are not left idle); picked jobs are granted that type, in
// picking order, and the others wait this round. Every solve restarts each
// job's count at half a round and adds what the job was owed since the
// previous solve, X x rounds elapsed - rounds received, to its deficit.
// Gavel counts seconds; every round is equally long, so rounds are time.
// With a _packed policy a pair with a share on t is an entry of t's
// ranking too, with its own rounds and deficit (Gavel's per-pair
// _job_time_so_far and _deficits); a pair is picked when neither job is
// picked yet and t has its GPUs left, and granted as two grants: the first
// job, then the second sharing its GPUs (Grant::share_with), so the core
// places the pair on the same GPUs and the simulator runs each at its
// co-located rate.
//
// Simplifications:
// - Space sharing: pairs only (Gavel's too). Pairs that no type can run
//   (a co-located rate of 0 on every type both use; Gavel measured 0 for
//   every multi-GPU pair) are left out of the LP, where they could get no
//   time. A pair runs only on a type where the last solve gave it a share
//   (Gavel may hand spare workers to pairs with none). Which two jobs of
//   two classes share is the split's choice (gavel_pairs.hpp), one of the
//   many X of the same optimum, as ECOS's is for Gavel.
// - Gavel's simulator solves again at most once per 1920 s
//   (`minimum_time_between_allocation_resets`); here every change of the
//   job set or of the GPUs up solves again, unless
//   `min_seconds_between_allocations` is set (allocation_throttle.hpp).
//   Between solves a job that arrived meanwhile has no share: it runs only
//   on GPUs that no job with a share there takes (Gavel does not run it).
// - Types are walked fastest first, as Gavel's hard-coded v100, p100, k80
//   are: by the mean throughput there, relative to their fastest type, of
//   the jobs that can run there.
// - A job that is not picked is not stopped outright: like any job left
//   out of a plan, it keeps its GPUs until a picked job needs them.
// - A job needing more GPUs than any type has up waits, with the reason.
// - An elastic job is planned at the GPU count it asked for.
// - finish_time_fairness ignores priority weights, as Gavel does.
// - Water filling's bottlenecks: Gavel finds them with one MILP (the most
//   jobs raised at once, GLPK_MI); here one LP per job not yet fixed asks
//   whether that job alone can pass its floor. The set is the same: the
//   programs are convex, so jobs that can each be raised can all be at
//   once. Gavel's slack is relative 1e-4 plus 1e-5 in its unit (throughput
//   over the equal share); here plus 1e-9 in max_min_fairness's unit.
//   Gavel's priority_reweighting_policies (entity weights) are not offered:
//   a job's weight is its priority, as in max_min_fairness.
// - SLOs: Gavel draws each job's factor, 1.2, 2 or 10 at about a third
//   each, and its duration comes from the trace; here one `slo_factor` for
//   every job, over the job's work at its fastest rate alone.
// - Costs: `gpu_costs` are fixed; Gavel's simulator may follow spot prices
//   over time (_update_per_worker_type_prices).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/lp.hpp>

#include "allocation_throttle.hpp"
#include "gavel_pairs.hpp"
#include "gavel_rounds.hpp"

namespace {

enum class Policy {
  max_min_fairness,
  finish_time_fairness,
  min_total_duration,
  max_min_fairness_water_filling,
  max_sum_throughput,
};

// A `policy` value: Gavel's policy, with or without pairs (`_packed`), per
// GPU type's cost and with SLOs (max_sum_throughput's variants).
struct PolicyName {
  std::string_view name;
  Policy policy;
  bool packed = false, by_cost = false, slos = false;
};

// Gavel's get_policy names, less its `_perf` (every policy here is
// heterogeneity-aware).
constexpr PolicyName kPolicies[] = {
    {"max_min_fairness", Policy::max_min_fairness},
    {"max_min_fairness_packed", Policy::max_min_fairness, true},
    {"finish_time_fairness", Policy::finish_time_fairness},
    {"finish_time_fairness_packed", Policy::finish_time_fairness, true},
    {"min_total_duration", Policy::min_total_duration},
    {"min_total_duration_packed", Policy::min_total_duration, true},
    {"max_min_fairness_water_filling", Policy::max_min_fairness_water_filling},
    {"max_min_fairness_water_filling_packed", Policy::max_min_fairness_water_filling, true},
    {"max_sum_throughput", Policy::max_sum_throughput},
    {"max_sum_throughput_normalized_by_cost", Policy::max_sum_throughput, false, true},
    {"max_sum_throughput_normalized_by_cost_SLOs", Policy::max_sum_throughput, false, true, true},
    {"max_sum_throughput_normalized_by_cost_packed_SLOs", Policy::max_sum_throughput, true, true, true},
};

constexpr tessel::ArgSpec kArgs[] = {
    {"policy", tessel::ArgType::string, "\"max_min_fairness\"",
     "what the time shares optimise: the least normalised throughput (max_min_fairness), then the next "
     "least, level by level (max_min_fairness_water_filling), the worst finish-time ratio to an isolated "
     "share (finish_time_fairness), the time until every job is done (min_total_duration), each also "
     "_packed (pairs of jobs share GPUs); or the throughputs' sum (max_sum_throughput, "
     "max_sum_throughput_normalized_by_cost, its _SLOs and _packed_SLOs)",
     "max_min_fairness|max_min_fairness_packed|finish_time_fairness|finish_time_fairness_packed|"
     "min_total_duration|min_total_duration_packed|max_min_fairness_water_filling|"
     "max_min_fairness_water_filling_packed|max_sum_throughput|max_sum_throughput_normalized_by_cost|"
     "max_sum_throughput_normalized_by_cost_SLOs|max_sum_throughput_normalized_by_cost_packed_SLOs"},
    {"min_seconds_between_allocations", tessel::ArgType::number, "0",
     "solve again only this long after the last solve (the first change after a solve at time 0 at once), as "
     "Gavel's simulator does (1920); 0: at every change of the jobs or the GPUs up"},
    {"gpu_costs", tessel::ArgType::number_table, "{}",
     "the _normalized_by_cost policies (only): each GPU type's cost per GPU and second, by type name, every "
     "type of the cluster named (Gavel: the instance's price)",
     tessel::kClusterGpuTypes},
    {"slo_factor", tessel::ArgType::number, "0",
     "the _SLOs policies (only, and required there): each job's deadline is its arrival plus this many times "
     "its duration alone on its fastest type (Gavel draws 1.2, 2 or 10 per job)"},
};

// The loader has checked `policy` against the declared choices.
const PolicyName& policy_named(const std::string& name) {
  for (const PolicyName& known : kPolicies)
    if (known.name == name) return known;
  throw std::logic_error("gavel: policy '" + name + "' is among the choices but not in kPolicies");
}

std::string decimal(double value) { return tessel_plugins::GavelRounds::decimal(value); }

// finish_time_fairness: Gavel's _cumulative_isolated_time for each job and
// what it is updated from. (Each job's shares and rounds: GavelRounds.)
struct JobRecord {
  double isolated_seconds = 0;
  double isolated_rate = 0;
  double remaining_at_solve = -1;  // negative: in no solve yet
  double deadline = -1;            // the _SLOs policies; negative: not set yet
};

// A job the LP plans for.
struct Planned {
  const tessel::JobState* job;
  int gpus;
  std::vector<double> rate;  // by type; 0 where the job cannot run
};

using Shares = std::vector<std::vector<double>>;  // [job][type]
using tessel_plugins::JobPairShares;
using tessel_plugins::PairClasses;

// The LP behind every policy: X with its constraints, and one row per job
// asking for a least throughput, measured in a unit the policy chooses
// (`unit[j][t]` per unit of X[j][t]). Policies search over a target and ask,
// step by step, whether every job can reach its part of it; only the rows'
// lower bounds change, so each step resumes from the previous basis.
class TargetProgram {
 public:
  // `pairs` (the `_packed` policies) add Gavel's PolicyWithPacking pairs, by
  // classes (gavel_pairs.hpp): in both jobs' time and target rows (each at
  // its rate in the pair times `pair_scale[j]`), counted once against the
  // type's GPUs. `type_weight`, if given, makes the program maximise every
  // job's throughput (alone and in pairs) on type t times type_weight[t],
  // summed (max_sum_throughput); otherwise it maximises nothing.
  TargetProgram(const std::string& name, const std::vector<Planned>& jobs, const std::vector<int>& capacity,
                const Shares& unit, const PairClasses& pairs = {}, const std::vector<double>& pair_scale = {},
                const std::vector<double>& type_weight = {})
      : program_name_(name),
        program_(name, tessel::lp::Direction::maximize),
        column_(jobs.size(), std::vector<int>(capacity.size(), -1)),
        target_row_(jobs.size(), -1) {
    std::vector<int> time_row_of(jobs.size());
    std::vector<int> type_row(capacity.size());
    for (std::size_t t = 0; t < capacity.size(); ++t) type_row[t] = program_.add_row(tessel::lp::Bounds::at_most(capacity[t]));
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const int time_row = time_row_of[j] = program_.add_row(tessel::lp::Bounds::at_most(1));
      target_row_[j] = program_.add_row(tessel::lp::Bounds::none());
      int fastest = -1;
      for (std::size_t t = 0; t < capacity.size(); ++t) {
        if (jobs[j].rate[t] <= 0) continue;
        const int x = program_.add_column(tessel::lp::Bounds::between(0, 1),
                                          type_weight.empty() ? 0.0 : jobs[j].rate[t] * type_weight[t]);
        column_[j][t] = x;
        program_.add_term(time_row, x, 1);
        program_.add_term(type_row[t], x, jobs[j].gpus);
        program_.add_term(target_row_[j], x, unit[j][t]);
        if (fastest < 0 || unit[j][t] > unit[j][fastest]) fastest = static_cast<int>(t);
      }
      // Start each job on its fastest type: the first solve then only
      // moves the jobs that do not fit there, instead of every job.
      if (fastest >= 0 && unit[j][fastest] > 0) program_.start_with_basic(column_[j][fastest], target_row_[j]);
    }
    if (!pairs.pairings.empty())
      pair_columns_.emplace(program_, pairs, time_row_of, target_row_, type_row, pair_scale, type_weight);
  }

  // Can every job j reach a throughput of target[j] units at once?
  // A target of 0 or less asks nothing.
  bool reaches(const std::vector<double>& target) {
    for (std::size_t j = 0; j < target_row_.size(); ++j)
      program_.set_row_bounds(target_row_[j], target[j] > 0 ? tessel::lp::Bounds::at_least(target[j]) : tessel::lp::Bounds::none());
    return program_.solve() == tessel::lp::Outcome::optimal;
  }

  // The highest level s such that every job j with `asks[j]` reaches a
  // throughput of s units at once (infinity when no job asks), in one
  // solve: a column s in every asking job's row, maximised. Then
  // fix_level(s) solves again, from that basis, at a level at most that high.
  double highest_level(const std::vector<char>& asks) {
    level_ = program_.add_column(tessel::lp::Bounds::at_least(0), 1);
    for (std::size_t j = 0; j < target_row_.size(); ++j) {
      program_.set_row_bounds(target_row_[j], asks[j] ? tessel::lp::Bounds::at_least(0) : tessel::lp::Bounds::none());
      if (asks[j]) program_.add_term(target_row_[j], level_, -1);
    }
    switch (program_.solve()) {
      case tessel::lp::Outcome::optimal: return program_.value(level_);
      case tessel::lp::Outcome::unbounded: return std::numeric_limits<double>::infinity();
      case tessel::lp::Outcome::infeasible: break;
    }
    throw tessel::lp::SolverError(program_name_ + ": giving nothing is infeasible");
  }
  bool fix_level(double level) {
    program_.set_column_bounds(level_, tessel::lp::Bounds::exactly(level));
    return program_.solve() == tessel::lp::Outcome::optimal;
  }

  // The objective's value at the last solve (type_weight's sum).
  double objective() const { return program_.objective(); }

  // X of the last solve that reached its targets. The searches stop a hair
  // short of the optimum and the simplex leaves rounding noise
  // (0.25000000000000006); shares are rounded to 1e-6 so that equal shares
  // rank as ties in the rounds.
  Shares shares() const {
    Shares x(column_.size(), std::vector<double>(column_.empty() ? 0 : column_[0].size(), 0.0));
    for (std::size_t j = 0; j < column_.size(); ++j)
      for (std::size_t t = 0; t < column_[j].size(); ++t)
        if (column_[j][t] >= 0)
          x[j][t] = std::clamp(std::round(program_.value(column_[j][t]) * 1e6) / 1e6, 0.0, 1.0) + 0.0;  // + 0.0: the solver's -0 reads 0
    return x;
  }

  // The pairs' X of the same solve, rounded alike: the pairs with a share.
  std::vector<JobPairShares> pair_shares() const {
    return pair_columns_ ? pair_columns_->shares(program_) : std::vector<JobPairShares>{};
  }

 private:
  std::string program_name_;
  tessel::lp::LinearProgram program_;
  int level_ = -1;  // highest_level's column
  std::vector<std::vector<int>> column_;  // [job][type], -1 where the job cannot run
  std::vector<int> target_row_;
  std::optional<tessel_plugins::PairColumns> pair_columns_;
};

// Bisects a level between `reachable` and `unreachable` (either may be the
// larger) until they are within `tolerance` of each other, relatively (or
// for 100 steps, when `reachable` is 0 and stays there), and
// returns X at the last reachable level, which is left in `reachable`.
// Empty if even `reachable` turns out unreachable.
// `best_pairs`, if given, receives the pairs' X at that level.
template <class TargetsAt>
Shares bisect(TargetProgram& program, double& reachable, double unreachable, double tolerance,
              TargetsAt targets_at, std::vector<JobPairShares>* best_pairs = nullptr) {
  Shares best;
  auto keep = [&] {
    best = program.shares();
    if (best_pairs != nullptr) *best_pairs = program.pair_shares();
  };
  for (int step = 0; step < 100 && std::abs(unreachable - reachable) > tolerance * std::abs(reachable); ++step) {
    const double middle = (reachable + unreachable) / 2;
    if (program.reaches(targets_at(middle))) {
      reachable = middle;
      keep();
    } else {
      unreachable = middle;
    }
  }
  if (best.empty() && program.reaches(targets_at(reachable))) keep();
  return best;
}

double throughput(const Planned& job, const std::vector<double>& x) {
  double sum = 0;
  for (std::size_t t = 0; t < x.size(); ++t) sum += x[t] * job.rate[t];
  return sum;
}

// The isolated share (policies/isolated.py): N_t / n GPUs of each type as a
// time fraction of the job's GPUs, scaled down so that it sums to at most 1.
std::vector<double> isolated_share(const Planned& job, const std::vector<int>& capacity, std::size_t jobs) {
  std::vector<double> x(capacity.size());
  double sum = 0;
  for (std::size_t t = 0; t < capacity.size(); ++t) sum += x[t] = capacity[t] / double(jobs) / job.gpus;
  for (double& share : x) share /= std::max(sum, 1.0);
  return x;
}

class Gavel final : public tessel::AllocationPolicy {
 public:
  explicit Gavel(const tessel::PluginContext& context)
      : policy_(policy_named(context.args().string("policy"))),
        policy_name_(context.args().string("policy")),
        packed_(policy_.packed),
        gpu_costs_(context.args().number_table("gpu_costs")),
        slo_factor_(context.args().number("slo_factor")),
        record_(context.job_slot<JobRecord>()),
        rounds_(context),
        throttle_(context.args().number("min_seconds_between_allocations"), "min_seconds_between_allocations") {
    // Gavel's policies without costs or SLOs take none: a cost or factor
    // given to them would be ignored, so it is refused.
    if (policy_.by_cost && gpu_costs_.empty())
      throw tessel::ArgumentError("gpu_costs", "'" + policy_name_ + "' needs each GPU type's cost, as { v100 = 2.48, ... }");
    if (!policy_.by_cost && !gpu_costs_.empty())
      throw tessel::ArgumentError("gpu_costs", "applies only to the _normalized_by_cost policies, not '" + policy_name_ + "'");
    for (const auto& [type, cost] : gpu_costs_)
      if (!(cost > 0) || !std::isfinite(cost))
        throw tessel::ArgumentError("gpu_costs", "the cost of '" + type + "' must be positive, found " + decimal(cost));
    if (policy_.slos && !(slo_factor_ > 0 && std::isfinite(slo_factor_)))
      throw tessel::ArgumentError("slo_factor", "'" + policy_name_ + "' needs a positive slo_factor, found " + decimal(slo_factor_));
    if (!policy_.slos && slo_factor_ != 0)
      throw tessel::ArgumentError("slo_factor", "applies only to the _SLOs policies, not '" + policy_name_ + "'");
  }

  bool time_sensitive() const override { return true; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    if (packed_ && view.throughput().max_colocated() < 2)
      throw tessel::ArgumentError("policy", "'" + policy_name_ + "' pairs jobs on shared GPUs, but throughput model '" +
                                                std::string(view.throughput().name()) +
                                                "' has no co-location throughputs (gavel-table has them)");
    return rounds_.round(view, throttle_, false, "solved last at",
                         [&](const std::vector<const tessel::JobState*>& plannable, const std::vector<int>& capacity) {
                           solve(view, plannable, capacity);
                         });
  }

 private:
  // The `_packed` policies' pairs, as Gavel's scheduler forms them
  // (_populate_job_combination_metadata): every two jobs of equal GPU
  // counts, priced on each type by the throughput model's co-located rates
  // on the job's packed shape. The LP takes them by classes
  // (gavel_pairs.hpp): jobs alike in every field a model prices by (the
  // profile, GPUs, batch size, size, CPUs, memory) and in their rates alone,
  // as Gavel's job type and scale factor; each two classes' rates come from
  // one job of each. Pairs that run nowhere (a rate of 0 on every type both
  // can use) are left out of the LP, where they could take no time.
  void find_pairs(const tessel::SchedulerView& view, const std::vector<Planned>& jobs) {
    const std::size_t types = view.cluster().gpu_types().size();
    const tessel::ThroughputModel& model = view.throughput();
    using Key = std::tuple<std::string, int, int, double, double, double, std::vector<double>>;
    std::map<Key, std::size_t> class_of;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const tessel::JobSpec& spec = jobs[j].job->spec;
      if (spec.gpu_milli != 1000) continue;
      const Key key{spec.model, jobs[j].gpus, spec.batch_size, spec.parameters, spec.cpus, spec.mem_gb, jobs[j].rate};
      const auto [found, added] = class_of.emplace(key, pairs_.members.size());
      if (added) pairs_.members.emplace_back();
      pairs_.members[found->second].push_back(j);
    }
    const std::size_t classes = pairs_.members.size();
    for (std::size_t a = 0; a < classes; ++a) {
      for (std::size_t b = a; b < classes; ++b) {
        if (a == b && pairs_.members[a].size() < 2) continue;
        const Planned& first = jobs[pairs_.members[a][0]];
        const Planned& second = jobs[pairs_.members[b][a == b ? 1 : 0]];
        if (second.gpus != first.gpus) continue;
        PairClasses::Pairing pairing{a, b, first.gpus, std::vector<double>(types, 0.0), std::vector<double>(types, 0.0)};
        bool runs = false;
        for (std::size_t t = 0; t < types; ++t) {
          if (first.rate[t] <= 0 || second.rate[t] <= 0) continue;
          const tessel::Shape shape =
              view.cluster().packed_shape(first.job->spec, pairing.gpus, view.cluster().gpu_types()[t]);
          const tessel::JobSpec* with_second[] = {&second.job->spec};
          const tessel::JobSpec* with_first[] = {&first.job->spec};
          pairing.a_rate[t] = model.rate_colocated(first.job->spec, with_second, shape);
          pairing.b_rate[t] = model.rate_colocated(second.job->spec, with_first, shape);
          // A pair whose rates, as fractions of each job's rate alone, add up
          // to 1 or less is no better than the two taking turns on those GPUs
          // (a time y side by side is matched by y times each fraction alone:
          // the same throughputs, no more GPU time, less of each job's time),
          // so leaving it out changes no optimum; about a fifth of Gavel's
          // measured single-GPU pairs are such.
          if (pairing.a_rate[t] / first.rate[t] + pairing.b_rate[t] / second.rate[t] <= 1)
            pairing.a_rate[t] = pairing.b_rate[t] = 0;
          runs = runs || pairs_.runs(pairing, t);
        }
        if (runs) pairs_.pairings.push_back(std::move(pairing));
      }
    }
  }

  void solve(const tessel::SchedulerView& view, const std::vector<const tessel::JobState*>& plannable,
             const std::vector<int>& capacity) {
    const std::size_t types = capacity.size();
    rounds_.reset(view);  // Gavel's reset: settle what each job was owed, restart the counts

    std::vector<Planned> jobs;
    jobs.reserve(plannable.size());
    for (const tessel::JobState* job : plannable) {
      Planned planned{job, job->spec.gpus, std::vector<double>(types, 0.0)};
      for (std::size_t t = 0; t < types; ++t)
        if (planned.gpus <= capacity[t])
          planned.rate[t] = view.throughput().rate(
              job->spec, view.cluster().packed_shape(job->spec, planned.gpus, view.cluster().gpu_types()[t]));
      jobs.push_back(std::move(planned));
    }
    pairs_ = {};
    if (packed_) find_pairs(view, jobs);

    // Gavel walks its types fastest first (v100, p100, k80).
    std::vector<std::vector<double>> rates;
    rates.reserve(jobs.size());
    for (const Planned& job : jobs) rates.push_back(job.rate);
    rounds_.order_types(rates, types);

    Shares x;
    pair_x_.clear();
    if (!jobs.empty()) {
      switch (policy_.policy) {
        case Policy::max_min_fairness: x = max_min_fairness(jobs, capacity); break;
        case Policy::max_min_fairness_water_filling: x = water_filling(jobs, capacity); break;
        case Policy::max_sum_throughput: x = max_sum_throughput(view, jobs, capacity); break;
        case Policy::finish_time_fairness: x = finish_time_fairness(view, jobs, capacity); break;
        case Policy::min_total_duration: x = min_total_duration(jobs, capacity); break;
      }
    }

    rounds_.describe(policy_name_, summary_);
    for (const JobPairShares& shares : pair_x_) {
      // Keyed (smaller id, larger id), as the rounds key every pair.
      const tessel::JobId first = jobs[shares.first].job->spec.id, second = jobs[shares.second].job->spec.id;
      rounds_.set_pair({std::min(first, second), std::max(first, second)}, shares.share, types);
    }
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      std::vector<char> runs_on(types);
      for (std::size_t t = 0; t < types; ++t) runs_on[t] = jobs[j].rate[t] > 0;
      rounds_.set_job(view, *jobs[j].job, x[j], runs_on);
    }

    rounds_.allocated_at(view, plannable, capacity);
  }

  // Gavel's LP maximises z subject to every job's normalised throughput
  // being at least z. With z a variable in every job's row, GLPK's simplex
  // takes about three times as long on 1,000 jobs as this search over z,
  // which reaches the same optimum to a relative 1e-9.
  // max_min_fairness's unit: job j's throughput times gpus_j / (w_j prop_j)
  // (`unit`, by type; `scale`, per unit of rate in a pair), and the most
  // each job can reach, all of its time on its fastest type or pair.
  struct Normalised {
    Shares unit;
    std::vector<double> scale, fastest_of;
  };
  Normalised normalised(const std::vector<Planned>& jobs, const std::vector<int>& capacity) const {
    double total = 0;
    for (int gpus : capacity) total += gpus;
    Shares unit(jobs.size(), std::vector<double>(capacity.size(), 0.0));
    // No job passes the level of all of its time on its fastest type (or pair).
    std::vector<double> scale(jobs.size()), fastest_of(jobs.size());
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      double equal_share = 0;  // prop_j
      for (std::size_t t = 0; t < capacity.size(); ++t) equal_share += jobs[j].rate[t] * capacity[t] / total;
      const double weight = jobs[j].job->spec.priority > 0 ? jobs[j].job->spec.priority : 1;
      double fastest = 0;
      for (std::size_t t = 0; t < capacity.size(); ++t) {
        unit[j][t] = jobs[j].rate[t] * jobs[j].gpus / (weight * equal_share);
        fastest = std::max(fastest, unit[j][t]);
      }
      scale[j] = jobs[j].gpus / (weight * equal_share);
      fastest_of[j] = fastest;
    }
    for (const PairClasses::Pairing& pairing : pairs_.pairings)
      for (std::size_t t = 0; t < capacity.size(); ++t) {
        if (!pairs_.runs(pairing, t)) continue;
        for (std::size_t j : pairs_.members[pairing.a])
          fastest_of[j] = std::max(fastest_of[j], pairing.a_rate[t] * scale[j]);
        for (std::size_t j : pairs_.members[pairing.b])
          fastest_of[j] = std::max(fastest_of[j], pairing.b_rate[t] * scale[j]);
      }
    return {std::move(unit), std::move(scale), std::move(fastest_of)};
  }

  Shares max_min_fairness(const std::vector<Planned>& jobs, const std::vector<int>& capacity) {
    const auto [unit, scale, fastest_of] = normalised(jobs, capacity);
    const double ceiling = *std::min_element(fastest_of.begin(), fastest_of.end());
    TargetProgram program("gavel " + policy_name_, jobs, capacity, unit, pairs_, scale);
    auto level = [&](double z) { return std::vector<double>(jobs.size(), z); };
    // Tighter starting brackets (the isolated shares' level) cost more
    // pivots on 1,000 jobs, not fewer: the first step lands nearer the
    // optimum, where the first solve is hardest.
    double z = 0;  // giving nothing reaches it
    const Shares x = bisect(program, z, ceiling, 1e-9, level, &pair_x_);
    if (x.empty()) throw tessel::lp::SolverError("gavel " + policy_name_ + ": no allocation found, even giving nothing");
    summary_ = "; every job gets at least " + decimal(z) +
               " times its equal-share throughput, weighted by GPUs and priority)";
    return x;
  }

  // Gavel's WaterFillingAlgorithm (max_min_fairness_water_filling.py) in
  // max_min_fairness's unit: raise every job not yet fixed by the same
  // amount c above its floor (the level it reached so far), as far as the
  // fixed jobs keep theirs; then fix the bottlenecks, the jobs that cannot
  // pass their floor by a relative 1e-4 (Gavel's slack) while every other job
  // keeps its floor; repeat until every job is fixed or no job was fixed.
  // Gavel finds the bottlenecks by one MILP, the most jobs raised at once;
  // here one LP per job asks whether that job alone can be raised. The set
  // is the same: the feasible region is convex, so jobs that can each be
  // raised alone can all be raised at once (the mean of their programs).
  Shares water_filling(const std::vector<Planned>& jobs, const std::vector<int>& capacity) {
    const std::size_t n = jobs.size();
    const auto [unit, scale, fastest_of] = normalised(jobs, capacity);
    TargetProgram program("gavel " + policy_name_, jobs, capacity, unit, pairs_, scale);
    std::vector<double> floor(n, 0.0);
    std::vector<char> fixed(n, 0);
    Shares x;
    std::vector<double> levels;  // c's floors, lowest first
    for (;;) {
      double ceiling = std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < n; ++j)
        if (!fixed[j]) ceiling = std::min(ceiling, fastest_of[j] - floor[j]);
      auto raised = [&](double c) {
        std::vector<double> target(floor);
        for (std::size_t j = 0; j < n; ++j)
          if (!fixed[j]) target[j] += c;
        return target;
      };
      double c = 0;  // every job at its floor: reached by the last level's X
      std::vector<JobPairShares> pairs;
      Shares level_x = bisect(program, c, std::max(ceiling, 0.0), 1e-9, raised, &pairs);
      if (level_x.empty()) {
        if (x.empty()) throw tessel::lp::SolverError("gavel " + policy_name_ + ": no allocation found, even giving nothing");
        break;  // as Gavel keeps the last X when a solve fails
      }
      x = std::move(level_x);
      pair_x_ = std::move(pairs);
      for (std::size_t j = 0; j < n; ++j)
        if (!fixed[j]) floor[j] += c;
      bool fixed_any = false;
      std::vector<char> bottleneck(n, 0);
      for (std::size_t j = 0; j < n; ++j) {
        if (fixed[j]) continue;
        std::vector<double> target(floor);
        target[j] = floor[j] * (1 + 1e-4) + 1e-9;
        bottleneck[j] = !program.reaches(target);
      }
      for (std::size_t j = 0; j < n; ++j)
        if (bottleneck[j]) {
          fixed[j] = 1;
          fixed_any = true;
          if (levels.empty() || floor[j] > levels.back() * (1 + 1e-6)) levels.push_back(floor[j]);
        }
      if (!fixed_any || std::all_of(fixed.begin(), fixed.end(), [](char f) { return f != 0; })) break;
    }
    std::string text;
    for (double level : levels) text += (text.empty() ? "" : ", ") + decimal(level);
    summary_ = "; every job gets at least " + decimal(levels.empty() ? 0.0 : levels.front()) +
               " times its equal-share throughput, weighted by GPUs and priority; levels filled: " + text + ")";
    return x;
  }

  // Gavel's ThroughputNormalizedByCostSumWithPerfSLOs (and WithPackingSLOs,
  // max_sum_throughput.py): maximise the sum over jobs of each job's
  // throughput on each type (alone or in a pair) over that type's cost (1
  // without costs), in the model's units, not normalised (Gavel computes a
  // normalising scale and leaves it unused). With SLOs, every job's
  // throughput must reach its remaining work over the time to its deadline
  // (none once that has passed); if no X meets them all, they are dropped,
  // as in Gavel.
  Shares max_sum_throughput(const tessel::SchedulerView& view, const std::vector<Planned>& jobs,
                            const std::vector<int>& capacity) {
    const std::size_t n = jobs.size();
    const std::vector<std::string>& type_names = view.cluster().gpu_types();
    std::vector<double> type_weight(capacity.size(), 1.0);
    if (policy_.by_cost) {
      // The core refuses a simulated cluster's unknown type before the run
      // (kClusterGpuTypes); real nodes' cluster is known only as they join.
      std::string known;
      for (const std::string& type : type_names) known += (known.empty() ? "" : ", ") + type;
      for (const auto& [type, cost] : gpu_costs_)
        if (std::find(type_names.begin(), type_names.end(), type) == type_names.end())
          throw tessel::ArgumentError("gpu_costs", "names GPU type '" + type + "', which the cluster lacks (its types: " + known + ")");
      for (std::size_t t = 0; t < capacity.size(); ++t) {
        const auto cost = gpu_costs_.find(type_names[t]);
        if (cost == gpu_costs_.end())
          throw tessel::ArgumentError("gpu_costs", "has no cost for GPU type '" + type_names[t] + "' (the cluster's types: " + known + ")");
        type_weight[t] = 1 / cost->second;
      }
    }
    Shares unit(n, std::vector<double>(capacity.size(), 0.0));
    for (std::size_t j = 0; j < n; ++j) unit[j] = jobs[j].rate;
    TargetProgram program("gavel " + policy_name_, jobs, capacity, unit, pairs_, std::vector<double>(n, 1.0), type_weight);
    std::vector<double> slo(n, 0.0);
    int with_slo = 0;
    if (policy_.slos) {
      for (std::size_t j = 0; j < n; ++j) {
        JobRecord& record = record_(jobs[j].job->slots);
        if (record.deadline < 0) {  // Gavel's SLO: arrival + factor x the job's duration alone
          const double fastest = *std::max_element(jobs[j].rate.begin(), jobs[j].rate.end());
          record.deadline = jobs[j].job->spec.arrival + slo_factor_ * jobs[j].job->spec.total_work / fastest;
        }
        const double left = record.deadline - view.now();
        if (left > 0) slo[j] = std::max(0.0, jobs[j].job->remaining_work()) / left;
        with_slo += slo[j] > 0;
      }
    }
    const bool met = program.reaches(slo);
    if (!met && !program.reaches(std::vector<double>(n, 0.0)))
      throw tessel::lp::SolverError("gavel " + policy_name_ + ": no allocation found, even giving nothing");
    const Shares x = program.shares();
    pair_x_ = program.pair_shares();
    summary_ = std::string("; the throughputs") + (policy_.by_cost ? " per unit of GPU cost" : "") + " sum to " +
               decimal(program.objective());
    if (policy_.slos)
      summary_ += met ? "; the " + std::to_string(with_slo) + " deadlines ahead all met"
                      : "; the " + std::to_string(with_slo) + " deadlines ahead cannot all be met: ignored";
    summary_ += ")";
    return x;
  }

  Shares finish_time_fairness(const tessel::SchedulerView& view, const std::vector<Planned>& jobs,
                              const std::vector<int>& capacity) {
    const std::size_t n = jobs.size();
    std::vector<double> since_arrival(n), remaining(n), isolated_time(n), isolated_rate(n);
    Shares isolated(n), unit(n, std::vector<double>(capacity.size(), 0.0));
    for (std::size_t j = 0; j < n; ++j) {
      JobRecord& record = record_(jobs[j].job->slots);
      remaining[j] = std::max(0.0, jobs[j].job->remaining_work());
      if (record.remaining_at_solve >= 0 && record.isolated_rate > 0)
        record.isolated_seconds += (record.remaining_at_solve - remaining[j]) / record.isolated_rate;
      isolated[j] = isolated_share(jobs[j], capacity, n);
      isolated_rate[j] = throughput(jobs[j], isolated[j]);
      record.remaining_at_solve = remaining[j];
      record.isolated_rate = isolated_rate[j];
      since_arrival[j] = view.now() - jobs[j].job->spec.arrival;
      isolated_time[j] = record.isolated_seconds + remaining[j] / isolated_rate[j];
      for (std::size_t t = 0; t < capacity.size(); ++t)
        if (remaining[j] > 0) unit[j][t] = jobs[j].rate[t] / remaining[j];
    }
    // rho_j <= rho  <=>  thr_j / rem_j >= 1 / (rho D_j - t_j), for rho D_j > t_j.
    // The isolated shares reach rho_iso; no X reaches max_j t_j / D_j.
    double unreachable = 0, reachable = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (remaining[j] <= 0 || isolated_time[j] <= 0) continue;
      unreachable = std::max(unreachable, since_arrival[j] / isolated_time[j]);
      reachable = std::max(reachable, (since_arrival[j] + remaining[j] / isolated_rate[j]) / isolated_time[j]);
    }
    auto targets = [&](double rho) {
      std::vector<double> target(n, 0.0);
      for (std::size_t j = 0; j < n; ++j)
        if (remaining[j] > 0 && isolated_time[j] > 0) target[j] = 1 / (rho * isolated_time[j] - since_arrival[j]);
      return target;
    };
    Shares x;
    if (reachable > unreachable) {
      std::vector<double> scale(n, 0.0);
      for (std::size_t j = 0; j < n; ++j)
        if (remaining[j] > 0) scale[j] = 1 / remaining[j];
      TargetProgram program("gavel " + policy_name_, jobs, capacity, unit, pairs_, scale);
      x = bisect(program, reachable, unreachable, 1e-9, targets, &pair_x_);
    }
    if (x.empty()) {  // as Gavel falls back when its solver finds nothing
      x = isolated;
      pair_x_.clear();
    }
    summary_ = "; no job finishes later than " + decimal(reachable) + " times its time on an isolated share)";
    return x;
  }

  Shares min_total_duration(const std::vector<Planned>& jobs, const std::vector<int>& capacity) {
    const std::size_t n = jobs.size();
    Shares unit(n, std::vector<double>(capacity.size(), 0.0));
    std::vector<char> asks(n, 0);
    for (std::size_t j = 0; j < n; ++j) {
      const double remaining = jobs[j].job->remaining_work();
      asks[j] = remaining > 0;
      for (std::size_t t = 0; t < capacity.size(); ++t)
        if (asks[j]) unit[j][t] = jobs[j].rate[t] / remaining;
    }
    std::vector<double> scale(n, 0.0);
    for (std::size_t j = 0; j < n; ++j)
      if (asks[j]) scale[j] = 1 / jobs[j].job->remaining_work();
    TargetProgram program("gavel " + policy_name_, jobs, capacity, unit, pairs_, scale);
    // Gavel's search over T (bisection over [100 s, 10^6 s] to 5%, widened
    // tenfold while nothing in it is feasible), with each step's answer
    // read off the shortest feasible makespan, 1 / the highest common level,
    // found by one solve: probing each T by a solve costs as many solves,
    // most of them on infeasible programs, the slowest kind.
    const double highest = program.highest_level(asks);
    auto within = [&](double seconds) { return 1 / seconds <= highest; };
    double shortest = 100, longest = 1e6, widest = longest;
    bool found = false;
    while (!found) {
      while (1.05 * shortest < longest) {
        const double seconds = (shortest + longest) / 2;
        if (within(seconds)) {
          found = true;
          longest = seconds;
        } else {
          shortest = seconds;
        }
      }
      if (found) break;
      if (widest > 1e18) throw tessel::lp::SolverError("gavel min_total_duration: no makespan below 10^18 s is feasible");
      shortest = widest;
      longest = widest * 10;
      widest *= 10;
    }
    // X at the T the search ends with, as Gavel's (at the optimum, should
    // the solver find T's program infeasible by a hair).
    if (!program.fix_level(1 / longest) && !program.fix_level(highest))
      throw tessel::lp::SolverError("gavel " + policy_name_ + ": the highest level found is not feasible");
    const Shares best = program.shares();
    pair_x_ = program.pair_shares();
    summary_ = "; every job can finish within " + decimal(longest) + " s)";
    return best;
  }

  const PolicyName& policy_;
  std::string policy_name_;
  bool packed_;  // a `_packed` policy: pairs of jobs may share GPUs
  tessel::NumberTable gpu_costs_;  // by type name; the _normalized_by_cost policies only
  double slo_factor_;              // the _SLOs policies only
  PairClasses pairs_;                 // the last solve's candidate pairs, by classes of its jobs
  std::vector<JobPairShares> pair_x_;  // the pairs with an X in it (indices into its jobs)
  tessel::Slot<JobRecord> record_;
  tessel_plugins::GavelRounds rounds_;  // each job's and pair's shares, and the rounds that realise them
  std::string summary_;  // the last solve's objective, in words
  tessel_plugins::AllocationThrottle throttle_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Gavel, allocation, "gavel", "1.1",
                        "Gavel's heterogeneity-aware time shares per GPU type (LP, GLPK), realised in rounds",
                        kArgs)

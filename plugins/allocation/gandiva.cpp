// gandiva: time-slicing, packing and introspection, after Gandiva (Xiao et
// al., "Gandiva: Introspective Cluster Scheduling for Deep Learning",
// OSDI'18), as Gavel implements it for its baseline
// (stanford-futuredata/gavel, scheduler/policies/gandiva.py, GandivaPolicy,
// driven by scheduler.py's rounds like Gavel's own policies).
//
// The rule as implemented. An allocation gives every "combination" (a job
// alone, or two jobs packed on the same GPUs) the same time share of every
// GPU type, in proportion to the type's GPUs:
//   X[c][t] = N_t / m / gpus_c, scaled down so that sum_t X[c][t] <= 1,
// m combinations, N_t GPUs of type t up. It is computed again when the
// active jobs or the GPUs up change (at most every
// `min_seconds_between_allocations`), in three steps:
// 1. Introspection. A pair packed earlier is split when one of its jobs is
//    gone, or when its normalised throughput is below
//    `introspection_threshold`: the sum, over the types both jobs can run
//    on, of each job's rate in the pair over its rate alone (0 if the pair
//    cannot run together on one of them). Gavel's rule, with its threshold 1.
//    A split pair is never packed again. Besides the changes above, a pair
//    below the threshold that has run together (a round's trial, as Gandiva
//    measures a packing before undoing it) makes the next round allocate
//    again.
// 2. Packing, only while the cluster is oversubscribed (the active jobs ask
//    for more GPUs than are up): the jobs in no pair are drawn two at a time,
//    uniformly (one draw per such job, as Gavel's loop makes); a drawn pair
//    is packed when both ask for the same number of whole GPUs and the
//    throughput model gives it a positive rate on some type both can run on.
//    The co-location rates are the model's (ThroughputModel::rate_colocated:
//    gavel-table's measured [own, partner] pairs); a table that lacks a
//    drawn pair is an error naming the file and the pair. Pairs persist from
//    one allocation to the next until introspection splits them; while the
//    cluster is not oversubscribed they are kept but not used, and every job
//    is a combination of its own.
// 3. Time-slicing: the equal shares above, realised in rounds as Gavel's are
//    (gavel_rounds.hpp): each round every type runs the combinations
//    furthest below their share on it, so oversubscribed jobs take turns,
//    round-robin, and each job spends time on every type. A job not picked
//    is suspended (preempted) when a picked one needs its GPUs and resumes
//    when picked again; the simulator charges `[simulation]
//    preemption_overhead_seconds` for each (Gandiva suspends at a minibatch
//    boundary, where the job holds least GPU memory; Gavel's simulator
//    charges nothing).
//
// Migration. Gandiva moves jobs to free whole servers for jobs that need
// them (defragmentation: GPUs free but scattered, a job waiting for a
// locality-friendly placement), each move a checkpoint and restore. Here it
// is the placement's decision and the core's mechanism, not this plugin's:
// with `consolidated`'s `migrate = true` a picked job that one node could
// hold, and that the throughput model slows when spread, is not spread;
// the core frees running jobs ranked below it (this plugin's ranking: the
// jobs furthest above their share last), lowest first, until a node has
// room, preempts those on it, and places those of them picked this round
// again, on other GPUs of their type, in the same round: a migration,
// charged like a suspend and resume. A job that spreading does not slow
// (any job under the `linear` model) is spread at once: moving others would
// only cost them the restore. `best_fit` with `span_nodes = false` also
// moves jobs this way, but never spreads a job at all. Gavel's simulator
// reassigns every worker each round at no cost.
//
// Deterministic for a run's seed: the draws use tessel::Rng seeded with the
// plugin's seed (PluginContext::seed).
//
// Simplifications and differences from Gavel's GandivaPolicy:
// - Random draws come from tessel's generator, not Python's `random`, so
//   the pairs differ from Gavel's for any seed.
// - A drawn pair the model says cannot run together on any type (a rate of
//   0: it did not fit in memory; Gavel measured 0 for every multi-GPU pair)
//   is not packed, a failed draw like a pair of unequal GPU counts. Gavel
//   packs it, and its rounds never run it (a rate of 0) until the next
//   allocation's introspection splits it.
// - Introspection reads the throughput model's rates, as Gavel's simulator
//   reads its oracle table; Gandiva measures the jobs' minibatch times after
//   packing. With Gavel's threshold summed over the types, a pair is kept
//   unless it is far worse than time-slicing on average (the paper's rule
//   compares the pair's throughput with the jobs' time-sliced throughput).
// - Gandiva's packing decision also profiles GPU memory and utilisation;
//   here, as in Gavel, the pair's table entry stands for both.
// - Gandiva also grows jobs onto idle GPUs and shrinks them back, and keeps
//   servers for jobs of one GPU count (affinity); Gavel's baseline does
//   neither. `rules = "tiresias_simulator"` runs the affinity model of
//   Tiresias's simulator instead of all of the above (gandiva_node_sets.hpp
//   says what it does and where it comes from); it needs `packing = false`.
// - Migration acts only when a job is placed: a job already running spread
//   is not gathered onto one node when GPUs free up later, as Gandiva's
//   introspection also does. Any slowdown makes a move worth it; the
//   restore the moved jobs pay is not weighed against it.
// - An elastic job is planned at the GPU count it asked for; a job needing
//   more GPUs than any type has up waits, with the reason.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <tessel/tessel.hpp>

#include "allocation_throttle.hpp"
#include "gandiva_node_sets.hpp"
#include "gavel_rounds.hpp"

namespace {

constexpr tessel::ArgSpec kArgs[] = {
    {"packing", tessel::ArgType::boolean, "true",
     "pack two jobs on the same GPUs while the cluster is oversubscribed; false: time-slicing alone"},
    {"introspection_threshold", tessel::ArgType::number, "1",
     "split a pair whose normalised throughput (the sum, over the GPU types, of each job's rate in the pair "
     "over its rate alone) is below this; Gavel's 1; 0 splits only pairs that cannot run"},
    {"min_seconds_between_allocations", tessel::ArgType::number, "0",
     "allocate again only this long after the last allocation (the first change after one at time 0 at once), "
     "as Gavel's simulator does (1920); 0: at every change of the jobs or the GPUs up"},
    {"rules", tessel::ArgType::string, "\"gavel\"",
     "gavel: Gavel's GandivaPolicy (above); tiresias_simulator: Gandiva as Tiresias's simulator models it, "
     "node sets per GPU count rotating every minute (gandiva_node_sets.hpp; needs packing = false)",
     "gavel|tiresias_simulator"},
};

using tessel_plugins::GavelRounds;

class Gandiva final : public tessel::AllocationPolicy {
 public:
  explicit Gandiva(const tessel::PluginContext& context)
      : packing_(context.args().boolean("packing")),
        threshold_(context.args().number("introspection_threshold")),
        rng_(context.seed()),
        rounds_(context),
        throttle_(context.args().number("min_seconds_between_allocations"), "min_seconds_between_allocations"),
        tiresias_rules_(context.args().string("rules") == "tiresias_simulator") {
    if (!(threshold_ >= 0) || !std::isfinite(threshold_))
      throw tessel::ArgumentError("introspection_threshold", "must be a finite number >= 0, got " +
                                                                 GavelRounds::decimal(threshold_));
    // The simulator's memory packing packs nothing (every model's memory
    // use is 1) and it allocates every tick: Gavel's knobs would contradict it.
    if (tiresias_rules_ && packing_)
      throw tessel::ArgumentError("packing", "must be false with rules = \"tiresias_simulator\" (its memory "
                                             "packing runs one job per GPU)");
    if (tiresias_rules_ && context.args().number("min_seconds_between_allocations") != 0)
      throw tessel::ArgumentError("min_seconds_between_allocations",
                                  "must be 0 with rules = \"tiresias_simulator\" (it allocates every round)");
  }

  bool time_sensitive() const override { return true; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    if (tiresias_rules_) return allocate_node_sets(view);
    if (packing_ && view.throughput().max_colocated() < 2)
      throw tessel::ArgumentError("packing", "packs jobs on shared GPUs, but throughput model '" +
                                                 std::string(view.throughput().name()) +
                                                 "' has no co-location throughputs (gavel-table has them); "
                                                 "set packing = false for time-slicing alone");
    return rounds_.round(view, throttle_, introspection_due(view), "allocated last at",
                         [&](const std::vector<const tessel::JobState*>& plannable, const std::vector<int>& capacity) {
                           allocate_shares(view, plannable, capacity);
                         });
  }

 private:
  // rules = "tiresias_simulator": the node sets decide who runs; every other
  // active job is stopped, as the simulator's waiting jobs make no progress
  // even when GPUs are idle.
  tessel::AllocationPlan allocate_node_sets(const tessel::SchedulerView& view) {
    const tessel::ClusterState& cluster = view.cluster();
    if (!node_sets_) {
      const int per_node = cluster.nodes().empty() ? 0 : cluster.nodes().front().spec.gpus;
      for (const tessel::Node& node : cluster.nodes())
        if (node.spec.gpus != per_node)
          throw tessel::ArgumentError("rules", "\"tiresias_simulator\" needs nodes of one GPU count (its node sets "
                                               "are whole nodes), got nodes of " +
                                                   std::to_string(per_node) + " and " + std::to_string(node.spec.gpus));
      node_sets_.emplace(static_cast<int>(cluster.nodes().size()), per_node);
    }
    std::vector<tessel_plugins::GandivaNodeSets::Active> active;
    active.reserve(view.active().size());
    for (const tessel::JobState* job : view.active()) {
      if (job->spec.gpu_milli != 1000)
        throw tessel::ArgumentError("rules", "\"tiresias_simulator\" runs whole-GPU jobs; job " +
                                                 std::to_string(job->spec.id) + " asks for a share of a GPU");
      active.push_back({job->spec.id, job->spec.gpus});
    }
    const std::vector<tessel_plugins::GandivaNodeSets::Id> run = node_sets_->round(view.now(), active);
    std::unordered_set<tessel::JobId> running(run.begin(), run.end());
    tessel::AllocationPlan plan;
    plan.ranked.reserve(active.size());
    for (tessel::JobId id : run)
      plan.ranked.push_back({id, tessel::allocation::current_or_requested(view.job(id)),
                             tessel::Reason("its turn in its node set (Tiresias's simulator's Gandiva)")});
    for (const tessel::JobState* job : view.active())
      if (!running.contains(job->spec.id)) {
        tessel::Resources none = tessel::allocation::current_or_requested(*job);
        none.gpus = 0;
        plan.ranked.push_back({job->spec.id, none,
                               tessel::Reason("waits its turn in its node set, or for one (Tiresias's simulator's Gandiva)")});
      }
    return plan;
  }

  // A packed pair below the threshold whose jobs run together now: it had
  // its trial.
  bool introspection_due(const tessel::SchedulerView& view) const {
    for (const Packed& pair : pairs_) {
      if (pair.normalised >= threshold_) continue;
      const tessel::JobState& first = view.job(pair.jobs.first);
      if (!first.running() || !view.job(pair.jobs.second).running()) continue;
      const tessel::Gpu& gpu = view.cluster().gpu(first.allocation.gpus.front());
      if (std::find(gpu.jobs.begin(), gpu.jobs.end(), pair.jobs.second) != gpu.jobs.end()) return true;
    }
    return false;
  }

  // Each type's rates of `first` beside `second` and of `second` beside
  // `first`, on their packed shape; 0 where either cannot run alone
  // (`first_alone`, `second_alone`: their rates alone, by type).
  struct PairRates {
    std::vector<double> first, second;
  };
  static PairRates pair_rates(const tessel::SchedulerView& view, const tessel::JobState& first,
                              const tessel::JobState& second, const std::vector<double>& first_alone,
                              const std::vector<double>& second_alone) {
    const std::size_t types = first_alone.size();
    PairRates rates{std::vector<double>(types, 0.0), std::vector<double>(types, 0.0)};
    const tessel::JobSpec* with_second[] = {&second.spec};
    const tessel::JobSpec* with_first[] = {&first.spec};
    for (std::size_t t = 0; t < types; ++t) {
      if (first_alone[t] <= 0 || second_alone[t] <= 0) continue;
      const tessel::Shape shape =
          view.cluster().packed_shape(first.spec, first.spec.gpus, view.cluster().gpu_types()[t]);
      rates.first[t] = view.throughput().rate_colocated(first.spec, with_second, shape);
      rates.second[t] = view.throughput().rate_colocated(second.spec, with_first, shape);
    }
    return rates;
  }

  // Gavel's _get_normalized_throughput: over the types both jobs run on,
  // the sum of each job's rate in the pair over its rate alone; 0 if the
  // pair cannot run on one of them.
  static double normalised(const PairRates& pair, const std::vector<double>& first_alone,
                           const std::vector<double>& second_alone) {
    double sum = 0;
    for (std::size_t t = 0; t < first_alone.size(); ++t) {
      if (first_alone[t] <= 0 || second_alone[t] <= 0) continue;
      if (pair.first[t] <= 0 || pair.second[t] <= 0) return 0;
      sum += pair.first[t] / first_alone[t] + pair.second[t] / second_alone[t];
    }
    return sum;
  }

  static bool runs_somewhere(const PairRates& pair) {
    for (std::size_t t = 0; t < pair.first.size(); ++t)
      if (pair.first[t] > 0 && pair.second[t] > 0) return true;
    return false;
  }

  void allocate_shares(const tessel::SchedulerView& view, const std::vector<const tessel::JobState*>& plannable,
                       const std::vector<int>& capacity) {
    const std::size_t types = capacity.size();
    rounds_.reset(view);

    // Each job's rate alone on each type (0 where the type has too few GPUs).
    std::vector<std::vector<double>> alone(plannable.size(), std::vector<double>(types, 0.0));
    std::unordered_map<tessel::JobId, std::size_t> index;
    int requested = 0, available = 0;
    for (std::size_t i = 0; i < plannable.size(); ++i) {
      const tessel::JobState& job = *plannable[i];
      index.emplace(job.spec.id, i);
      requested += job.spec.gpus;
      for (std::size_t t = 0; t < types; ++t)
        if (job.spec.gpus <= capacity[t])
          alone[i][t] = view.throughput().rate(
              job.spec, view.cluster().packed_shape(job.spec, job.spec.gpus, view.cluster().gpu_types()[t]));
    }
    for (int gpus : capacity) available += gpus;
    rounds_.order_types(alone, types);

    // 1. Introspection: split the pairs that lost a job or slow their jobs down.
    std::vector<Packed> kept;
    int split = 0;
    for (Packed& pair : pairs_) {
      const auto first = index.find(pair.jobs.first), second = index.find(pair.jobs.second);
      if (first == index.end() || second == index.end()) continue;
      const std::size_t i = first->second, k = second->second;
      pair.normalised = normalised(pair_rates(view, *plannable[i], *plannable[k], alone[i], alone[k]), alone[i], alone[k]);
      if (pair.normalised < threshold_) {
        split_.insert(pair.jobs);
        ++split;
        continue;
      }
      kept.push_back(pair);
    }
    pairs_ = std::move(kept);

    const bool oversubscribed = requested > available;
    if (packing_ && oversubscribed) {
      // 2. Packing: draw pairs among the jobs in none, as Gavel's loop does:
      // as many draws as there are such jobs.
      std::vector<char> paired(plannable.size(), 0);
      for (const Packed& pair : pairs_) paired[index.at(pair.jobs.first)] = paired[index.at(pair.jobs.second)] = 1;
      std::vector<std::size_t> free;
      for (std::size_t i = 0; i < plannable.size(); ++i)
        if (!paired[i]) free.push_back(i);
      const std::size_t draws = free.size();
      for (std::size_t draw = 0; draw < draws && free.size() > 1; ++draw) {
        const std::size_t a = rng_.below(free.size());
        std::size_t b = rng_.below(free.size() - 1);
        if (b >= a) ++b;  // two distinct positions, uniformly
        const std::size_t i = std::min(free[a], free[b]), k = std::max(free[a], free[b]);
        const tessel::JobSpec& one = plannable[i]->spec;
        const tessel::JobSpec& other = plannable[k]->spec;
        if (one.gpus != other.gpus || one.gpu_milli != 1000 || other.gpu_milli != 1000) continue;
        const GavelRounds::JobPair jobs{std::min(one.id, other.id), std::max(one.id, other.id)};
        if (split_.contains(jobs)) continue;
        const PairRates rates = pair_rates(view, *plannable[i], *plannable[k], alone[i], alone[k]);
        if (!runs_somewhere(rates)) continue;
        pairs_.push_back({jobs, normalised(rates, alone[i], alone[k])});
        free.erase(free.begin() + static_cast<std::ptrdiff_t>(std::max(a, b)));
        free.erase(free.begin() + static_cast<std::ptrdiff_t>(std::min(a, b)));
      }
    }

    // 3. Equal shares for every combination: the pairs (when packing) and
    // the jobs in none.
    std::vector<char> in_pair(plannable.size(), 0);
    const bool use_pairs = packing_ && oversubscribed;
    if (use_pairs)
      for (const Packed& pair : pairs_) in_pair[index.at(pair.jobs.first)] = in_pair[index.at(pair.jobs.second)] = 1;
    const std::size_t combinations =
        plannable.size() - (use_pairs ? pairs_.size() : 0);  // each pair is one combination of two jobs
    auto equal_share = [&](int gpus) {
      std::vector<double> x(types, 0.0);
      double sum = 0;
      for (std::size_t t = 0; t < types; ++t)
        if (gpus <= capacity[t]) sum += x[t] = capacity[t] / double(combinations) / gpus;
      for (double& share : x) share = std::round(share / std::max(sum, 1.0) * 1e6) / 1e6;
      return x;
    };
    auto count = [](std::size_t n, const char* one, const char* many) { return std::to_string(n) + (n == 1 ? one : many); };
    std::string summary = combinations == 1 ? "; 1 job or pair has every type to itself"
                                            : "; " + std::to_string(combinations) + " jobs or pairs share every type equally";
    if (!oversubscribed) summary += "; the jobs fit, nothing is packed";
    else if (use_pairs) summary += "; " + count(pairs_.size(), " pair", " pairs") + " packed";
    if (split > 0) summary += ", " + count(static_cast<std::size_t>(split), " pair", " pairs") + " split by introspection";
    rounds_.describe("gandiva", summary + ")");
    if (use_pairs)
      for (const Packed& pair : pairs_)
        rounds_.set_pair(pair.jobs, equal_share(plannable[index.at(pair.jobs.first)]->spec.gpus), types);
    for (std::size_t i = 0; i < plannable.size(); ++i) {
      std::vector<char> runs_on(types);
      for (std::size_t t = 0; t < types; ++t) runs_on[t] = alone[i][t] > 0;
      rounds_.set_job(view, *plannable[i], in_pair[i] ? std::vector<double>(types, 0.0) : equal_share(plannable[i]->spec.gpus),
                      runs_on);
    }

    rounds_.allocated_at(view, plannable, capacity);
  }

  bool packing_;
  double threshold_;
  tessel::Rng rng_;
  GavelRounds rounds_;
  // A packed pair, (first, second) with first < second, and its normalised throughput.
  struct Packed {
    GavelRounds::JobPair jobs;
    double normalised;
  };
  std::vector<Packed> pairs_;
  std::set<GavelRounds::JobPair> split_;  // pairs introspection split: never packed again
  tessel_plugins::AllocationThrottle throttle_;
  bool tiresias_rules_;
  std::optional<tessel_plugins::GandivaNodeSets> node_sets_;  // sized at the first round
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Gandiva, allocation, "gandiva", "1.0",
                        "Gandiva's time-slicing, packing and introspection, as Gavel's baseline: equal time shares "
                        "of every GPU type, random pairs while oversubscribed, realised in rounds",
                        kArgs)

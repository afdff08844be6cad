// Gandiva as Tiresias's simulator models it (SymbioticLab/Tiresias,
// simulator/): the baseline against which Tiresias reports "up to 2x".
// `gandiva` runs it with `rules = "tiresias_simulator"`; this header holds
// the mechanism, free of the SDK's views so that tests can drive it by hand.
//
// The rule as implemented, function by function of the simulator:
// - Affinity classes (cluster.py, __init__'s node_g): jobs are grouped by
//   GPU count; a class owns "node sets", each ceil(g / G) whole nodes
//   (G GPUs per node) with room for int(nodes * G / g) jobs at once (its
//   capacity: 8 one-GPU jobs on an 8-GPU node, 2 four-GPU jobs, 1 job of 8
//   or more GPUs).
// - Placing a job (gandiva_placement): take the class's first set (the
//   list is kept stably sorted by load, `util`); if its load + 1 is below
//   its capacity (strictly), the job joins it; otherwise that set goes to
//   the back of the list and, if enough free nodes remain, the job opens a
//   set of its own; otherwise it joins the class's first set over capacity
//   (time-slicing); a class with no set and no free nodes leaves the job
//   pending. Every model's memory use (models.py, m_mem) is 1 in the
//   published code, so a set's load is its number of jobs, and the
//   "packing by memory" runs exactly `capacity` jobs at once: nothing is
//   packed beyond one job per GPU.
// - Pending jobs (run_sim.py, gandiva_sim_jobs) are tried again, in order,
//   only in a round in which a set emptied and released its nodes; the job
//   after each one started is skipped (it is removed from the list being
//   walked).
// - Growing and shrinking the classes (gandiva_node_set_adjust), every
//   round: a class's demand is its jobs (in sets) times its GPU count; its
//   target is floor(demand / all classes' demand * cluster GPUs), at most
//   its demand; the difference from the GPUs its sets hold, over its GPU
//   count and rounded up, is how many sets it gains from the free nodes
//   (gandiva_node_set_expand) or gives back (gandiva_node_set_shrink, always
//   keeping one). Shrinking gives the lightest sets' jobs, one by one, to
//   the then lightest set. Expanding deals every job of the class again,
//   one by one, to the then lightest set, except (the simulator's loop
//   variable `i` is reused by an inner loop) when the class's sets are one
//   node each and its last new set was opened: then the new sets stay empty
//   and are released at the next round. For one-GPU jobs the difference in
//   GPUs counts as sets of one node each (8 GPUs), so the class overshoots
//   and shrinks back; we keep that too.
// - Time-slicing (time_slicing_execute): in each set the first `capacity`
//   jobs of its list run; at a round on a whole minute (cur_time % 60 == 0)
//   a set with more jobs than that moves its running ones to the back,
//   those just finished included, before the finished ones leave. A set with
//   no jobs releases its nodes. Nothing is charged for a rotation or for a
//   move between sets (the simulator charges none).
//
// Simplifications, all documented where `gandiva` is:
// - The simulator steps every 10 s, or to the next arrival when that is
//   sooner, so its ticks fall on a whole minute only while they happen to be
//   in phase; here rounds are the core's (`round_seconds`, 10 s to match)
//   and a rotation happens at the first round in each new minute.
// - Its jobs finish at the tick after their duration is reached (up to
//   10 s late); here the core's completions.
// - Its node sets name nodes; here only their count is kept, and the jobs
//   to run are left to placement. Under the `linear` model, which node a job
//   runs on never changes its speed, so this changes no JCT.
// - A GPU count that is no class of the simulator (128 GPUs: it exits)
//   gets a class of its own, like every other count.
// - Nodes that fail are not taken out of the sets.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tessel_plugins {

class GandivaNodeSets {
 public:
  using Id = std::uint64_t;

  struct Set {
    int nodes = 0;
    int capacity = 0;  // jobs that run at once
    int load = 0;      // the simulator's `util`: its jobs, each of memory use 1
    std::vector<Id> jobs;
  };

  // A job the core still lists as active, in arrival order.
  struct Active {
    Id id;
    int gpus;
  };

  GandivaNodeSets(int nodes, int gpus_per_node) : free_nodes_(nodes), gpus_per_node_(gpus_per_node), gpus_(nodes * gpus_per_node) {}

  // One round at `now`: rotation, departures, arrivals, pending jobs, the
  // classes' growth; returns the jobs that run until the next round.
  std::vector<Id> round(double now, const std::vector<Active>& active) {
    const auto minute = static_cast<std::int64_t>(std::floor(now / 60));
    const bool rotate = minute > last_minute_;
    last_minute_ = minute;
    std::unordered_set<Id> live;
    live.reserve(active.size());
    for (const Active& job : active) live.insert(job.id);

    bool released = false;
    for (auto& [gpus, sets] : classes_) {
      for (Set& set : sets) {
        const auto running = static_cast<std::ptrdiff_t>(std::min<std::size_t>(set.jobs.size(), static_cast<std::size_t>(set.capacity)));
        if (rotate && set.jobs.size() > static_cast<std::size_t>(set.capacity))
          std::rotate(set.jobs.begin(), set.jobs.begin() + running, set.jobs.end());
        const auto gone = std::remove_if(set.jobs.begin(), set.jobs.end(), [&](Id id) { return !live.contains(id); });
        set.load -= static_cast<int>(set.jobs.end() - gone);
        set.jobs.erase(gone, set.jobs.end());
      }
      const auto empty = std::remove_if(sets.begin(), sets.end(), [&](const Set& set) {
        if (!set.jobs.empty()) return false;
        free_nodes_ += set.nodes;
        released = true;
        return true;
      });
      sets.erase(empty, sets.end());
    }
    std::erase_if(pending_, [&](const Active& job) { return !live.contains(job.id); });
    std::erase_if(known_, [&](Id id) { return !live.contains(id); });

    for (const Active& job : active)
      if (known_.insert(job.id).second && !place(job)) pending_.push_back(job);
    if (released)
      // The simulator removes a started job from the list it is walking, so
      // Python's iterator skips the job after it; so do we.
      for (std::size_t i = 0; i < pending_.size(); ++i)
        if (place(pending_[i])) pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    adjust();

    std::vector<Id> run;
    for (const auto& [gpus, sets] : classes_)
      for (const Set& set : sets)
        for (std::size_t i = 0; i < set.jobs.size() && i < static_cast<std::size_t>(set.capacity); ++i)
          run.push_back(set.jobs[i]);
    return run;
  }

  const std::map<int, std::vector<Set>>& classes() const { return classes_; }
  int free_nodes() const { return free_nodes_; }
  std::size_t pending() const { return pending_.size(); }

 private:
  int nodes_for(int gpus) const { return (gpus + gpus_per_node_ - 1) / gpus_per_node_; }

  Set open(int gpus) {
    Set set;
    set.nodes = nodes_for(gpus);
    set.capacity = set.nodes * gpus_per_node_ / gpus;
    free_nodes_ -= set.nodes;
    return set;
  }

  static void sort(std::vector<Set>& sets) {
    std::stable_sort(sets.begin(), sets.end(), [](const Set& a, const Set& b) { return a.load < b.load; });
  }

  static void add(Set& set, Id id) {
    set.jobs.push_back(id);
    ++set.load;
  }

  // gandiva_placement.
  bool place(const Active& job) {
    std::vector<Set>& sets = classes_[job.gpus];
    if (!sets.empty()) {
      Set first = std::move(sets.front());
      sets.erase(sets.begin());
      const bool joins = first.load + 1 < first.capacity;
      if (joins) add(first, job.id);
      sets.push_back(std::move(first));
      if (joins) {
        sort(sets);
        return true;
      }
    }
    if (nodes_for(job.gpus) <= free_nodes_) {
      Set set = open(job.gpus);
      add(set, job.id);
      sets.push_back(std::move(set));
      sort(sets);
      return true;
    }
    if (sets.empty()) return false;
    Set first = std::move(sets.front());
    sets.erase(sets.begin());
    add(first, job.id);
    sets.push_back(std::move(first));
    sort(sets);
    return true;
  }

  // Deal `jobs` one by one to the class's first (lightest) set.
  static void deal(std::vector<Set>& sets, const std::vector<Id>& jobs) {
    for (Id id : jobs) {
      add(sets.front(), id);
      sort(sets);
    }
  }

  // gandiva_node_set_adjust, with _expand and _shrink.
  void adjust() {
    std::int64_t total = 0;
    std::map<int, std::int64_t> demand, held;
    for (const auto& [gpus, sets] : classes_) {
      std::int64_t jobs = 0, nodes = 0;
      for (const Set& set : sets) {
        jobs += static_cast<std::int64_t>(set.jobs.size());
        nodes += set.nodes;
      }
      demand[gpus] = jobs * gpus;
      held[gpus] = nodes * gpus_per_node_;
      total += jobs * gpus;
    }
    if (total == 0) return;
    for (auto& [gpus, sets] : classes_) {
      if (demand[gpus] == 0) continue;
      const auto plan = static_cast<std::int64_t>(std::floor(double(demand[gpus]) / double(total) * double(gpus_)));
      const std::int64_t diff = std::min(plan, demand[gpus]) - held[gpus];
      if (diff > 0) expand(gpus, sets, (diff + gpus - 1) / gpus);
      else if (diff < 0) shrink(sets, (-diff + gpus - 1) / gpus);
    }
  }

  void expand(int gpus, std::vector<Set>& sets, std::int64_t count) {
    bool opened_last = false;
    for (std::int64_t i = 0; i < count; ++i) {
      opened_last = nodes_for(gpus) <= free_nodes_;
      if (opened_last) sets.push_back(open(gpus));
    }
    // The simulator's `if i > 0`, with `i` last set by the inner loop over
    // the new set's nodes when the last attempt opened one.
    if (count <= 0 || (opened_last && nodes_for(gpus) == 1)) return;
    std::vector<Id> jobs;
    for (Set& set : sets) {
      jobs.insert(jobs.end(), set.jobs.begin(), set.jobs.end());
      set.jobs.clear();
      set.load = 0;
    }
    deal(sets, jobs);
  }

  void shrink(std::vector<Set>& sets, std::int64_t count) {
    count = std::min<std::int64_t>(count, static_cast<std::int64_t>(sets.size()) - 1);
    if (count <= 0) return;
    std::vector<Id> jobs;
    for (std::int64_t i = 0; i < count; ++i) {
      jobs.insert(jobs.end(), sets.front().jobs.begin(), sets.front().jobs.end());
      free_nodes_ += sets.front().nodes;
      sets.erase(sets.begin());
    }
    deal(sets, jobs);
  }

  std::map<int, std::vector<Set>> classes_;
  std::vector<Active> pending_;
  std::unordered_set<Id> known_;  // placed or pending
  int free_nodes_;
  int gpus_per_node_;
  std::int64_t gpus_;
  std::int64_t last_minute_ = -1;
};

}  // namespace tessel_plugins

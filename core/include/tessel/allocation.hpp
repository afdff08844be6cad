// For allocation plugins: what a job runs on if it runs now, a denial, the
// cluster's capacity, dense indices for tenant and VC names, and the exact
// choice of GPU counts that maximizes a sum of per-job values.
// Header-only, so each plugin library stays self-contained.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/rng.hpp"
#include "tessel/stages.hpp"

namespace tessel::allocation {

// A running job keeps what it holds (an elasticity plugin may have resized
// it); a waiting one asks for its request.
inline Resources current_or_requested(const JobState& job) {
  return job.running() ? job.held() : job.spec.request();
}

// "Not this round". The core requires the job's own GPU share even here.
inline Grant deny(const JobState& job, Reason reason) {
  Resources none;
  none.gpus = 0;
  none.gpu_milli = job.spec.gpu_milli;
  return {job.spec.id, none, std::move(reason)};
}

// What the nodes that are up offer.
struct Capacity {
  double gpus = 0;
  double cpus = 0;
  double mem_gb = 0;
};

inline Capacity capacity_of(const ClusterState& cluster) {
  Capacity total;
  total.gpus = cluster.total_gpus();
  for (const Node& node : cluster.nodes()) {
    if (!node.up) continue;
    total.cpus += node.spec.cpus;
    total.mem_gb += node.spec.mem_gb;
  }
  return total;
}

// GPUs a grant occupies, counting fractional shares as fractions.
inline double gpu_count(const Resources& resources) {
  return resources.gpus * (resources.gpu_milli / 1000.0);
}

// Dense indices for names (tenants, VCs) in order of first appearance. Each
// job's index is remembered in a slot, so a name is looked up once per job,
// not once per round.
class NameIndex {
 public:
  explicit NameIndex(const PluginContext& context) : cached_(context.job_slot<std::uint32_t>()) {}

  // The index of `name`, added if new.
  std::size_t add(std::string_view name) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    names_.emplace_back(name);
    index_.emplace(names_.back(), names_.size() - 1);
    return names_.size() - 1;
  }

  // The index of `name`, the name `job` is known by (its tenant or its VC).
  std::size_t of(const JobState& job, std::string_view name) {
    std::uint32_t& cached = cached_(job.slots);  // index + 1; 0 = not looked up yet
    if (cached == 0) cached = static_cast<std::uint32_t>(add(name)) + 1;
    return cached - 1;
  }

  const std::string& name(std::size_t index) const { return names_[index]; }
  std::size_t size() const { return names_.size(); }

 private:
  Slot<std::uint32_t> cached_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::vector<std::string> names_;
};

// One GPU count per item (a job), from each item's options, that maximizes
// the sum of the options' values within a budget of GPUs (a multiple-choice
// knapsack over counts). Dynamic programming over items and GPUs used:
// exact, O(items x budget x options per item). An item's options are sorted
// by GPU count and the first takes none, so every item can go without.
// Ties (within a relative 1e-12) go to fewer GPUs, settled from the last
// item back: the last item gets the fewest GPUs of any best choice, then,
// given that, the one before it, and so on. The buffers are kept between
// calls, so a policy that solves every round allocates once.
//
// `options_of(j)` gives item j's options, each with an int `gpus`;
// `value_of(option)` its value.
class CountKnapsack {
 public:
  // The index of each item's option in a best choice.
  template <class OptionsOf, class ValueOf>
  const std::vector<std::size_t>& solve(std::size_t items, int budget, OptionsOf options_of, ValueOf value_of) {
    items_ = items;
    width_ = static_cast<std::size_t>(budget) + 1;
    prefix_.assign((items + 1) * width_, 0.0);
    pick_.assign(items * width_, 0);
    for (std::size_t j = 0; j < items; ++j)
      add_item(options_of(j), value_of, &prefix_[j * width_], &prefix_[(j + 1) * width_], &pick_[j * width_]);
    picked_.assign(items, 0);
    std::size_t c = width_ - 1;
    for (std::size_t j = items; j-- > 0;) {
      picked_[j] = pick_[j * width_ + c];
      c -= static_cast<std::size_t>(options_of(j)[picked_[j]].gpus);
    }
    return picked_;
  }

  // The best sum solve() found.
  double best() const { return prefix_[items_ * width_ + width_ - 1]; }

  // After solve(), with the same options: for each item, the best sum of the
  // other items' values within the whole budget, as if it were absent. The
  // prefix tables of solve() meet suffix tables built here from the last
  // item back: O(items x budget x options), not a solve per item.
  template <class OptionsOf, class ValueOf>
  const std::vector<double>& best_without_each(OptionsOf options_of, ValueOf value_of) {
    without_.assign(items_, 0.0);
    suffix_.assign(width_, 0.0);  // best over the items after the current one, within c GPUs
    next_suffix_.resize(width_);
    scratch_pick_.resize(width_);
    for (std::size_t i = items_; i-- > 0;) {
      const double* before = &prefix_[i * width_];
      double best = before[0] + suffix_[width_ - 1];
      for (std::size_t c = 1; c < width_; ++c) best = std::max(best, before[c] + suffix_[width_ - 1 - c]);
      without_[i] = best;
      add_item(options_of(i), value_of, suffix_.data(), next_suffix_.data(), scratch_pick_.data());
      std::swap(suffix_, next_suffix_);
    }
    return without_;
  }

 private:
  // after[c] = the best of before[c - g] + value over the item's options of
  // g <= c GPUs; pick[c] which option.
  template <class Options, class ValueOf>
  void add_item(const Options& options, ValueOf& value_of, const double* before, double* after,
                std::size_t* pick) const {
    for (std::size_t c = 0; c < width_; ++c) {
      double best = before[c] + value_of(options[0]);  // no GPUs
      std::size_t best_option = 0;
      for (std::size_t o = 1; o < options.size() && static_cast<std::size_t>(options[o].gpus) <= c; ++o) {
        const double v = before[c - static_cast<std::size_t>(options[o].gpus)] + value_of(options[o]);
        if (v > best + 1e-12 * std::fabs(best)) {  // strictly better: ties keep fewer GPUs
          best = v;
          best_option = o;
        }
      }
      after[c] = best;
      pick[c] = best_option;
    }
  }

  std::size_t items_ = 0;
  std::size_t width_ = 1;
  std::vector<double> prefix_;  // [k][c]: the best over items before k within c GPUs
  std::vector<std::size_t> pick_;  // [j][c]: item j's option in that best
  std::vector<std::size_t> picked_;
  std::vector<double> suffix_, next_suffix_, without_;
  std::vector<std::size_t> scratch_pick_;
};

}  // namespace tessel::allocation

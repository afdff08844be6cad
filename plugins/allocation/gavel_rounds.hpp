// Gavel's rounds: how a time-share allocation becomes who runs this round,
// after stanford-futuredata/gavel, scheduler/scheduler.py
// (_update_priorities, _reset_time_run_so_far,
// _schedule_jobs_on_workers_helper). Gavel drives every policy of its own
// (the LPs) and its Gandiva baseline through the same rounds, so the `gavel`
// and `gandiva` allocation plugins share this.
//
// An allocation gives each job, and each pair of jobs sharing GPUs, X[t]:
// the fraction of time it should run on GPU type t. Each round, for each
// type, jobs and pairs are ranked by priority X[t] / rounds received on t
// since the last allocation, ties broken by the rounds owed on t (the
// deficit), then by X[t], then by arrival. Walking the types fastest first
// and each type's ranking, a job is picked for the first type that still has
// GPUs for it (a job with no share there too: spare GPUs are not left idle);
// a pair is picked when neither job is picked yet and the type has its GPUs
// left, and granted as two grants: the first job, then the second sharing
// its GPUs (Grant::share_with). Picked jobs are granted that type, in picking
// order; the others wait this round. Every new allocation restarts each
// count at half a round and adds what was owed since the previous one,
// X x rounds elapsed - rounds received, to the deficit. Gavel counts
// seconds; every round is equally long, so rounds are time.
//
// Types are walked fastest first, as Gavel's hard-coded v100, p100, k80
// are: by the mean throughput there, relative to their fastest type, of the
// jobs that can run there. A job that is not picked is not stopped outright:
// like any job left out of a plan, it keeps its GPUs until a picked job
// needs them.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tessel/tessel.hpp>

#include "allocation_throttle.hpp"

namespace tessel_plugins {

class GavelRounds {
 public:
  // A job's or a pair's shares and counts. Vectors are by GPU type index.
  struct Shares {
    std::vector<double> share;    // X[t] of the last allocation
    std::vector<double> rounds;   // rounds received on each type since the last allocation
    std::vector<double> deficit;  // rounds owed on each type, summed over allocations
    bool planned = false;         // the last allocation gave it shares

    void fit(std::size_t types) {
      if (share.size() >= types) return;
      share.resize(types, 0.0);
      rounds.resize(types, 0.5);
      deficit.resize(types, 0.0);
    }
  };

  struct JobShares : Shares {
    std::string shares_text;  // "time share 0.6 on v100, 0.4 on k80 (policy; objective)"
    tessel::Reason waiting;   // why it waits when it is not picked
  };

  using JobPair = std::pair<tessel::JobId, tessel::JobId>;  // first < second

  explicit GavelRounds(const tessel::PluginContext& context) : record_(context.job_slot<JobShares>()) {}

  JobShares& of(const tessel::JobState& job) { return record_(job.slots); }

  // One call of the policy: counts the rounds; when the active jobs or the
  // GPUs up changed since the last allocation, or `due`, has
  // `allocate(plannable, capacity)` compute new shares (which ends with
  // allocated_at), as `throttle` allows; returns this round's plan.
  // `last` says what an allocation is, for the jobs that wait for one
  // ("solved last at").
  template <class Allocate>
  tessel::AllocationPlan round(const tessel::SchedulerView& view, AllocationThrottle& throttle, bool due,
                               const std::string& last, Allocate allocate) {
    const tessel::ClusterState& cluster = view.cluster();
    std::vector<int> capacity;
    tessel::gpus_up_by_type(cluster, capacity);
    const int largest_type = capacity.empty() ? 0 : *std::max_element(capacity.begin(), capacity.end());

    count(view);

    std::vector<const tessel::JobState*> plannable;
    for (const tessel::JobState* job : view.active())
      if (job->spec.gpus <= largest_type) plannable.push_back(job);
    bool held_back = false;  // an allocation is due, but the throttle defers it
    if (due || !allocated_ || capacity != allocated_capacity_ || !same_jobs(plannable)) {
      if (throttle.allow(view.now()))
        allocate(plannable, capacity);
      else
        held_back = true;
    }
    note_unplanned(view, plannable, throttle.seconds(), last);

    tessel::AllocationPlan result = plan(view, plannable, capacity, largest_type);
    if (held_back) result.revisit_at = throttle.next_allowed();
    return result;
  }
  bool allocated() const { return allocated_; }
  double last_allocation() const { return last_allocation_; }

  static std::string decimal(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", value);
    return text;
  }

  // At every call of the policy, first: credits every running job (or the
  // pair it shares GPUs with, once) with the rounds since the last call, on
  // the type it holds.
  void count(const tessel::SchedulerView& view) {
    const std::size_t types = view.cluster().gpu_types().size();
    const double elapsed = called_ ? (view.now() - last_call_) / view.settings().round_seconds : 0;
    called_ = true;
    last_call_ = view.now();
    if (elapsed <= 0) return;
    const tessel::ClusterState& cluster = view.cluster();
    for (const tessel::JobState* job : view.active()) {
      if (!job->running()) continue;
      const tessel::Gpu& gpu = cluster.gpu(job->allocation.gpus.front());
      const std::size_t type = static_cast<std::size_t>(cluster.node(gpu.node).type);
      if (gpu.sharers > 0) {  // a pair: its own count, credited once, at its first job
        const tessel::JobId other = gpu.jobs[0] == job->spec.id ? gpu.jobs[1] : gpu.jobs[0];
        if (other < job->spec.id) continue;
        Shares& pair = pairs_[{job->spec.id, other}];
        pair.fit(types);
        pair.rounds[type] += elapsed;
        continue;
      }
      JobShares& record = of(*job);
      record.fit(types);
      record.rounds[type] += elapsed;
    }
  }

  // Gavel's reset, before a new allocation: settles what each job and pair
  // was owed since the last one, restarts the counts, forgets the shares.
  void reset(const tessel::SchedulerView& view) {
    const std::size_t types = view.cluster().gpu_types().size();
    const double rounds_since = allocated_ ? (view.now() - last_allocation_) / view.settings().round_seconds : 0;
    auto settle = [&](Shares& shares) {
      shares.fit(types);
      for (std::size_t t = 0; t < types; ++t) {
        if (shares.planned) shares.deficit[t] += shares.share[t] * rounds_since - (shares.rounds[t] - 0.5);
        shares.rounds[t] = 0.5;
        shares.share[t] = 0;
      }
      shares.planned = false;
    };
    for (const tessel::JobState* job : view.active()) settle(of(*job));
    for (auto it = pairs_.begin(); it != pairs_.end();) {
      if (view.job(it->first.first).done() || view.job(it->first.second).done()) {
        it = pairs_.erase(it);
        continue;
      }
      settle(it->second);
      ++it;
    }
    planned_pairs_.clear();
  }

  // Orders the types fastest first: `rate[j][t]` is job j's rate on type t,
  // 0 where it cannot run. Walking a slow type first would hand its spare
  // GPUs to jobs whose share is on a fast type.
  void order_types(const std::vector<std::vector<double>>& rate, std::size_t types) {
    std::vector<double> speed(types, 0.0);
    std::vector<int> runnable(types, 0);
    for (const std::vector<double>& job : rate) {
      const double fastest = *std::max_element(job.begin(), job.end());
      for (std::size_t t = 0; t < types; ++t) {
        if (job[t] <= 0) continue;
        speed[t] += job[t] / fastest;
        ++runnable[t];
      }
    }
    for (std::size_t t = 0; t < types; ++t) speed[t] = runnable[t] > 0 ? speed[t] / runnable[t] : 0;
    type_order_.resize(types);
    for (std::size_t t = 0; t < types; ++t) type_order_[t] = t;
    std::stable_sort(type_order_.begin(), type_order_.end(),
                     [&](std::size_t a, std::size_t b) { return speed[a] > speed[b]; });
  }

  // After reset(): a pair's shares in the new allocation.
  void set_pair(const JobPair& key, const std::vector<double>& share, std::size_t types) {
    Shares& pair = pairs_[key];
    pair.fit(types);
    pair.share = share;
    pair.planned = true;
    planned_pairs_.push_back(key);
  }

  // After reset() and describe(): a job's shares in the new allocation,
  // `runs_on[t]` where it can run at all.
  void set_job(const tessel::SchedulerView& view, const tessel::JobState& job, const std::vector<double>& share,
               const std::vector<char>& runs_on) {
    JobShares& record = of(job);
    record.share = share;
    record.planned = true;
    std::string text = "time share ";
    bool first = true;
    for (std::size_t t = 0; t < share.size(); ++t) {
      if (!runs_on[t]) continue;
      text += (first ? "" : ", ") + decimal(share[t]) + " on " + view.cluster().gpu_types()[t];
      first = false;
    }
    record.shares_text = text + " (" + label_ + summary_;
    record.waiting = tessel::Reason::text(
        "waits: " + record.shares_text + "; jobs further below their shares took the GPUs this round");
  }

  // The allocation of `plannable` on `capacity` is complete at view.now().
  void allocated_at(const tessel::SchedulerView& view, const std::vector<const tessel::JobState*>& plannable,
                    const std::vector<int>& capacity) {
    allocated_ = true;
    last_allocation_ = view.now();
    allocated_capacity_ = capacity;
    allocated_jobs_.clear();
    for (const tessel::JobState* job : plannable) allocated_jobs_.push_back(job->spec.id);
  }
  // `label` names the policy and `summary` ends the parenthesis it opens
  // ("; every job ...)"), in the reasons set_job and plan give.
  void describe(std::string label, std::string summary) {
    label_ = std::move(label);
    summary_ = std::move(summary);
  }
  const std::string& summary() const { return summary_; }

  // Jobs that arrived since the last allocation (held back by a throttle of
  // `throttle_seconds`) run only where no job with a share needs the GPUs.
  // `last` says what the last allocation was ("solved last at").
  void note_unplanned(const tessel::SchedulerView& view, const std::vector<const tessel::JobState*>& plannable,
                      double throttle_seconds, const std::string& last) {
    const std::size_t types = view.cluster().gpu_types().size();
    for (const tessel::JobState* job : plannable) {
      JobShares& record = of(*job);
      if (record.planned) continue;
      record.fit(types);
      if (!record.shares_text.empty()) continue;
      record.shares_text = "no time share yet (" + last + " " + decimal(last_allocation_) +
                           " s; at most every " + decimal(throttle_seconds) + " s)";
      record.waiting = tessel::Reason::text("waits: " + record.shares_text);
    }
  }

  // This round's plan: `plannable` in arrival order, the jobs that some type
  // has room for; the other active jobs wait, with the reason.
  tessel::AllocationPlan plan(const tessel::SchedulerView& view, const std::vector<const tessel::JobState*>& plannable,
                              const std::vector<int>& capacity, int largest_type) {
    const std::size_t types = capacity.size();
    struct Entry {
      double priority, deficit, share;
      std::size_t job;  // index into plannable, which is in arrival order; past it, a pair
    };
    // The planned pairs whose jobs are both still plannable.
    std::vector<RoundPair> round_pairs;
    if (!planned_pairs_.empty()) {
      std::unordered_map<tessel::JobId, std::size_t> index;
      for (std::size_t i = 0; i < plannable.size(); ++i) index.emplace(plannable[i]->spec.id, i);
      for (const auto& key : planned_pairs_) {
        const auto first = index.find(key.first), second = index.find(key.second);
        if (first != index.end() && second != index.end())
          round_pairs.push_back({first->second, second->second, &pairs_.at(key)});
      }
    }
    std::vector<std::vector<Entry>> ranking(types);
    for (std::size_t t = 0; t < types; ++t) {
      for (std::size_t i = 0; i < plannable.size(); ++i) {
        if (plannable[i]->spec.gpus > capacity[t]) continue;
        const JobShares& record = of(*plannable[i]);
        ranking[t].push_back({record.share[t] / record.rounds[t], record.deficit[t], record.share[t], i});
      }
      // Pairs with a share on t: entries past plannable.size(), beside single jobs.
      for (std::size_t k = 0; k < round_pairs.size(); ++k) {
        const Shares& pair = *round_pairs[k].shares;
        if (pair.share[t] > 0 && plannable[round_pairs[k].first]->spec.gpus <= capacity[t])
          ranking[t].push_back({pair.share[t] / pair.rounds[t], pair.deficit[t], pair.share[t], plannable.size() + k});
      }
      std::sort(ranking[t].begin(), ranking[t].end(), [](const Entry& a, const Entry& b) {
        if (a.priority != b.priority) return a.priority > b.priority;
        if (a.deficit != b.deficit) return a.deficit > b.deficit;
        if (a.share != b.share) return a.share > b.share;
        return a.job < b.job;
      });
    }

    tessel::AllocationPlan result;
    result.ranked.reserve(view.active().size());
    std::vector<char> picked(plannable.size(), 0);
    std::vector<int> left = capacity;
    for (std::size_t t : type_order_) {
      for (const Entry& entry : ranking[t]) {
        if (left[t] == 0) break;
        if (entry.job >= plannable.size()) {
          pick_pair(view, plannable, round_pairs[entry.job - plannable.size()], t, picked, left, result);
          continue;
        }
        const tessel::JobState& job = *plannable[entry.job];
        if (picked[entry.job] || job.spec.gpus > left[t]) continue;
        picked[entry.job] = 1;
        left[t] -= job.spec.gpus;
        tessel::Resources grant{job.spec.gpus, job.spec.gpu_milli, job.spec.cpus, job.spec.mem_gb,
                                static_cast<int>(t)};
        const JobShares& record = of(job);
        const char* why = record.share[t] > 0 ? "; furthest below its share there this round"
                                              : "; no job with a share there needs these GPUs this round";
        result.ranked.push_back({job.spec.id, grant,
                                 tessel::Reason::text("runs on " + view.cluster().gpu_types()[t] + ": " +
                                                      record.shares_text + why)});
      }
    }
    std::size_t next = 0;
    for (const tessel::JobState* job : view.active()) {
      tessel::Resources none{0, job->spec.gpu_milli, job->spec.cpus, job->spec.mem_gb};
      if (next < plannable.size() && plannable[next] == job) {
        if (!picked[next]) result.ranked.push_back({job->spec.id, none, of(*job).waiting});
        ++next;
      } else {
        result.ranked.push_back({job->spec.id, none,
                                 tessel::Reason("needs {} GPUs of one type; no GPU type has more than {} up",
                                                job->spec.gpus, largest_type)});
      }
    }
    return result;
  }

 private:
  bool same_jobs(const std::vector<const tessel::JobState*>& jobs) const {
    if (jobs.size() != allocated_jobs_.size()) return false;
    for (std::size_t i = 0; i < jobs.size(); ++i)
      if (jobs[i]->spec.id != allocated_jobs_[i]) return false;
    return true;
  }

  struct RoundPair {
    std::size_t first, second;  // into plannable
    const Shares* shares;
  };

  // Grants a pair type t, the second job sharing the first's GPUs, if
  // neither is picked yet and t has the GPUs left.
  void pick_pair(const tessel::SchedulerView& view, const std::vector<const tessel::JobState*>& plannable,
                 const RoundPair& pair, std::size_t t, std::vector<char>& picked, std::vector<int>& left,
                 tessel::AllocationPlan& result) {
    const tessel::JobState& first = *plannable[pair.first];
    const tessel::JobState& second = *plannable[pair.second];
    if (picked[pair.first] || picked[pair.second] || first.spec.gpus > left[t]) return;
    picked[pair.first] = picked[pair.second] = 1;
    left[t] -= first.spec.gpus;
    const std::string why = " on " + view.cluster().gpu_types()[t] + " (" + label_ + ": the pair's time share " +
                            decimal(pair.shares->share[t]) + " there" + summary_ +
                            "; furthest below its share there this round";
    for (const tessel::JobState* job : {&first, &second}) {
      const tessel::JobState& other = job == &first ? second : first;
      tessel::Grant grant{job->spec.id,
                          {job->spec.gpus, job->spec.gpu_milli, job->spec.cpus, job->spec.mem_gb, static_cast<int>(t)},
                          tessel::Reason::text("runs sharing its GPUs with job " + std::to_string(other.spec.id) + why)};
      if (job == &second) grant.share_with = first.spec.id;
      result.ranked.push_back(std::move(grant));
    }
  }

  tessel::Slot<JobShares> record_;
  std::map<JobPair, Shares> pairs_;   // by (first, second), first < second
  std::vector<JobPair> planned_pairs_;  // pairs with a share in the last allocation
  std::vector<std::size_t> type_order_;  // fastest first
  std::string label_, summary_;
  bool allocated_ = false;
  double last_allocation_ = 0;
  std::vector<tessel::JobId> allocated_jobs_;  // plannable at the last allocation, in arrival order
  std::vector<int> allocated_capacity_;        // GPUs up by type then
  bool called_ = false;
  double last_call_ = 0;
};

}  // namespace tessel_plugins

// drf: Dominant Resource Fairness across tenants, over GPUs, CPUs and
// memory (Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of
// Multiple Resource Types", NSDI'11).
//
// A tenant's dominant share is the largest of its shares of the cluster's
// GPUs, CPUs and memory (the totals of nodes that are up), divided by its
// weight (`weights`, default 1), which is the paper's weighted DRF. Each
// round the allocation is rebuilt by progressive filling:
// repeatedly take the tenant with the lowest dominant share and give its
// next job that job's demand (what it holds if it runs, its request if it
// waits; CPUs or memory of 0 mean none declared and count for nothing).
// Within a tenant, running jobs come first, then waiting ones in arrival
// order. Equal shares go to the tenant whose next job arrived first.
//
// Simplifications and choices:
//  - Progressive filling in the paper stops when the next task does not
//    fit. Jobs are much larger than tasks, so here a job that does not fit
//    in what is left is passed over (it waits, with the room left in its
//    reason) and its tenant's next job is tried; the filling is over once
//    every tenant's jobs have been tried.
//  - Fit is checked against cluster totals; whether the GPUs sit on one
//    node is the placement plugin's question.
//  - The plan is rebuilt every round, so a tenant above its fair share loses
//    its newest running jobs (the core preempts unranked and denied jobs
//    first) when a tenant with a lower share has work waiting. Tasks in the
//    paper are short and never preempted; training jobs are not short.
//  - Tenants are `tenant` as given; jobs without one form one tenant "".
//
// A round costs O(J log T) for J active jobs of T tenants (a heap of tenants).
#include <algorithm>
#include <queue>
#include <sstream>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

namespace {

using tessel::allocation::Capacity;

constexpr tessel::ArgSpec kArgs[] = {
    {"weights", tessel::ArgType::number_table, "{}",
     "tenant -> weight > 0; a tenant's dominant share counts divided by its weight (unlisted tenants: 1)"},
};

class Drf final : public tessel::AllocationPolicy {
 public:
  explicit Drf(const tessel::PluginContext& context) : tenants_(context) {
    for (const auto& [tenant, weight] : context.args().number_table("weights")) {
      if (!(weight > 0)) {
        std::ostringstream message;
        message << "the weight of tenant '" << tenant << "' must be > 0, got " << weight;
        throw tessel::ArgumentError("weights", message.str());
      }
      const std::size_t index = tenants_.add(tenant);
      if (weights_.size() <= index) weights_.resize(index + 1, 1.0);
      weights_[index] = weight;
    }
  }

  // Decisions depend on the jobs and the cluster only.
  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const Capacity capacity = tessel::allocation::capacity_of(view.cluster());
    for (Tenant& tenant : queues_) {
      tenant.jobs.clear();
      tenant.next = 0;
      tenant.used = Capacity{};
    }
    // Each tenant's queue: running jobs, then waiting ones, in arrival order.
    for (bool running : {true, false})
      for (const tessel::JobState* job : view.active()) {
        if (job->running() != running) continue;
        const std::size_t index = tenants_.of(*job, job->spec.tenant);
        if (queues_.size() <= index) queues_.resize(index + 1);
        queues_[index].jobs.push_back(job);
      }
    weights_.resize(tenants_.size(), 1.0);

    std::priority_queue<Turn> turns;
    for (std::size_t t = 0; t < queues_.size(); ++t)
      if (!queues_[t].jobs.empty()) turns.push({0, queues_[t].jobs.front()->spec.id, t});

    tessel::AllocationPlan plan;
    plan.ranked.reserve(view.active().size());
    denied_.clear();
    Capacity used;
    while (!turns.empty()) {
      const Turn turn = turns.top();
      turns.pop();
      Tenant& tenant = queues_[turn.tenant];
      const tessel::JobState& job = *tenant.jobs[tenant.next++];
      const tessel::Resources demand = tessel::allocation::current_or_requested(job);
      const double gpus = tessel::allocation::gpu_count(demand);
      if (used.gpus + gpus <= capacity.gpus && used.cpus + demand.cpus <= capacity.cpus &&
          used.mem_gb + demand.mem_gb <= capacity.mem_gb) {
        plan.ranked.push_back({job.spec.id, demand,
                               tessel::Reason("its tenant's weighted dominant share was {} (GPUs {}, CPUs {}, "
                                              "memory {}), the lowest of tenants still asking",
                                              turn.share, share(tenant.used.gpus, capacity.gpus),
                                              share(tenant.used.cpus, capacity.cpus),
                                              share(tenant.used.mem_gb, capacity.mem_gb))});
        tenant.used.gpus += gpus;
        tenant.used.cpus += demand.cpus;
        tenant.used.mem_gb += demand.mem_gb;
        used.gpus += gpus;
        used.cpus += demand.cpus;
        used.mem_gb += demand.mem_gb;
      } else {
        denied_.push_back(tessel::allocation::deny(
            job, tessel::Reason("does not fit in what tenants with lower dominant shares left: {} GPUs, {} CPUs, "
                                "{} GB free",
                                capacity.gpus - used.gpus, capacity.cpus - used.cpus, capacity.mem_gb - used.mem_gb)));
      }
      if (tenant.next < tenant.jobs.size())
        turns.push({dominant_share(tenant.used, capacity) / weights_[turn.tenant],
                    tenant.jobs[tenant.next]->spec.id, turn.tenant});
    }
    plan.ranked.insert(plan.ranked.end(), denied_.begin(), denied_.end());
    return plan;
  }

 private:
  struct Tenant {
    std::vector<const tessel::JobState*> jobs;
    std::size_t next = 0;  // the next job to offer
    Capacity used;         // granted so far this round
  };
  // A tenant's turn: the lowest share on top, then the earliest next job.
  struct Turn {
    double share;
    tessel::JobId next_job;
    std::size_t tenant;
    bool operator<(const Turn& other) const {
      return share != other.share ? share > other.share : next_job > other.next_job;
    }
  };

  static double share(double used, double total) { return total > 0 ? used / total : 0; }
  static double dominant_share(const Capacity& used, const Capacity& total) {
    return std::max({share(used.gpus, total.gpus), share(used.cpus, total.cpus), share(used.mem_gb, total.mem_gb)});
  }

  tessel::allocation::NameIndex tenants_;
  std::vector<double> weights_;  // by tenant index
  std::vector<Tenant> queues_;   // by tenant index, reused across rounds
  std::vector<tessel::Grant> denied_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Drf, allocation, "drf", "1.0",
                        "Dominant Resource Fairness (NSDI'11) across tenants over GPUs, CPUs and memory, by "
                        "progressive filling",
                        kArgs)

// fifo: first in, first out.
//
// Running jobs keep their GPUs (FIFO never preempts), then waiting jobs
// follow in arrival order. With `backfill = false` (the default) the queue
// stops at the first job that does not fit, as in YARN's capacity scheduler
// that Tiresias compares against; with `backfill = true` later jobs that fit
// start around it.
//
// On a cluster of several GPU types, `gpu_type` says who picks a waiting
// job's type:
// - "any" (default): no type is granted; the placement plugin picks GPUs.
// - "random": FIFO itself grants a type drawn uniformly among the types that
//   have enough free GPUs for the whole job, as the heterogeneity-agnostic
//   FIFO baseline of Gavel (OSDI'20) does (stanford-futuredata/gavel,
//   scheduler/policies/fifo.py, FIFOPolicy in mode 'base').
// - "fastest": the type with room on which the throughput model runs the job
//   fastest (its GPUs packed on as few nodes as possible), as Gavel's
//   FIFOPolicyWithPerf does; ties go to the type listed first in the cluster.
// With either, a job for which no type has room is "does not fit": the
// queue stops there (or, with backfill, skips it), so a job is never split
// over types. Room is counted in whole free GPUs on nodes that are up, less
// what the jobs ahead in the queue were granted this round.
// Simplifications: Gavel gives a waiting job the type of a job that just
// finished, when it fits there, before drawing; when every other type is
// full, as it is in a busy cluster, the draw picks that type too. CPU and
// memory are left to placement, which may still refuse a job that declares
// them. A draw is a function of the plugin's seed, the job and the time, so
// asking again in the same state gives the same answer.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

namespace {

enum class TypeChoice { any, random, fastest };

constexpr tessel::ArgSpec kArgs[] = {
    {"backfill", tessel::ArgType::boolean, "false",
     "start later jobs that fit when the oldest waiting job does not"},
    {"gpu_type", tessel::ArgType::string, "\"any\"",
     "who picks a waiting job's GPU type: placement (any), FIFO at random among types with room (random, "
     "Gavel's FIFO), or FIFO by the fastest type with room (fastest)",
     "any|random|fastest"},
};

TypeChoice type_choice_named(const std::string& name) {
  return name == "random" ? TypeChoice::random : name == "fastest" ? TypeChoice::fastest : TypeChoice::any;
}

class Fifo final : public tessel::AllocationPolicy {
 public:
  explicit Fifo(const tessel::PluginContext& context)
      : backfill_(context.args().boolean("backfill")),
        type_choice_(type_choice_named(context.args().string("gpu_type"))),
        seed_(context.seed()) {}

  bool time_sensitive() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    tessel::AllocationPlan plan;
    plan.stop_at_first_unplaced = !backfill_;
    plan.ranked.reserve(view.active().size());
    for (const tessel::JobState* job : view.active())  // arrival order
      if (job->running())
        plan.ranked.push_back({job->spec.id, job->held(), tessel::Reason("running; FIFO never preempts")});
    if (type_choice_ != TypeChoice::any) {
      rank_typed(view, plan);
      return plan;
    }
    for (const tessel::JobState* job : view.active())
      if (job->waiting())
        plan.ranked.push_back({job->spec.id, job->spec.request(),
                               tessel::Reason("arrived at {} s; served in arrival order", job->spec.arrival)});
    return plan;
  }

 private:
  // Waiting jobs in arrival order, each granted a type with room for it.
  void rank_typed(const tessel::SchedulerView& view, tessel::AllocationPlan& plan) {
    const tessel::ClusterState& cluster = view.cluster();
    const auto& types = cluster.gpu_types();
    free_.assign(types.size(), 0);
    for (const tessel::Node& node : cluster.nodes())
      if (node.up) free_[static_cast<std::size_t>(node.type)] += node.free_gpus;
    if (granted_on_.size() != types.size()) {  // built once: reasons share their text
      granted_on_.clear();
      for (const std::string& type : types)
        granted_on_.push_back(tessel::Reason::text(
            "served in arrival order on " + type +
            (type_choice_ == TypeChoice::random ? ", drawn at random among the GPU types with room for it"
                                                : ", the fastest GPU type with room for it")));
    }

    const tessel::JobState* blocker = nullptr;
    for (const tessel::JobState* job : view.active()) {
      if (!job->waiting()) continue;
      tessel::Resources want = job->spec.request();
      if (blocker != nullptr) {
        want.gpus = 0;
        plan.ranked.push_back({job->spec.id, want, tessel::Reason("queued behind job {}, for which no GPU type has room",
                                                                  blocker->spec.id)});
        continue;
      }
      if (want.gpu_milli < 1000) {  // a GPU share (or none) needs no free GPU: placement finds it room
        plan.ranked.push_back(
            {job->spec.id, want, tessel::Reason("served in arrival order; a share of a GPU, of any type")});
        continue;
      }
      room_.clear();
      int most = 0;
      for (std::size_t t = 0; t < types.size(); ++t) {
        most = std::max(most, free_[t]);
        if (free_[t] >= want.gpus) room_.push_back(t);
      }
      if (room_.empty()) {
        plan.ranked.push_back(
            {job->spec.id, tessel::Resources{0, want.gpu_milli, want.cpus, want.mem_gb},
             tessel::Reason("needs {} GPUs of one type; the most free on one type is {}", want.gpus, most)});
        if (!backfill_) blocker = job;  // nothing after the head of the queue may start
        continue;
      }
      std::size_t pick = room_.front();
      if (type_choice_ == TypeChoice::random) {
        tessel::Rng rng(tessel::derive_seed(tessel::derive_seed(seed_, job->spec.id),
                                            std::bit_cast<std::uint64_t>(view.now())));
        pick = room_[rng.below(room_.size())];
      } else {
        double best = -1;
        for (std::size_t t : room_) {
          const double rate =
              view.throughput().rate(job->spec, cluster.packed_shape(job->spec, want.gpus, types[t]));
          if (rate > best) best = rate, pick = t;
        }
      }
      free_[pick] -= want.gpus;
      want.gpu_type = static_cast<int>(pick);
      plan.ranked.push_back({job->spec.id, want, granted_on_[pick]});
    }
  }

  bool backfill_;
  TypeChoice type_choice_;
  std::uint64_t seed_;
  std::vector<int> free_;          // whole free GPUs by type, reused across rounds
  std::vector<std::size_t> room_;  // types with room for the job at hand
  std::vector<tessel::Reason> granted_on_;  // by type
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Fifo, allocation, "fifo", "1.1", "first in, first out by arrival time", kArgs)

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
// - "fastest-reassigned": Gavel's FIFOPolicyWithPerf as its code runs it
//   (policies/fifo.py, FIFOPolicy.get_allocation in mode 'perf'): every
//   recompute forgets the last assignment and assigns every active job
//   again, running ones included, in arrival order, each to the fastest
//   type with room, room counted in all the GPUs up (not only the free
//   ones). A running job granted another type than it holds moves there
//   (the core preempts the later jobs in the way), so jobs climb to faster
//   types as these free up. "fastest" instead keeps a running job on its
//   type for life.
// With any of these, a job for which no type has room is "does not fit":
// the queue stops there (or, with backfill, skips it), so a job is never
// split over types. Room is counted in whole free GPUs on nodes that are
// up (all GPUs up, for "fastest-reassigned"), less what the jobs ahead in
// the queue were granted this round.
//
// `min_seconds_between_allocations` (with a typed `gpu_type`): the types are
// assigned again only when the active jobs or the GPUs up changed, and at
// most once in that many seconds, as Gavel's simulator recomputes its
// allocation (allocation_throttle.hpp); in between, the last plan stands,
// for the jobs still active: a job that arrived meanwhile waits, GPUs freed
// meanwhile stay idle. 0 (default): every round.
// A running job that the reassignment leaves without a type (behind a job
// no type has room for) is denied, and so keeps its GPUs until a granted
// job needs them; Gavel's would stop at the end of its round.
//
// `packing_threshold` (with "fastest-reassigned"; 0, the default: off) is
// Gavel's fifo_packed (FIFOPolicyWithPacking: FIFOPolicy in mode 'packing',
// threshold 1.5; `_pack`): after the reassignment, the jobs left in the
// queue, in order, each share the GPUs of a job assigned this time, one not
// sharing yet, of the same GPU count, on that job's type: the one whose two
// rates beside each other, as fractions of their rates alone there, add up
// to the most, if that sum exceeds the threshold; the first queued job with
// no such partner ends the packing. As in Gavel's code, the queue starts
// after the job that stopped the assignment for want of room when some
// type still had free GPUs (Gavel pops that job before it stops), and with
// it when none had. Differences: a pair in which either job's rate is 0
// never forms (Gavel adds the other's fraction alone); a fractional-GPU
// job ends the packing (Gavel has none). Backfill is refused with it:
// Gavel packs the queue behind the first job that does not fit, and with
// backfill there is none.
// Simplifications: Gavel gives a waiting job the type of a job that just
// finished, when it fits there, before drawing; when every other type is
// full, as it is in a busy cluster, the draw picks that type too. CPU and
// memory are left to placement, which may still refuse a job that declares
// them. A draw is a function of the plugin's seed, the job and the time, so
// asking again in the same state gives the same answer.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include "allocation_throttle.hpp"

namespace {

enum class TypeChoice { any, random, fastest, fastest_reassigned };

constexpr tessel::ArgSpec kArgs[] = {
    {"backfill", tessel::ArgType::boolean, "false",
     "start later jobs that fit when the oldest waiting job does not"},
    {"gpu_type", tessel::ArgType::string, "\"any\"",
     "who picks a waiting job's GPU type: placement (any), FIFO at random among types with room (random, "
     "Gavel's FIFO), FIFO by the fastest type with room (fastest), or the same for every job again at each "
     "recompute, running ones included (fastest-reassigned, Gavel's FIFO_Perf)",
     "any|random|fastest|fastest-reassigned"},
    {"min_seconds_between_allocations", tessel::ArgType::number, "0",
     "with a typed gpu_type: assign types again only when the active jobs or GPUs up change, at most once in "
     "this many seconds (Gavel's simulator: 1920); 0: every round"},
    {"packing_threshold", tessel::ArgType::number, "0",
     "with gpu_type = \"fastest-reassigned\": jobs left in the queue share the GPUs of an assigned job when "
     "their rates together, as fractions of their rates alone, exceed this (Gavel's fifo_packed: 1.5); 0: off"},
};

TypeChoice type_choice_named(const std::string& name) {
  if (name == "random") return TypeChoice::random;
  if (name == "fastest") return TypeChoice::fastest;
  if (name == "fastest-reassigned") return TypeChoice::fastest_reassigned;
  return TypeChoice::any;
}

class Fifo final : public tessel::AllocationPolicy {
 public:
  explicit Fifo(const tessel::PluginContext& context)
      : backfill_(context.args().boolean("backfill")),
        type_choice_(type_choice_named(context.args().string("gpu_type"))),
        seed_(context.seed()),
        throttle_(context.args().number("min_seconds_between_allocations"), "min_seconds_between_allocations"),
        packing_threshold_(context.args().number("packing_threshold")) {
    if (!(packing_threshold_ >= 0))
      throw tessel::ArgumentError("packing_threshold", "must be 0 (off) or positive");
    if (packing_threshold_ > 0 && type_choice_ != TypeChoice::fastest_reassigned)
      throw tessel::ArgumentError("packing_threshold", "applies only with gpu_type = \"fastest-reassigned\", as "
                                                       "Gavel's fifo_packed assigns types");
    if (packing_threshold_ > 0 && backfill_)
      throw tessel::ArgumentError("packing_threshold", "cannot go with backfill = true: Gavel's fifo_packed packs "
                                                       "the queue behind the first job that does not fit");
    if (throttle_.enabled() && type_choice_ == TypeChoice::any)
      throw tessel::ArgumentError("min_seconds_between_allocations",
                                  "applies only with gpu_type = \"random\", \"fastest\" or \"fastest-reassigned\": "
                                  "with \"any\" FIFO assigns no type to keep");
  }

  // With a throttle, whether a recompute may happen depends on the time alone.
  bool time_sensitive() const override { return throttle_.enabled(); }
  bool reads_progress() const override { return false; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    if (packing_threshold_ > 0 && view.throughput().max_colocated() < 2)
      throw tessel::ArgumentError("packing_threshold", "pairs jobs on shared GPUs, but throughput model '" +
                                                           std::string(view.throughput().name()) +
                                                           "' has no co-location throughputs (gavel-table has them)");
    if (!throttle_.enabled()) return compute(view);
    tessel::AllocationPlan plan;
    if (!computed_ || changed(view)) {
      if (throttle_.allow(view.now())) {
        last_plan_ = compute(view);
        computed_ = true;
        remember(view);
        return last_plan_;
      }
      plan.revisit_at = throttle_.next_allowed();  // the recompute held back is due then
    }
    // The last plan stands, for the jobs still active.
    plan.stop_at_first_unplaced = last_plan_.stop_at_first_unplaced;
    active_.assign(view.jobs().size(), 0);
    for (const tessel::JobState* job : view.active()) active_[job->spec.id] = 1;
    for (const tessel::Grant& grant : last_plan_.ranked) {
      if (grant.job >= active_.size() || !active_[grant.job]) continue;
      plan.ranked.push_back(grant);
      // A job whose partner left runs on alone, on the same type.
      if (grant.share_with != tessel::kNoJob && !active_[grant.share_with]) plan.ranked.back().share_with = tessel::kNoJob;
    }
    return plan;
  }

 private:
  tessel::AllocationPlan compute(const tessel::SchedulerView& view) {
    tessel::AllocationPlan plan;
    plan.stop_at_first_unplaced = !backfill_;
    const tessel::Reason kept("running; FIFO never preempts");
    if (type_choice_ != TypeChoice::fastest_reassigned) {
      if (throttle_.enabled()) {
        // The last plan stands for a while, and must still grant a job it
        // found running when that job is stopped meanwhile: it lists them.
        for (const tessel::JobState* job : view.active())  // arrival order
          if (job->running()) plan.ranked.push_back({job->spec.id, job->held(), kept});
      } else {
        plan.keep_running = kept;  // the core keeps them: the plan lists the queue alone
      }
    }
    if (type_choice_ != TypeChoice::any) {
      rank_typed(view, plan);
      return plan;
    }
    plan.ranked.reserve(plan.ranked.size() + view.waiting().size());
    for (const tessel::JobState* job : view.waiting())  // arrival order
      plan.ranked.push_back({job->spec.id, job->spec.request(),
                             tessel::Reason("arrived at {} s; served in arrival order", job->spec.arrival)});
    return plan;
  }

  // Whether the active jobs or the GPUs up differ from the last recompute's.
  bool changed(const tessel::SchedulerView& view) {
    tessel::gpus_up_by_type(view.cluster(), up_now_);
    if (up_now_ != up_at_compute_ || view.active().size() != ids_at_compute_.size()) return true;
    for (std::size_t i = 0; i < ids_at_compute_.size(); ++i)
      if (view.active()[i]->spec.id != ids_at_compute_[i]) return true;
    return false;
  }

  void remember(const tessel::SchedulerView& view) {
    tessel::gpus_up_by_type(view.cluster(), up_at_compute_);
    ids_at_compute_.clear();
    for (const tessel::JobState* job : view.active()) ids_at_compute_.push_back(job->spec.id);
  }

  // In arrival order, each job granted a type with room for it: the waiting
  // jobs, or every active job when types are reassigned.
  void rank_typed(const tessel::SchedulerView& view, tessel::AllocationPlan& plan) {
    const tessel::ClusterState& cluster = view.cluster();
    const auto& types = cluster.gpu_types();
    const bool reassign = type_choice_ == TypeChoice::fastest_reassigned;
    if (reassign) {
      tessel::gpus_up_by_type(cluster, free_);  // the room a recompute counts from
    } else {
      free_.assign(types.size(), 0);
      for (const tessel::Node& node : cluster.nodes())
        if (node.up) free_[static_cast<std::size_t>(node.type)] += node.free_gpus;
    }
    if (granted_on_.size() != types.size()) {  // built once: reasons share their text
      granted_on_.clear();
      for (const std::string& type : types)
        granted_on_.push_back(tessel::Reason::text(
            "served in arrival order on " + type +
            (type_choice_ == TypeChoice::random    ? ", drawn at random among the GPU types with room for it"
             : reassign                           ? ", the fastest GPU type with room for it, every active job "
                                                    "assigned again in arrival order"
                                                  : ", the fastest GPU type with room for it")));
    }

    const tessel::JobState* blocker = nullptr;
    std::size_t queue_from = 0;  // packing: the first plan entry of the queue left
    assigned_.clear();
    for (const tessel::JobState* job : reassign ? view.active() : view.waiting()) {
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
        // Gavel pops this job before it stops when some type has free GPUs.
        queue_from = plan.ranked.size() - (most > 0 ? 0 : 1);
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
      if (want.gpu_milli == 1000) assigned_.push_back({job, pick, false});
      plan.ranked.push_back({job->spec.id, want, granted_on_[pick]});
    }
    if (packing_threshold_ > 0 && blocker != nullptr) pack(view, plan, queue_from);
  }

  // Gavel's FIFOPolicy._pack: each queued job, in order, beside the
  // assigned job it pairs best with, until one pairs with none.
  void pack(const tessel::SchedulerView& view, tessel::AllocationPlan& plan, std::size_t queue_from) {
    const tessel::ClusterState& cluster = view.cluster();
    const tessel::ThroughputModel& model = view.throughput();
    for (std::size_t k = queue_from; k < plan.ranked.size(); ++k) {
      const tessel::JobSpec& spec = view.job(plan.ranked[k].job).spec;
      if (spec.gpu_milli != 1000) return;
      double best = packing_threshold_;
      Assigned* partner = nullptr;
      for (Assigned& candidate : assigned_) {
        const tessel::JobSpec& other = candidate.job->spec;
        if (candidate.paired || other.gpus != spec.gpus) continue;
        const tessel::Shape shape = cluster.packed_shape(other, other.gpus, cluster.gpu_types()[candidate.type]);
        const tessel::JobSpec* beside_other[] = {&other};
        const tessel::JobSpec* beside_job[] = {&spec};
        const double rate = model.rate_colocated(spec, beside_other, shape);
        const double other_rate = model.rate_colocated(other, beside_job, shape);
        if (rate <= 0 || other_rate <= 0) continue;
        const double together = rate / model.rate(spec, shape) + other_rate / model.rate(other, shape);
        if (together > best) best = together, partner = &candidate;
      }
      if (partner == nullptr) return;
      partner->paired = true;
      tessel::Grant& grant = plan.ranked[k];
      grant.resources = spec.request();
      grant.resources.gpu_type = static_cast<int>(partner->type);
      grant.share_with = partner->job->spec.id;
      char together[32];
      std::snprintf(together, sizeof together, "%.3g", best);
      grant.reason = tessel::Reason::text("shares the GPUs of job " + std::to_string(partner->job->spec.id) + " on " +
                                          cluster.gpu_types()[partner->type] + ": beside each other they run at " +
                                          together + " times their rates alone, the most above the packing threshold");
    }
  }

  bool backfill_;
  TypeChoice type_choice_;
  std::uint64_t seed_;
  tessel_plugins::AllocationThrottle throttle_;
  // With the throttle: the last recompute's plan, and what it was computed for.
  tessel::AllocationPlan last_plan_;
  bool computed_ = false;
  std::vector<tessel::JobId> ids_at_compute_;  // active jobs, in arrival order
  std::vector<int> up_at_compute_, up_now_;    // GPUs up by type
  std::vector<char> active_;                   // by job id, reused
  std::vector<int> free_;          // whole free GPUs by type, reused across rounds
  std::vector<std::size_t> room_;  // types with room for the job at hand
  std::vector<tessel::Reason> granted_on_;  // by type
  double packing_threshold_;
  struct Assigned {  // a whole-GPU job the reassignment gave a type, in order
    const tessel::JobState* job;
    std::size_t type;
    bool paired;
  };
  std::vector<Assigned> assigned_;
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Fifo, allocation, "fifo", "1.3", "first in, first out by arrival time", kArgs)

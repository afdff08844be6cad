// synergy: resource-sensitive allocation, after Synergy (Mohan et al.,
// "Looking Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters",
// OSDI'22): GPUs by an ordinary policy, CPU and memory by each job's
// sensitivity to them.
//
// Sources, in msr-fiddle/synergy, simulator/:
//   schedulers/{fifo,las,srtf}_synergy_new.py   the order and the jobs of a round
//   resources/cluster.py   allocate_synergy_placement, _top_synergy_gpus_placement
//                          (where a demand fits), allocate_synergy_tune, _tune,
//                          _get_underutilized_servers, _reallocate_peer,
//                          _make_fair_share (TUNE)
//   opt_algo/synergy_opt.py   SolveFirstLP (OPT)
//   jobs/job.py           the CPU x memory grid; jobs/workload.py
//                          add_synergy_profile (a demand is capped to a server)
//
// The rule. Every round all GPUs are handed out afresh. Active jobs are
// ordered by `order`: fifo (arrival), las (least attained service first)
// or srtf (least remaining time at the proportional share first), ties by
// arrival. Walking that order, a job is tried if its GPUs fit in the GPUs
// not yet given out (later, smaller jobs may pass a big one); with LAS and
// OPT the jobs are picked by GPU count first, as Synergy does, so GPUs a
// picked job cannot use stay idle. A job tried gets CPUs and memory by
// `mode`:
// - proportional: the GPU-proportional share, c_p CPUs and m_p GB per GPU.
// - greedy: its best demand if that fits, else the proportional share if
//   that fits, else it waits this round.
// - tune (Synergy-TUNE): its best demand if it fits; else, if the best
//   demand exceeds the share in CPUs or memory, the share; else (or if the
//   share does not fit either) jobs of the round already given more than
//   the share give the excess back, on the nodes Synergy would put the job
//   on (the first node with free GPUs for all of a multi-GPU job, else the
//   nodes with the fewest free GPUs), jobs on one node first, then the
//   most CPUs per GPU, then the most memory; each goes down to the share
//   and never below it, until the job's demand is covered there.
// - opt (Synergy-OPT, an upper bound): one LP over the round's jobs. y[j][p]
//   is the weight job j puts on demand point p; maximise
//   sum_j sum_p rel[j][p] y[j][p] subject to sum_p y[j][p] = 1,
//   sum_p rel[j][p] y[j][p] >= 1 (no job below its proportional throughput),
//   sum_j gpus_j sum_p cpus_p y[j][p] <= the CPUs of the nodes up, and the
//   same for memory; rel[j][p] is the job's rate at p over its rate at the
//   share. A job gets sum_p y[j][p] p (Synergy's cpu_demand, mem_demand).
//   Like Synergy's, the LP sees the cluster's totals, not its nodes.
// Greedy and TUNE decide whether a demand fits on a model of the nodes,
// empty at the start of each round (Synergy re-places every job every
// round) and filled in the round's order with the rule of the `synergy`
// placement plugin: a running job stays on its GPUs if they have room;
// else the node with the fewest free GPUs that has room for the whole job;
// else GPU by GPU from the nodes with the fewest free GPUs. With
// `placement = "first_fit"` the model follows that rule of the placement
// plugin instead (Synergy without `+place`, _top_synergy_gpus): GPU by GPU
// from the nodes in order, running jobs not kept where they are. The
// grants go out in that order and carry no GPU type.
//
// The best demand comes from the throughput model alone: the rate of the
// job on its GPUs (packed on as few nodes as possible) is probed at every
// point of `probe_cpus_per_gpu` x `probe_mem_gb_per_gpu` (by default
// Synergy's grid, jobs/job.py) that one node could give it, and at the
// share itself. The best demand is the fewest CPUs reaching the highest
// rate, then the least memory reaching it at those CPUs, as Synergy's
// profiles pick it. The synergy-sensitivity model is flat beyond its grid,
// so probes beyond that grid find nothing new.
//
// The proportional share per GPU is the smallest CPUs-per-GPU and
// GB-per-GPU of the nodes up, so that it fits on any free GPU.
//
// Simplifications:
// - GPU types are ignored, as in Synergy; storage bandwidth is not modelled.
// - CPUs may be fractional (Synergy rounds a server's share down).
// - The core keeps running jobs where they are unless their grant changes,
//   so the real nodes can be more fragmented than the model; a job that
//   then does not fit waits, or displaces jobs ranked after it.
// - Synergy's _make_fair_share moves a shrunk peer's CPUs and memory both
//   to the share, which can raise one of them and overfill a server; here a
//   peer only gives back what it holds above the share.
// - If TUNE cannot fit a job after shrinking peers, Synergy stops the
//   simulation; here the job waits this round.
// - Synergy's LAS re-sorts the round's jobs by GPU count (largest first)
//   when tuning; this is kept. Its starvation bump (priority after 1000 h
//   without running) is not.
// - The OPT LP is the relaxation of Synergy's (which makes y binary with
//   GLPK_MI); its demands may not fit node by node, and a job that the
//   placement stage cannot place waits.
// - By default jobs are not stopped at the end of each round: jobs left out
//   of the round keep running until a job of the round needs their
//   resources. Synergy's leases end every round: [scheduler] left_out =
//   "stop" and placement_each_round = "every_round" (with placement =
//   "first_fit" here and in the placement plugin) follow it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/allocation.hpp>

#include <tessel/lp.hpp>

namespace {

enum class Order { fifo, las, srtf };
enum class Mode { proportional, greedy, tune, opt };

constexpr tessel::ArgSpec kArgs[] = {
    {"order", tessel::ArgType::string, "\"fifo\"", "the order in which jobs get GPUs", "fifo|las|srtf"},
    {"mode", tessel::ArgType::string, "\"tune\"",
     "how CPUs and memory are given: GPU-proportional share, best demand when it fits (greedy), "
     "Synergy-TUNE, or Synergy-OPT's LP",
     "proportional|greedy|tune|opt"},
    {"placement", tessel::ArgType::string, "\"fullest\"",
     "the `synergy` placement plugin's rule that greedy and TUNE assume when they decide what fits",
     "fullest|first_fit"},
    {"probe_cpus_per_gpu", tessel::ArgType::number_list, "[1, 2, 3, 4, 5, 6, 9, 12, 24]",
     "CPUs per GPU at which the throughput model is probed for a job's best demand"},
    {"probe_mem_gb_per_gpu", tessel::ArgType::number_list, "[20.83, 62.5, 125, 187.5, 250]",
     "memory per GPU (GB) at which the throughput model is probed for a job's best demand"},
};

Order order_named(const std::string& name) {
  return name == "las" ? Order::las : name == "srtf" ? Order::srtf : Order::fifo;
}

Mode mode_named(const std::string& name) {
  if (name == "proportional") return Mode::proportional;
  if (name == "greedy") return Mode::greedy;
  if (name == "opt") return Mode::opt;
  return Mode::tune;
}

std::vector<double> probe_levels(const tessel::PluginArgs& args, const char* name) {
  std::vector<double> levels = args.numbers(name);
  if (levels.empty()) throw tessel::ArgumentError(name, "needs at least one value");
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (!(levels[i] > 0)) throw tessel::ArgumentError(name, "values must be positive");
    if (i > 0 && levels[i] <= levels[i - 1]) throw tessel::ArgumentError(name, "values must increase");
  }
  return levels;
}

// CPUs and memory per GPU.
struct PerGpu {
  double cpus = 0;
  double mem_gb = 0;
  bool operator==(const PerGpu&) const = default;
};

// What the probes found for one job; valid while `share` and `cap` hold.
struct Profile {
  bool known = false;
  PerGpu share, cap;
  PerGpu best;
  double speedup = 1;                // rate at best over rate at the share
  std::vector<PerGpu> points;        // demand points no other point beats (for opt)
  std::vector<double> relative;      // rate at each point over rate at the share
};

// A node as the round fills it.
struct NodeRoom {
  tessel::NodeId id;
  int free_gpus;
  double free_cpus, free_mem_gb;

  int room_for(PerGpu demand) const {
    int gpus = free_gpus;
    if (demand.cpus > 0) gpus = std::min(gpus, static_cast<int>(std::floor(free_cpus / demand.cpus + 1e-9)));
    if (demand.mem_gb > 0) gpus = std::min(gpus, static_cast<int>(std::floor(free_mem_gb / demand.mem_gb + 1e-9)));
    return std::max(gpus, 0);
  }
};

// A job of the round, and where the model of the nodes put it.
struct RoundJob {
  const tessel::JobState* job;
  int gpus;
  PerGpu demand;
  std::vector<std::pair<std::size_t, int>> parts;  // (index into the rooms, GPUs there)
  bool placed = false;
  tessel::Reason reason;
};

class Synergy final : public tessel::AllocationPolicy {
 public:
  explicit Synergy(const tessel::PluginContext& context)
      : order_(order_named(context.args().string("order"))),
        mode_(mode_named(context.args().string("mode"))),
        first_fit_(context.args().string("placement") == "first_fit"),
        probe_cpus_(probe_levels(context.args(), "probe_cpus_per_gpu")),
        probe_mem_gb_(probe_levels(context.args(), "probe_mem_gb_per_gpu")),
        profile_(context.job_slot<Profile>()) {}

  // FIFO's decisions depend only on the jobs and where they run; LAS and
  // SRTF reorder jobs as service and progress accrue.
  bool time_sensitive() const override { return order_ != Order::fifo; }

  tessel::AllocationPlan allocate(const tessel::SchedulerView& view) override {
    const tessel::ClusterState& cluster = view.cluster();
    cluster_ = &cluster;
    rooms_.clear();
    room_of_node_.assign(cluster.nodes().size(), kNoRoom);
    share_ = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
    int total_gpus = 0;
    total_cpus_ = total_mem_gb_ = 0;
    for (const tessel::Node& node : cluster.nodes()) {
      if (!node.up || node.spec.gpus == 0) continue;
      room_of_node_[node.id] = rooms_.size();
      rooms_.push_back({node.id, node.spec.gpus, node.spec.cpus, node.spec.mem_gb});
      share_.cpus = std::min(share_.cpus, node.spec.cpus / node.spec.gpus);
      share_.mem_gb = std::min(share_.mem_gb, node.spec.mem_gb / node.spec.gpus);
      total_gpus += node.spec.gpus;
      total_cpus_ += node.spec.cpus;
      total_mem_gb_ += node.spec.mem_gb;
    }
    if (rooms_.empty()) share_ = {};

    std::vector<const tessel::JobState*> ordered(view.active().begin(), view.active().end());
    order_jobs(view, ordered);

    // Synergy's LAS and OPT first pick the round's jobs by GPU count; its
    // FIFO and SRTF walk every job and try each whose GPUs are still free,
    // so that GPUs a job could not use (greedy) go to later jobs.
    const bool pick_by_count = order_ == Order::las || mode_ == Mode::opt;
    round_.clear();
    std::vector<std::pair<const tessel::JobState*, int>> left_out;  // with the GPUs left at its turn
    int unpromised = total_gpus;
    for (const tessel::JobState* job : ordered) {
      if (pick_by_count && job->spec.gpus > unpromised) {
        left_out.push_back({job, unpromised});
        continue;
      }
      if (pick_by_count) unpromised -= job->spec.gpus;
      round_.push_back({job, job->spec.gpus, share_, {}, false, {}});
    }
    if (mode_ == Mode::tune && order_ == Order::las)
      std::stable_sort(round_.begin(), round_.end(),
                       [](const RoundJob& a, const RoundJob& b) { return a.gpus > b.gpus; });

    caps_.clear();
    for (RoundJob& member : round_) profile(view, member);
    if (mode_ == Mode::opt) {
      optimise();
    } else {
      unpromised = total_gpus;
      for (std::size_t i = 0; i < round_.size(); ++i) {
        RoundJob& member = round_[i];
        if (member.gpus > unpromised) {
          member.reason = left_out_reason(member.gpus, unpromised);
          continue;
        }
        if (mode_ == Mode::proportional) {
          member.placed = true;
          member.reason = tessel::Reason("proportional share: {} CPUs and {} GB per GPU", share_.cpus, share_.mem_gb);
        } else if (mode_ == Mode::greedy) {
          greedy(i);
        } else {
          tune(i);
        }
        if (member.placed) unpromised -= member.gpus;
      }
    }

    tessel::AllocationPlan plan;
    plan.ranked.reserve(ordered.size());
    for (const RoundJob& member : round_) {
      const tessel::JobSpec& spec = member.job->spec;
      const int gpus = member.placed ? member.gpus : 0;
      tessel::Resources resources{gpus, spec.gpu_milli, member.demand.cpus * gpus, member.demand.mem_gb * gpus};
      plan.ranked.push_back({spec.id, resources, member.reason});
    }
    for (auto [job, left] : left_out)
      plan.ranked.push_back(tessel::allocation::deny(*job, left_out_reason(job->spec.gpus, left)));
    return plan;
  }

 private:
  static constexpr std::size_t kNoRoom = std::numeric_limits<std::size_t>::max();

  void order_jobs(const tessel::SchedulerView& view, std::vector<const tessel::JobState*>& jobs) const {
    if (order_ == Order::fifo) return;  // view.active() is in arrival order
    std::vector<double> key(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (order_ == Order::las) {
        key[i] = jobs[i]->attained_service;
      } else {
        tessel::Shape shape = view.cluster().packed_shape(jobs[i]->spec, jobs[i]->spec.gpus);
        shape.cpus = share_.cpus * jobs[i]->spec.gpus;
        shape.mem_gb = share_.mem_gb * jobs[i]->spec.gpus;
        key[i] = view.remaining_seconds(*jobs[i], shape);
      }
    }
    std::vector<std::size_t> index(jobs.size());
    for (std::size_t i = 0; i < index.size(); ++i) index[i] = i;
    std::stable_sort(index.begin(), index.end(), [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
    std::vector<const tessel::JobState*> sorted;
    sorted.reserve(jobs.size());
    for (std::size_t i : index) sorted.push_back(jobs[i]);
    jobs = std::move(sorted);
  }

  // Probes the model for the job's best demand, once per job and cluster shape.
  void profile(const tessel::SchedulerView& view, const RoundJob& member) {
    const tessel::JobState& job = *member.job;
    Profile& found = profile_(job.slots);
    // One node's CPUs and memory bound what a job can be given per GPU
    // (jobs/workload.py caps a demand to a server).
    auto [known_cap, fresh] = caps_.try_emplace(member.gpus);
    PerGpu& cap = known_cap->second;
    if (fresh) {
      for (const NodeRoom& room : rooms_) {
        const tessel::Node& node = view.cluster().node(room.id);
        const double gpus_there = std::min(member.gpus, node.spec.gpus);
        cap.cpus = std::max(cap.cpus, node.spec.cpus / gpus_there);
        cap.mem_gb = std::max(cap.mem_gb, node.spec.mem_gb / gpus_there);
      }
    }
    if (found.known && found.share == share_ && found.cap == cap) return;

    tessel::Shape shape = view.cluster().packed_shape(job.spec, member.gpus);
    auto rate_at = [&](PerGpu point) {
      shape.cpus = point.cpus * member.gpus;
      shape.mem_gb = point.mem_gb * member.gpus;
      return view.throughput().rate(job.spec, shape);
    };
    std::vector<PerGpu> points{share_};
    for (double cpus : probe_cpus_)
      for (double mem_gb : probe_mem_gb_)
        if (cpus <= cap.cpus + 1e-9 && mem_gb <= cap.mem_gb + 1e-9 && !(PerGpu{cpus, mem_gb} == share_))
          points.push_back({cpus, mem_gb});
    const double at_share = rate_at(share_);
    std::vector<double> relative(points.size());
    double highest = 0;
    for (std::size_t p = 0; p < points.size(); ++p) {
      relative[p] = rate_at(points[p]) / at_share;
      highest = std::max(highest, relative[p]);
    }
    // The fewest CPUs reaching the highest rate, then the least memory.
    const double reaches = highest * (1 - 1e-9);
    std::size_t best = 0;
    bool have_best = false;
    for (std::size_t p = 0; p < points.size(); ++p) {
      if (relative[p] < reaches) continue;
      const bool fewer = !have_best || points[p].cpus < points[best].cpus ||
                         (points[p].cpus == points[best].cpus && points[p].mem_gb < points[best].mem_gb);
      if (fewer) {
        best = p;
        have_best = true;
      }
    }

    found = Profile{};
    found.known = true;
    found.share = share_;
    found.cap = cap;
    found.best = points[best];
    found.speedup = relative[best];
    // OPT needs only points that no other point beats on CPUs, memory and rate.
    for (std::size_t p = 0; p < points.size(); ++p) {
      bool beaten = false;
      for (std::size_t q = 0; q < points.size() && !beaten; ++q) {
        if (q == p) continue;
        const bool no_worse = points[q].cpus <= points[p].cpus && points[q].mem_gb <= points[p].mem_gb &&
                              relative[q] >= relative[p];
        const bool better = points[q].cpus < points[p].cpus || points[q].mem_gb < points[p].mem_gb ||
                            relative[q] > relative[p];
        beaten = no_worse && (better || q < p);
      }
      if (!beaten) {
        found.points.push_back(points[p]);
        found.relative.push_back(relative[p]);
      }
    }
  }

  const Profile& profile_of(const RoundJob& member) const { return profile_(member.job->slots); }

  static tessel::Reason left_out_reason(int gpus, int left) {
    return tessel::Reason("needs {} GPUs; jobs ahead of it in this round's order left {}", gpus, left);
  }

  static bool exceeds(PerGpu demand, PerGpu limit) {
    return demand.cpus > limit.cpus + 1e-9 || demand.mem_gb > limit.mem_gb + 1e-9;
  }

  // Puts job `i` of the round on the model of the nodes at `demand`, by the
  // synergy placement rule; false, changing nothing, if it does not fit.
  bool place(std::size_t i, PerGpu demand) {
    RoundJob& member = round_[i];
    std::vector<std::pair<std::size_t, int>> parts;
    if (first_fit_) {
      int needed = member.gpus;
      for (std::size_t r = 0; r < rooms_.size() && needed > 0; ++r) {
        const int here = std::min(needed, rooms_[r].room_for(demand));
        if (here > 0) parts.push_back({r, here}), needed -= here;
      }
      if (needed > 0) return false;
    }
    // A running job stays where it is when its GPUs have room.
    if (parts.empty() && member.job->running() && member.job->allocation.gpu_count() == member.gpus) {
      parts = held_parts(member);
      bool room = !parts.empty();
      for (auto [r, gpus] : parts) room = room && rooms_[r].room_for(demand) >= gpus;
      if (!room) parts.clear();
    }
    if (parts.empty()) {
      std::size_t best = kNoRoom;
      for (std::size_t r = 0; r < rooms_.size(); ++r) {
        const bool fewer_free = best == kNoRoom || rooms_[r].free_gpus < rooms_[best].free_gpus;
        if (rooms_[r].room_for(demand) >= member.gpus && fewer_free) best = r;
      }
      if (best != kNoRoom) parts.push_back({best, member.gpus});
    }
    if (parts.empty()) {
      int needed = member.gpus;
      for (std::size_t r : fullest_first()) {
        const int here = std::min(needed, rooms_[r].room_for(demand));
        if (here == 0) continue;
        parts.push_back({r, here});
        needed -= here;
        if (needed == 0) break;
      }
      if (needed > 0) return false;
    }
    for (auto [r, gpus] : parts) {
      rooms_[r].free_gpus -= gpus;
      rooms_[r].free_cpus -= demand.cpus * gpus;
      rooms_[r].free_mem_gb -= demand.mem_gb * gpus;
    }
    member.parts = std::move(parts);
    member.demand = demand;
    member.placed = true;
    return true;
  }

  // The nodes of a running job, with its GPUs on each.
  std::vector<std::pair<std::size_t, int>> held_parts(const RoundJob& member) const {
    std::vector<std::pair<std::size_t, int>> parts;
    for (tessel::GpuId gpu : member.job->allocation.gpus) {
      const std::size_t r = room_of_node_[cluster_->gpu(gpu).node];
      if (r == kNoRoom) return {};
      auto it = std::find_if(parts.begin(), parts.end(), [r](auto& part) { return part.first == r; });
      if (it == parts.end())
        parts.push_back({r, 1});
      else
        ++it->second;
    }
    return parts;
  }

  // Rooms with free GPUs, fewest free GPUs first (Synergy's heap), ties by node.
  std::vector<std::size_t> fullest_first() const {
    std::vector<std::size_t> order;
    for (std::size_t r = 0; r < rooms_.size(); ++r)
      if (rooms_[r].free_gpus > 0) order.push_back(r);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return rooms_[a].free_gpus < rooms_[b].free_gpus; });
    return order;
  }

  void greedy(std::size_t i) {
    RoundJob& member = round_[i];
    const Profile& found = profile_of(member);
    if (place(i, found.best)) {
      member.reason = best_reason(found);
    } else if (!(found.best == share_) && place(i, share_)) {
      member.reason = tessel::Reason(
          "best demand ({} CPUs, {} GB per GPU) does not fit; proportional share of {} CPUs per GPU instead",
          found.best.cpus, found.best.mem_gb, share_.cpus);
    } else {
      member.reason = tessel::Reason("neither its best demand ({} CPUs, {} GB per GPU) nor the proportional share "
                                     "({} CPUs per GPU) fits this round",
                                     found.best.cpus, found.best.mem_gb, share_.cpus);
    }
  }

  void tune(std::size_t i) {
    RoundJob& member = round_[i];
    const Profile& found = profile_of(member);
    if (place(i, found.best)) {
      member.reason = best_reason(found);
      return;
    }
    PerGpu demand = found.best;
    if (exceeds(found.best, share_)) {
      demand = share_;
      if (place(i, demand)) {
        member.reason = tessel::Reason(
            "best demand ({} CPUs, {} GB per GPU) does not fit; proportional share of {} CPUs per GPU instead",
            found.best.cpus, found.best.mem_gb, share_.cpus);
        return;
      }
    }
    const int shrunk = shrink_peers(i, demand);
    if (place(i, demand)) {
      member.reason = tessel::Reason("fits at {} CPUs and {} GB per GPU once {} over-provisioned job(s) gave back "
                                     "what they held above the proportional share",
                                     demand.cpus, demand.mem_gb, shrunk);
    } else {
      member.reason = tessel::Reason("does not fit at {} CPUs and {} GB per GPU even with every job on its nodes "
                                     "at most at the proportional share",
                                     demand.cpus, demand.mem_gb);
    }
  }

  // Synergy-TUNE's peer adjustment for job `i`: on the nodes it would go to,
  // jobs above the proportional share give the excess back, the most
  // CPU-rich per GPU first, until the job's demand is covered there.
  // Returns how many jobs shrank.
  int shrink_peers(std::size_t i, PerGpu demand) {
    const RoundJob& member = round_[i];
    int shrunk = 0;
    for (auto [r, gpus] : underused_rooms(member.gpus)) {
      double need_cpus = demand.cpus * gpus - rooms_[r].free_cpus;
      double need_mem_gb = demand.mem_gb * gpus - rooms_[r].free_mem_gb;
      std::vector<std::size_t> peers;
      for (std::size_t p = 0; p < i; ++p) {
        const RoundJob& peer = round_[p];
        if (!peer.placed || !exceeds(peer.demand, share_)) continue;
        if (std::any_of(peer.parts.begin(), peer.parts.end(), [r](auto& part) { return part.first == r; }))
          peers.push_back(p);
      }
      std::stable_sort(peers.begin(), peers.end(), [&](std::size_t a, std::size_t b) {
        const RoundJob &x = round_[a], &y = round_[b];
        if (x.parts.size() != y.parts.size()) return x.parts.size() < y.parts.size();
        if (x.demand.cpus != y.demand.cpus) return x.demand.cpus > y.demand.cpus;
        return x.demand.mem_gb > y.demand.mem_gb;
      });
      for (std::size_t p : peers) {
        if (need_cpus <= 1e-9 && need_mem_gb <= 1e-9) break;
        RoundJob& peer = round_[p];
        const PerGpu lower{std::min(peer.demand.cpus, share_.cpus), std::min(peer.demand.mem_gb, share_.mem_gb)};
        for (auto [q, count] : peer.parts) {
          const double cpus_back = (peer.demand.cpus - lower.cpus) * count;
          const double mem_back = (peer.demand.mem_gb - lower.mem_gb) * count;
          rooms_[q].free_cpus += cpus_back;
          rooms_[q].free_mem_gb += mem_back;
          if (q == r) need_cpus -= cpus_back, need_mem_gb -= mem_back;
        }
        peer.demand = lower;
        peer.reason = tessel::Reason("shrunk to {} CPUs and {} GB per GPU, at most the proportional share, so that "
                                     "job {} fits",
                                     lower.cpus, lower.mem_gb, member.job->spec.id);
        ++shrunk;
      }
    }
    return shrunk;
  }

  // _get_underutilized_servers: one node with all the GPUs a multi-GPU job
  // needs, else GPUs from the nodes with the fewest free GPUs.
  std::vector<std::pair<std::size_t, int>> underused_rooms(int gpus) const {
    if (gpus > 1)
      for (std::size_t r = 0; r < rooms_.size(); ++r)
        if (rooms_[r].free_gpus >= gpus) return {{r, gpus}};
    std::vector<std::pair<std::size_t, int>> rooms;
    for (std::size_t r : fullest_first()) {
      const int here = std::min(gpus, rooms_[r].free_gpus);
      rooms.push_back({r, here});
      gpus -= here;
      if (gpus == 0) break;
    }
    return rooms;
  }

  tessel::Reason best_reason(const Profile& found) const {
    return tessel::Reason("best demand: {} CPUs and {} GB per GPU, {} times the proportional share's throughput",
                          found.best.cpus, found.best.mem_gb, found.speedup);
  }

  // Synergy-OPT's first LP, relaxed.
  void optimise() {
    if (round_.empty()) return;
    tessel::lp::LinearProgram program("synergy opt", tessel::lp::Direction::maximize);
    const int cpu_row = program.add_row(tessel::lp::Bounds::at_most(total_cpus_));
    const int mem_row = program.add_row(tessel::lp::Bounds::at_most(total_mem_gb_));
    std::vector<std::vector<int>> weight(round_.size());
    for (std::size_t j = 0; j < round_.size(); ++j) {
      const Profile& found = profile_of(round_[j]);
      const int one_row = program.add_row(tessel::lp::Bounds::exactly(1));
      const int fair_row = program.add_row(tessel::lp::Bounds::at_least(1));
      for (std::size_t p = 0; p < found.points.size(); ++p) {
        const int y = program.add_column(tessel::lp::Bounds::between(0, 1), found.relative[p]);
        weight[j].push_back(y);
        program.add_term(one_row, y, 1);
        program.add_term(fair_row, y, found.relative[p]);
        program.add_term(cpu_row, y, round_[j].gpus * found.points[p].cpus);
        program.add_term(mem_row, y, round_[j].gpus * found.points[p].mem_gb);
      }
    }
    if (program.solve() != tessel::lp::Outcome::optimal)
      throw tessel::lp::SolverError("synergy opt: the LP has no optimum; the proportional share should always be feasible");
    for (std::size_t j = 0; j < round_.size(); ++j) {
      const Profile& found = profile_of(round_[j]);
      PerGpu demand;
      double relative = 0;
      for (std::size_t p = 0; p < found.points.size(); ++p) {
        const double y = std::clamp(program.value(weight[j][p]), 0.0, 1.0);
        demand.cpus += y * found.points[p].cpus;
        demand.mem_gb += y * found.points[p].mem_gb;
        relative += y * found.relative[p];
      }
      round_[j].demand = demand;
      round_[j].placed = true;
      round_[j].reason = tessel::Reason(
          "Synergy-OPT LP: {} CPUs and {} GB per GPU, {} times the proportional share's throughput (LP estimate)",
          demand.cpus, demand.mem_gb, relative);
    }
  }

  Order order_;
  Mode mode_;
  bool first_fit_;
  std::vector<double> probe_cpus_, probe_mem_gb_;
  tessel::Slot<Profile> profile_;
  // Rebuilt every round.
  const tessel::ClusterState* cluster_ = nullptr;
  PerGpu share_;
  double total_cpus_ = 0, total_mem_gb_ = 0;
  std::vector<NodeRoom> rooms_;
  std::vector<std::size_t> room_of_node_;
  std::vector<RoundJob> round_;
  std::map<int, PerGpu> caps_;  // the per-GPU cap of a job, by its GPU count
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Synergy, allocation, "synergy", "1.0",
                        "Synergy's CPU- and memory-aware allocation: proportional, greedy, TUNE or OPT (LP, GLPK)",
                        kArgs)

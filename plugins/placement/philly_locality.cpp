// philly_locality: Philly's locality-first placement, relaxed as a job waits.
//
// Source: Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for
// DNN Training Workloads" (USENIX ATC'19), on the scheduler of Microsoft's
// Philly: a job asks for its GPUs on as few servers as possible within one
// RDMA domain (a rack); when that cannot be had, the job waits, and the
// longer it has waited the more the scheduler relaxes the constraint, letting
// the job spread over more servers and finally over racks, trading
// locality for queueing delay. The strict form matches the Tiresias
// simulator's model of Philly's YARN scheduler (SymbioticLab/Tiresias,
// simulator/switch.py, ms_yarn_alloc_res: all GPUs from one switch, whole
// servers plus one for the remainder).
//
// The rule as implemented. Let F be the fewest servers the job can ever need
// (its GPUs over the largest server of its type) and w the seconds it has
// waited (view.now() - job.waiting_since; 0 for a running job being
// resized). Every `relax_after_seconds` of waiting relaxes one step:
//   step s = 0, 1, 2, ...: at most min(F * 2^s, GPUs) servers, all in one rack;
//   the step after the one that allows one server per GPU: any servers, any racks.
// At every step the job gets the most local placement free now: one server
// if one can take it (the one with the fewest usable GPUs that can), else the
// rack where it needs the fewest servers (lowest rack id among equals), on
// its roomiest servers with the rest on the tightest-fitting one; across
// racks, the fewest servers cluster-wide. If that placement needs more
// servers (or racks) than the step allows, the job waits, with the reason.
//
// `relax_after_seconds = inf` never relaxes: a job takes the fewest servers
// it can ever need, in one rack, or waits. That is YARN's capacity scheduler
// as Tiresias's simulator models it (ms_yarn_alloc_res, above): a job that
// fits a server stays on one, a larger one takes whole idle servers of one
// switch (plus one for the remainder). Such a placement does not change with
// time, so the plugin is then not time-sensitive.
//
// Simplifications: the paper gives neither the wait before a relaxation nor
// the size of a step; doubling the server count per step and the default
// wait are tessel's choices. Philly's scheduler relaxes by scheduling
// attempts inside YARN; here the wait is measured in seconds.
#include <algorithm>
#include <cmath>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/gpu_choice.hpp>

namespace {

using tessel::gpu_choice::NodeRoom;

constexpr tessel::ArgSpec kArgs[] = {
    {"relax_after_seconds", tessel::ArgType::number, "1800",
     "seconds of waiting before each relaxation step: twice the servers, then any rack; inf: never relax "
     "(YARN's strict locality)"},
};

class PhillyLocality final : public tessel::PlacementPolicy {
 public:
  explicit PhillyLocality(const tessel::PluginContext& context)
      : relax_after_(context.args().number("relax_after_seconds")) {
    if (!(relax_after_ > 0)) throw tessel::ArgumentError("relax_after_seconds", "must be positive");
  }

  // The allowed locality loosens as jobs wait, unless it never does.
  bool time_sensitive() const override { return std::isfinite(relax_after_); }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState& job,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    const int total = tessel::gpu_choice::rooms_for(cluster, want, rooms_);
    if (total < want.gpus) {
      choice.reason = tessel::Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
      return choice;
    }
    const double waited = job.waiting() ? view.now() - job.waiting_since : 0;
    const Locality allowed = allowed_after(waited, tessel::gpu_choice::fewest_nodes_possible(cluster, want), want.gpus);

    // One server, if one can take the job: the most local placement there is.
    const NodeRoom* single = nullptr;
    for (const NodeRoom& room : rooms_)
      if (room.gpus >= want.gpus && (single == nullptr || room.gpus < single->gpus)) single = &room;
    if (single != nullptr) {
      tessel::gpu_choice::take_tightest(cluster, single->node, want, want.gpus, choice.gpus);
      choice.reason = tessel::Reason("on one server, in rack {}", cluster.node(single->node).spec.rack);
      return choice;
    }

    // The rack where the job needs the fewest servers.
    std::sort(rooms_.begin(), rooms_.end(), [&](const NodeRoom& a, const NodeRoom& b) {
      const int rack_a = cluster.node(a.node).spec.rack, rack_b = cluster.node(b.node).spec.rack;
      return rack_a != rack_b ? rack_a < rack_b : a.node < b.node;
    });
    int best_rack = -1, best_servers = 0;
    std::size_t best_begin = 0, best_end = 0;
    for (std::size_t begin = 0; begin < rooms_.size();) {
      const int rack = cluster.node(rooms_[begin].node).spec.rack;
      std::size_t end = begin;
      while (end < rooms_.size() && cluster.node(rooms_[end].node).spec.rack == rack) ++end;
      rack_rooms_.assign(rooms_.begin() + begin, rooms_.begin() + end);
      const int servers = tessel::gpu_choice::fewest_nodes(rack_rooms_, want.gpus);
      if (servers > 0 && (best_rack < 0 || servers < best_servers)) {
        best_rack = rack;
        best_servers = servers;
        best_begin = begin;
        best_end = end;
      }
      begin = end;
    }

    if (best_rack >= 0 && (allowed.any_rack || best_servers <= allowed.servers)) {
      rack_rooms_.assign(rooms_.begin() + best_begin, rooms_.begin() + best_end);
      tessel::gpu_choice::spread_over_fewest_nodes(cluster, want, rack_rooms_, choice.gpus);
      choice.reason = tessel::Reason("on {} servers in rack {}, after {} s of waiting", best_servers, best_rack,
                                     std::floor(waited));
      return choice;
    }
    if (best_rack >= 0) {
      choice.reason = tessel::Reason("waits for locality: {} server(s) in one rack allowed after {} s of waiting, "
                                     "the free GPUs need {}",
                                     allowed.servers, std::floor(waited), best_servers);
      return choice;
    }
    if (!allowed.any_rack && !std::isfinite(relax_after_)) {
      choice.reason = tessel::Reason("waits for locality: no rack can take its {} GPUs, and it never spans racks",
                                     want.gpus);
      return choice;
    }
    if (!allowed.any_rack) {
      choice.reason = tessel::Reason("waits for locality: no rack can take its {} GPUs, and spanning racks "
                                     "is allowed only after {} s of waiting",
                                     want.gpus, allowed.any_rack_after_steps * relax_after_);
      return choice;
    }
    const int servers = tessel::gpu_choice::spread_over_fewest_nodes(cluster, want, rooms_, choice.gpus);
    choice.reason = tessel::Reason("relaxed to any rack after {} s of waiting: on {} servers", std::floor(waited),
                                   servers);
    return choice;
  }

 private:
  struct Locality {
    int servers = 1;       // at most this many servers, in one rack
    bool any_rack = false;  // no limit at all
    int any_rack_after_steps = 0;
  };

  // What `waited` seconds of waiting allow a job of `gpus` GPUs that needs
  // at least `fewest` servers.
  Locality allowed_after(double waited, int fewest, int gpus) const {
    const int first = std::max(fewest, 1);
    int doubling_steps = 0;  // until one server per GPU is allowed
    for (int servers = first; servers < gpus; servers = std::min(gpus, servers * 2)) ++doubling_steps;
    const double steps = std::floor(waited / relax_after_);
    Locality allowed;
    allowed.any_rack_after_steps = doubling_steps + 1;
    allowed.any_rack = steps >= allowed.any_rack_after_steps;
    allowed.servers = first;
    for (int step = 0; step < steps && allowed.servers < gpus; ++step)
      allowed.servers = std::min(gpus, allowed.servers * 2);
    return allowed;
  }

  double relax_after_;
  std::vector<NodeRoom> rooms_;       // reused across calls
  std::vector<NodeRoom> rack_rooms_;  // reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(PhillyLocality, placement, "philly_locality", "1.1",
                        "Philly: fewest servers in one rack; as a job waits, more servers, then any rack",
                        kArgs)

// fgd: Fragmentation Gradient Descent, for clusters that share GPUs.
//
// Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
// Workloads with Fragmentation Gradient Descent" (USENIX ATC'23), and its
// simulator hkust-adsl/kubernetes-scheduler-simulator: the FGD score
// (pkg/simulator/plugin/fgd_score.go), the fragmentation measure
// (pkg/utils/frag.go: NodeGpuShareFragAmount, GetTypicalPods) and the
// experiments' settings (scripts/generate_config_and_run.py).
//
// Target workload. FGD measures fragmentation against the tasks the cluster
// expects: the distribution of task shapes in the workload. A shape is (GPUs,
// milli per GPU, CPUs). As in GetTypicalPods, shapes are counted over the
// workload, sorted by count, and the most frequent ones that together make
// up `popularity_percent` of the tasks (95 in the paper's runs) form the
// target, each weighted by its count renormalized over that set. tessel
// jobs arrive over time, so the workload is every job the core knows
// (view.jobs(): arrived so far, done ones included), updated as jobs arrive.
//
// Fragmentation of a node for one target task m (GPUs g_m, share s_m milli
// each, c_m CPUs), in milli-GPUs:
//   if the node can host m now (at least g_m GPUs with s_m free, and c_m
//   free CPUs): the free milli of its GPUs that have less than s_m free,
//   which m can never use;
//   otherwise: all of its free milli.
// The node's fragmentation is the expectation over the target workload,
// F(n) = sum_m p_m * frag_m(n).
//
// The rule as implemented: for every node that can take the whole job, and
// for every GPU choice there, the increase F(node after placing) - F(node
// before). With `scores = "integer"` (default), as the simulator scores it:
// a node's score is the integer part of 100 * sigmoid(-increase / 1000) for
// its best GPU choice, the highest score wins, and equal scores go to the
// node first in the run's random node order (kube_score.hpp). With
// `scores = "exact"`, the least increase wins, ties to the lowest node id.
// GPU choices: a one-GPU fractional job tries each GPU that fits (a GPU with
// the same free milli as one already tried gives the same increase and is
// skipped) and takes the least increase, the lowest GPU among equals; other
// jobs take the node's tightest GPUs, which for whole GPUs are its
// lowest-numbered free ones. A job no single node can take is spread over
// the fewest nodes (roomiest first, the rest on the tightest fit): FGD
// places pods on one node and has no rule for this case; with
// `span_nodes = false` it waits instead, as a pod does.
//
// CPU-only tasks (jobs of share 0, openb's CPU-only pods kept with
// `cpu_only = "keep"`) count in the target as the simulator counts them:
// all of a node's free milli is fragment to them, whether their CPUs fit or
// not (XL and XR in frag.go). That adds the same amount to every choice for
// a job, so they change no ordering of the choices but shift the popularity
// cut. A CPU-only job itself goes where its CPUs cost the GPU tasks least.
//
// The rule for equal choices matters: CPU-only jobs leave the expected
// fragmentation unchanged on many nodes, so ties abound. On the openb runs
// of experiments/fgd, the exact rule with lowest-id ties allocates 90.7% of
// the GPUs, the integer scores in the run's node order 95.5%.
//
// Simplifications: the simulator picks, on the chosen node, the first GPU
// with the node's best integer score; here the GPU with the least exact
// increase. Memory decides only whether a node fits, as in the simulator's
// frag measure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/gpu_choice.hpp>
#include <tessel/kube_score.hpp>

namespace {

using tessel::gpu_choice::NodeRoom;

constexpr tessel::ArgSpec kArgs[] = {
    {"popularity_percent", tessel::ArgType::number, "95",
     "the target workload: the most frequent task shapes that make up this percentage of all jobs"},
    {"span_nodes", tessel::ArgType::boolean, "true", tessel::kube_score::kSpanNodesHelp},
    {"scores", tessel::ArgType::string, "\"integer\"",
     "integer: the simulator's 100 * sigmoid(-increase / 1000), ties in the run's node order; exact: the least "
     "increase, ties to the lowest node id",
     "integer|exact"},
};

// A task shape of the target workload, and its probability there.
struct TargetTask {
  int gpus = 1;
  int milli = 1000;
  double cpus = 0;
  double weight = 0;
};

// The target workload, kept up to date with the jobs the core knows. Jobs
// only ever join view.jobs() and never change their request, so counting the
// new ones keeps it a function of the view.
class TargetWorkload {
 public:
  explicit TargetWorkload(double popularity) : popularity_(popularity) {}

  void update(std::span<const tessel::JobState* const> jobs) {
    if (jobs.size() == counted_) return;
    if (jobs.size() < counted_) {  // another set of jobs altogether
      counts_.clear();
      counted_ = 0;
    }
    for (; counted_ < jobs.size(); ++counted_) {
      const tessel::JobSpec& spec = jobs[counted_]->spec;
      ++counts_[{spec.gpus, spec.gpu_milli, spec.cpus}];
    }
    select_popular();
  }

  // By share per GPU, ascending.
  std::span<const TargetTask> tasks() const { return tasks_; }
  // Changes whenever the target does.
  std::uint64_t version() const { return version_; }

  // Expected fragmentation of a node whose GPUs have `free` milli free
  // (ascending) and which has `cpus` CPUs free.
  double fragmentation(std::span<const int> free, double cpus) const {
    int total = 0;
    for (int milli : free) total += milli;
    double expected = 0;
    int unusable = 0;  // free milli on GPUs with less than the task's share free
    std::size_t usable_from = 0;
    for (const TargetTask& task : tasks_) {
      if (task.milli == 0) {  // a CPU-only task uses no GPU: all free milli is fragment to it (XL/XR in frag.go)
        expected += task.weight * total;
        continue;
      }
      while (usable_from < free.size() && free[usable_from] < task.milli) unusable += free[usable_from++];
      const bool hostable = static_cast<int>(free.size() - usable_from) >= task.gpus && cpus + 1e-9 >= task.cpus;
      expected += task.weight * (hostable ? unusable : total);
    }
    return expected;
  }

 private:
  using Shape = std::tuple<int, int, double>;  // GPUs, milli per GPU, CPUs

  void select_popular() {
    std::vector<std::pair<Shape, std::size_t>> shapes(counts_.begin(), counts_.end());
    // Most frequent first; among equals the larger shape first, as the simulator orders them.
    std::sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
      if (a.second != b.second) return a.second > b.second;
      const auto& [ga, ma, ca] = a.first;
      const auto& [gb, mb, cb] = b.first;
      return std::tie(ca, ma, ga) > std::tie(cb, mb, gb);
    });
    const double wanted = popularity_ / 100.0 * static_cast<double>(counted_);
    std::size_t kept = 0;
    double covered = 0;
    while (kept < shapes.size() && (kept == 0 || covered < wanted)) covered += shapes[kept++].second;
    tasks_.clear();
    for (std::size_t i = 0; i < kept; ++i) {
      const auto& [gpus, milli, cpus] = shapes[i].first;
      tasks_.push_back({gpus, milli, cpus, shapes[i].second / covered});
    }
    std::stable_sort(tasks_.begin(), tasks_.end(),
                     [](const TargetTask& a, const TargetTask& b) { return a.milli < b.milli; });
    ++version_;
  }

  double popularity_;
  std::map<Shape, std::size_t> counts_;
  std::size_t counted_ = 0;
  std::vector<TargetTask> tasks_;
  std::uint64_t version_ = 0;
};

class Fgd final : public tessel::PlacementPolicy {
 public:
  explicit Fgd(const tessel::PluginContext& context)
      : seed_(context.seed()), target_(context.args().number("popularity_percent")),
        span_nodes_(context.args().boolean("span_nodes")),
        integer_scores_(context.args().string("scores") == "integer") {
    const double popularity = context.args().number("popularity_percent");
    if (!(popularity > 0 && popularity <= 100))
      throw tessel::ArgumentError("popularity_percent", "must be in (0, 100]");
  }

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState&,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    const int total = tessel::gpu_choice::rooms_for(cluster, want, rooms_);
    if (total < want.gpus) {
      choice.reason = tessel::gpu_choice::too_few_gpus(want, total);
      return choice;
    }
    target_.update(view.jobs());

    const std::size_t slot = shape_slot(want);
    Candidate best;
    tessel::kube_score::HighestScore highest(seed_);
    if (node_answers_.size() < cluster.nodes().size()) node_answers_.resize(cluster.nodes().size());
    for (const NodeRoom& room : rooms_) {
      if (room.gpus < want.gpus) continue;
      const NodeAnswer answer = best_on(cluster, room.node, want, slot);
      if (integer_scores_) {
        node_answers_[room.node] = answer;
        highest.offer(room.node, score_of(answer.increase));
      } else if (!best.found || answer.increase < best.increase) {
        best = {true, answer.increase, room.node, answer.gpu};
      }
    }
    if (highest.found()) {
      const NodeAnswer& answer = node_answers_[highest.node()];
      best = {true, answer.increase, highest.node(), answer.gpu};
    }
    if (best.found) {
      if (want.gpus == 1 && want.gpu_milli < 1000) {
        choice.gpus.push_back(cluster.node(best.node).first_gpu + static_cast<tessel::GpuId>(best.gpu));
      } else {
        tessel::gpu_choice::take_tightest(cluster, best.node, want, want.gpus, choice.gpus);
      }
      char increase[32];
      std::snprintf(increase, sizeof increase, "%+.1f", best.increase);
      std::string where = "node " + cluster.node(best.node).spec.name;
      if (want.gpus == 1) where += ", GPU " + std::to_string(first_index(cluster, choice));
      std::string why = "fgd: " + where + ": expected fragmentation changes by " + increase + " milli-GPUs";
      if (!integer_scores_) {
        why += ", the least of any choice";
      } else {
        why += " (score " + std::to_string(highest.score()) + " of 100), the highest";
        if (highest.tied() > 1)
          why += ", first of " + std::to_string(highest.tied()) + " equal in the run's node order";
      }
      choice.reason = tessel::Reason::text(std::move(why));
      return choice;
    }
    return tessel::gpu_choice::across_nodes(cluster, want, rooms_, span_nodes_);
  }

 private:
  struct Candidate {
    bool found = false;
    double increase = 0;
    tessel::NodeId node = 0;
    int gpu = 0;  // index on the node, for one-GPU fractional jobs
  };

  // A node's best choice for one job shape: the least increase, and the GPU
  // (index on the node) for one-GPU fractional jobs.
  struct NodeAnswer {
    double increase = 0;
    int gpu = 0;
    std::uint64_t stamp = 0;  // the NodeMemo stamp it was computed at; 0: none
  };

  // What was last computed for a node: valid while its GPUs and CPUs are as
  // recorded and the target workload has not changed. The core asks for many
  // jobs per round, on states that differ in a few nodes, so most nodes are
  // answered from memory; the answers are exactly what recomputing would give.
  // It is a cache, not plugin state: checked against the node's exact state,
  // it cannot change a decision, so it needs no node slot to travel with
  // copies of the cluster.
  struct NodeMemo {
    std::vector<int> free;  // free milli, by GPU index
    double cpus = -1;
    std::uint64_t target = 0;
    std::uint64_t stamp = 0;  // new whenever the record changes
    double before = 0;        // F(node)
  };

  // A small index for the job's shape, under which nodes keep their answers
  // for it; kNoSlot for shapes beyond the first kMaxSlots.
  static constexpr std::size_t kMaxSlots = 512, kNoSlot = static_cast<std::size_t>(-1);
  std::size_t shape_slot(const tessel::Resources& want) {
    const auto key = std::make_tuple(want.gpus, want.gpu_milli, want.cpus);
    if (const auto it = slots_.find(key); it != slots_.end()) return it->second;
    if (slots_.size() == kMaxSlots) return kNoSlot;
    answers_.emplace_back();
    return slots_[key] = answers_.size() - 1;
  }

  NodeAnswer best_on(const tessel::ClusterState& cluster, tessel::NodeId id, const tessel::Resources& want,
                     std::size_t slot) {
    if (memos_.size() < cluster.nodes().size()) memos_.resize(cluster.nodes().size());
    NodeMemo& memo = memos_[id];
    const tessel::Node& node = cluster.node(id);
    const std::span<const tessel::Gpu> gpus = cluster.gpus_of(id);
    bool same = memo.target == target_.version() && memo.cpus == node.free_cpus && memo.free.size() == gpus.size();
    for (std::size_t i = 0; same && i < gpus.size(); ++i) same = memo.free[i] == gpus[i].free_milli();
    if (!same) {
      memo.free.resize(gpus.size());
      for (std::size_t i = 0; i < gpus.size(); ++i) memo.free[i] = gpus[i].free_milli();
      memo.cpus = node.free_cpus;
      memo.target = target_.version();
      memo.stamp = ++stamps_;
      sort_free(memo);
      memo.before = target_.fragmentation(free_, memo.cpus);
    }
    NodeAnswer* kept = nullptr;
    if (slot != kNoSlot) {
      std::vector<NodeAnswer>& answers = answers_[slot];
      if (answers.size() < cluster.nodes().size()) answers.resize(cluster.nodes().size());
      kept = &answers[id];
      if (kept->stamp == memo.stamp) return *kept;
    }
    if (same) sort_free(memo);
    NodeAnswer answer = compute(memo, want);
    answer.stamp = memo.stamp;
    if (kept != nullptr) *kept = answer;
    return answer;
  }

  // order_ and free_: the node's GPUs by free milli, ascending; equal ones by index.
  void sort_free(const NodeMemo& memo) {
    order_.resize(memo.free.size());
    for (std::size_t i = 0; i < memo.free.size(); ++i) order_[i] = {memo.free[i], static_cast<int>(i)};
    std::sort(order_.begin(), order_.end());
    free_.resize(order_.size());
    for (std::size_t i = 0; i < order_.size(); ++i) free_[i] = order_[i].first;
  }

  // The node's best GPU choice for the job, from order_ and free_.
  NodeAnswer compute(const NodeMemo& memo, const tessel::Resources& want) {
    const double cpus_after = memo.cpus - want.cpus;
    NodeAnswer best;
    bool found = false;
    if (want.gpus == 1 && want.gpu_milli < 1000) {
      for (std::size_t i = 0; i < order_.size(); ++i) {
        if (order_[i].first < want.gpu_milli) continue;
        if (i > 0 && order_[i].first == order_[i - 1].first) continue;  // same state after, same increase
        after_ = free_;
        after_[i] -= want.gpu_milli;
        // Keep it ascending: the lowered value moves left.
        for (std::size_t j = i; j > 0 && after_[j] < after_[j - 1]; --j) std::swap(after_[j], after_[j - 1]);
        const double increase = target_.fragmentation(after_, cpus_after) - memo.before;
        const int gpu = order_[i].second;
        if (!found || increase < best.increase || (increase == best.increase && gpu < best.gpu)) {
          best = {increase, gpu, 0};
          found = true;
        }
      }
      return best;
    }
    // The tightest GPUs that fit, as take_tightest chooses them.
    after_ = free_;
    int taken = 0;
    for (std::size_t i = 0; i < after_.size() && taken < want.gpus; ++i)
      if (after_[i] >= want.gpu_milli) {
        after_[i] -= want.gpu_milli;
        ++taken;
      }
    std::sort(after_.begin(), after_.end());
    best.increase = target_.fragmentation(after_, cpus_after) - memo.before;
    return best;
  }

  // The simulator's score: sigmoid of the decrease in GPUs, scaled to 0..100, truncated.
  static std::int64_t score_of(double increase) {
    return static_cast<std::int64_t>(100.0 / (1.0 + std::exp(increase / 1000.0)));
  }

  static int first_index(const tessel::ClusterState& cluster, const tessel::PlacementChoice& choice) {
    const tessel::GpuId gpu = choice.gpus.front();
    return static_cast<int>(gpu - cluster.node(cluster.gpu(gpu).node).first_gpu);
  }

  std::uint64_t seed_;
  TargetWorkload target_;
  bool span_nodes_;
  bool integer_scores_;
  std::vector<NodeAnswer> node_answers_;  // by node, this call's; reused across calls
  std::vector<NodeMemo> memos_;                                  // by node
  std::map<std::tuple<int, int, double>, std::size_t> slots_;    // job shape -> slot
  std::vector<std::vector<NodeAnswer>> answers_;                 // [slot][node]
  std::uint64_t stamps_ = 0;
  std::vector<NodeRoom> rooms_;             // reused across calls
  std::vector<std::pair<int, int>> order_;  // free milli, GPU index
  std::vector<int> free_, after_;           // free milli, ascending
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Fgd, placement, "fgd", "2.0",
                        "Fragmentation Gradient Descent (ATC'23): the node and GPU whose expected fragmentation "
                        "grows least, for the workload's task shapes",
                        kArgs)

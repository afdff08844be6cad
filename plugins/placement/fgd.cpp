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
// before); the job goes where the increase is least (it may be negative).
// GPU choices: a one-GPU fractional job tries each GPU that fits (a GPU with
// the same free milli as one already tried gives the same increase and is
// skipped); other jobs take the node's tightest GPUs, which for whole GPUs
// are its lowest-numbered free ones. Ties go to the lowest node id, then the
// lowest GPU. A job no single node can take is spread over the fewest nodes
// (roomiest first, the rest on the tightest fit): FGD places pods on one node
// and has no rule for this case.
//
// Simplifications: the simulator scores a node by sigmoid(-increase / 1000)
// scaled to an integer 0..100 and lets the Kubernetes scheduler pick at
// random among the best scores; here the exact least increase wins, ties by
// id. Its target counts CPU-only pods too; tessel jobs always have a GPU (a
// CPU-only task would add the same multiple of the free milli to every node,
// which changes no choice, but it does shift the popularity cut). Memory
// decides only whether a node fits, as in the simulator's frag measure.
#include <algorithm>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <tessel/tessel.hpp>

#include "gpu_choice.hpp"

namespace {

using tessel::gpu_choice::NodeRoom;

const tessel::ArgSpec kArgs[] = {
    {"popularity_percent", tessel::ArgType::number, "95",
     "the target workload: the most frequent task shapes that make up this percentage of all jobs"},
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

  // Expected fragmentation of a node whose GPUs have `free` milli free
  // (ascending) and which has `cpus` CPUs free.
  double fragmentation(std::span<const int> free, double cpus) const {
    int total = 0;
    for (int milli : free) total += milli;
    double expected = 0;
    int unusable = 0;  // free milli on GPUs with less than the task's share free
    std::size_t usable_from = 0;
    for (const TargetTask& task : tasks_) {
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
  }

  double popularity_;
  std::map<Shape, std::size_t> counts_;
  std::size_t counted_ = 0;
  std::vector<TargetTask> tasks_;
};

class Fgd final : public tessel::PlacementPolicy {
 public:
  explicit Fgd(const tessel::PluginContext& context) : target_(context.args().number("popularity_percent")) {
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
      choice.reason = want.gpu_milli < 1000
                          ? tessel::Reason("needs {} GPUs with {} milli free, {} usable in the cluster", want.gpus,
                                           want.gpu_milli, total)
                          : tessel::Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
      return choice;
    }
    target_.update(view.jobs());

    Candidate best;
    for (const NodeRoom& room : rooms_)
      if (room.gpus >= want.gpus) consider(cluster, room.node, want, best);
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
      choice.reason = tessel::Reason::text("fgd: " + where + ": expected fragmentation changes by " + increase +
                                           " milli-GPUs, the least of any choice");
      return choice;
    }
    const int nodes = tessel::gpu_choice::spread_over_fewest_nodes(cluster, want, rooms_, choice.gpus);
    choice.reason = tessel::Reason("no node can take all {} GPUs: spread over {} nodes, the fewest possible",
                                   want.gpus, nodes);
    return choice;
  }

 private:
  struct Candidate {
    bool found = false;
    double increase = 0;
    tessel::NodeId node = 0;
    int gpu = 0;  // index on the node, for one-GPU fractional jobs
  };

  // Updates `best` with the node's best GPU choice.
  void consider(const tessel::ClusterState& cluster, tessel::NodeId id, const tessel::Resources& want,
                Candidate& best) {
    const tessel::Node& node = cluster.node(id);
    const std::span<const tessel::Gpu> gpus = cluster.gpus_of(id);
    // The node's GPUs by free milli, ascending; equal ones by index.
    order_.resize(gpus.size());
    for (std::size_t i = 0; i < gpus.size(); ++i) order_[i] = {gpus[i].free_milli(), static_cast<int>(i)};
    std::sort(order_.begin(), order_.end());
    free_.resize(order_.size());
    for (std::size_t i = 0; i < order_.size(); ++i) free_[i] = order_[i].first;
    const double before = target_.fragmentation(free_, node.free_cpus);
    const double cpus_after = node.free_cpus - want.cpus;

    auto offer = [&](double increase, int gpu) {
      if (!best.found || increase < best.increase ||
          (increase == best.increase && id == best.node && gpu < best.gpu)) {
        best = {true, increase, id, gpu};
      }
    };
    if (want.gpus == 1 && want.gpu_milli < 1000) {
      for (std::size_t i = 0; i < order_.size(); ++i) {
        if (order_[i].first < want.gpu_milli) continue;
        if (i > 0 && order_[i].first == order_[i - 1].first) continue;  // same state after, same increase
        after_ = free_;
        after_[i] -= want.gpu_milli;
        // Keep it ascending: the lowered value moves left.
        for (std::size_t j = i; j > 0 && after_[j] < after_[j - 1]; --j) std::swap(after_[j], after_[j - 1]);
        offer(target_.fragmentation(after_, cpus_after) - before, order_[i].second);
      }
      return;
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
    offer(target_.fragmentation(after_, cpus_after) - before, 0);
  }

  static int first_index(const tessel::ClusterState& cluster, const tessel::PlacementChoice& choice) {
    const tessel::GpuId gpu = choice.gpus.front();
    return static_cast<int>(gpu - cluster.node(cluster.gpu(gpu).node).first_gpu);
  }

  TargetWorkload target_;
  std::vector<NodeRoom> rooms_;                // reused across calls
  std::vector<std::pair<int, int>> order_;     // free milli, GPU index
  std::vector<int> free_, after_;              // free milli, ascending
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(Fgd, placement, "fgd", "1.0",
                        "Fragmentation Gradient Descent (ATC'23): the node and GPU whose expected fragmentation "
                        "grows least, for the workload's task shapes",
                        kArgs)

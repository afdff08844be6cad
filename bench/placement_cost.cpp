// bench/placement_cost: what one placement call costs on a large cluster.
//
// A cluster shaped like the Alibaba 2023 GPU trace's (1,213 nodes: 2-, 4- and
// 8-GPU nodes, ~6,200 GPUs) and 8,000 known jobs with the trace's mix of
// shapes (fractional single-GPU tasks most of all). Each placement plugin
// fills the cluster by placing jobs one after another, each placed job
// taking its GPUs before the next call (as in a round); at 50% and 90% of
// the GPUs allocated, it is then asked to place each of 2,000 jobs on that
// state (the core's hypothetical calls: nothing is assigned). The bench
// prints the mean time per call while filling to 50%, at 50% and 90%, and at
// 50% when every call knows one more job than the last (as if a job had
// arrived since the last call: fgd then updates its target workload and
// recomputes every node, its worst case).
//
// The shapes and node mix are synthetic, written after the trace's counts,
// so the bench needs no data files.
#include <chrono>
#include <cstdio>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "tessel/tessel.hpp"

using namespace tessel;

namespace {

class FlatRate final : public ThroughputModel {
 public:
  std::string_view name() const override { return "flat"; }
  double rate(const JobSpec&, const Shape&) const override { return 1; }
};

std::vector<NodeSpec> openb_like_nodes() {
  struct Group {
    int count, gpus;
    double cpus;
  };
  // After openb_node_list_gpu_node.csv: node counts by GPUs and CPUs.
  const Group groups[] = {{24, 1, 8}, {520, 2, 96}, {54, 4, 64}, {615, 8, 96}};
  std::vector<NodeSpec> nodes;
  for (const Group& group : groups)
    for (int i = 0; i < group.count; ++i) {
      const int id = static_cast<int>(nodes.size());
      nodes.push_back({"node" + std::to_string(id), "gpu", group.gpus, group.cpus, 512, id / 32});
    }
  return nodes;
}

std::deque<JobState> openb_like_jobs(std::size_t count) {
  struct Shape {
    int gpus, milli;
    double cpus, weight;
  };
  // After openb_pod_list_default.csv: the most frequent (CPUs, GPUs, milli) shapes.
  const Shape shapes[] = {{1, 810, 3.152, 1047}, {1, 1000, 11.3, 874}, {1, 1000, 11.4, 599}, {1, 1000, 3.152, 470},
                          {1, 470, 11.908, 388}, {1, 470, 8, 360},     {1, 1000, 12, 326},   {1, 1000, 18.708, 255},
                          {1, 650, 11.908, 237}, {1, 320, 4, 232},     {2, 1000, 16, 150},   {4, 1000, 32, 80},
                          {8, 1000, 64, 60}};
  std::vector<double> weights;
  for (const Shape& shape : shapes) weights.push_back(shape.weight);
  Rng rng(7);
  std::deque<JobState> jobs;
  for (std::size_t i = 0; i < count; ++i) {
    const Shape& shape = shapes[rng.weighted(weights)];
    JobState& job = jobs.emplace_back();
    job.spec.id = static_cast<JobId>(i);
    job.spec.gpus = job.spec.min_gpus = job.spec.max_gpus = shape.gpus;
    job.spec.gpu_milli = shape.milli;
    job.spec.cpus = shape.cpus;
    job.spec.model = i % 3 == 0 ? "vgg16" : "resnet50";
    job.status = JobStatus::queued;
  }
  return jobs;
}

}  // namespace

int main() {
  const std::size_t known_jobs = 8000, asked = 2000;
  std::deque<JobState> jobs = openb_like_jobs(known_jobs);
  std::vector<JobState*> all;
  for (JobState& job : jobs) all.push_back(&job);
  const SchedulerSettings settings;
  const FlatRate model;
  PluginRegistry registry;

  std::printf("%zu nodes, %zu known jobs; mean microseconds per place() call\n", openb_like_nodes().size(),
              known_jobs);
  std::printf("%-16s %12s %12s %12s %14s\n", "plugin", "filling", "at 50% full", "at 90% full", "50%, arrivals");
  for (const char* name : {"first_fit", "consolidated", "best_fit", "spread", "philly_locality", "tiresias_skew", "fgd",
                           "gpu_packing", "gpu_clustering", "dot_product"}) {
    const PluginEntry& entry = registry.find(PluginKind::placement, name);
    StageConfig stage;
    stage.kind = PluginKind::placement;
    stage.plugin = name;
    Diagnostics diagnostics;
    const PluginArgs args = check_arguments(stage, entry, {}, diagnostics);
    diagnostics.raise_if_any();
    SlotRegistry slots;
    PluginPtr<Plugin> plugin = PluginRegistry::create(entry, PluginContext(args, 1, slots));
    auto& placement = dynamic_cast<PlacementPolicy&>(*plugin);

    ClusterState cluster(openb_like_nodes());
    const double capacity_milli = 1000.0 * cluster.installed_gpus();
    double used_milli = 0;
    std::size_t next = 0;
    ClusterState arrivals_cluster;
    std::printf("%-16s", name);
    for (const double fill : {0.5, 0.9}) {
      // Place jobs one by one until the cluster is this full.
      const std::size_t first = next;
      const auto filling = std::chrono::steady_clock::now();
      while (used_milli < fill * capacity_milli && next < known_jobs) {
        JobState& job = jobs[next++];
        const SchedulerView view(settings, cluster, model, all, {}, {}, {}, 0);
        const PlacementChoice choice = placement.place(view, job, job.spec.request());
        if (!choice.placed()) continue;
        cluster.assign(job.spec.id, Allocation{choice.gpus, job.spec.gpu_milli, job.spec.cpus, 0, {}});
        used_milli += job.spec.gpus * job.spec.gpu_milli;
      }
      const std::chrono::duration<double, std::micro> filled = std::chrono::steady_clock::now() - filling;
      if (fill == 0.5) std::printf(" %9.1f us", filled.count() / static_cast<double>(next - first));
      const SchedulerView view(settings, cluster, model, all, {}, {}, {}, 0);
      std::size_t placed = 0;
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < asked; ++i) {
        const JobState& job = jobs[(next + i) % known_jobs];
        placed += placement.place(view, job, job.spec.request()).placed();
      }
      const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
      std::printf(" %9.1f us", spent.count() / asked);
      std::fflush(stdout);
      (void)placed;
      if (fill == 0.5) arrivals_cluster = cluster;
    }
    // Back at 50%: every call knows one job more than the last (a fresh
    // instance, so that the known jobs only grow, as they do in a run).
    PluginPtr<Plugin> fresh = PluginRegistry::create(entry, PluginContext(args, 1, slots));
    auto& fresh_placement = dynamic_cast<PlacementPolicy&>(*fresh);
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < asked; ++i) {
      const std::span<JobState* const> known(all.data(), known_jobs - asked + i + 1);
      const SchedulerView view(settings, arrivals_cluster, model, known, {}, {}, {}, 0);
      const JobState& job = jobs[i];
      fresh_placement.place(view, job, job.spec.request());
    }
    const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
    std::printf(" %11.1f us", spent.count() / asked);
    std::printf("\n");
  }
  return 0;
}

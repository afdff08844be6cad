// The placement plugins best_fit, spread, philly_locality, tiresias_skew,
// fgd, gpu_packing, gpu_clustering and dot_product, and the admission
// plugins load_based, vc_quota and max_queue, each on
// a hand-built case whose decision and reason are worked out in the test.
//
// Placement plugins are asked directly, on a cluster set up by hand (what the
// core does on every call); admission plugins run whole simulations, checked
// after every round.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// ------------------------------------------------------------- placement

// A placement plugin, created as the loader creates it: arguments checked
// against its schema, defaults filled in.
class Placer {
 public:
  explicit Placer(const std::string& name, toml::table arguments = {}, std::uint64_t seed = 1) {
    const PluginEntry& entry = registry_.find(PluginKind::placement, name);
    StageConfig stage;
    stage.kind = PluginKind::placement;
    stage.plugin = name;
    stage.args = std::move(arguments);
    Diagnostics diagnostics;
    args_ = check_arguments(stage, entry, {}, diagnostics);
    REQUIRE(diagnostics.empty());
    plugin_ = PluginRegistry::create(entry, PluginContext(args_, seed, slots_));
    policy_ = dynamic_cast<PlacementPolicy*>(plugin_.get());
    REQUIRE(policy_ != nullptr);
  }

  PlacementPolicy& policy() { return *policy_; }

 private:
  PluginRegistry registry_;
  SlotRegistry slots_;
  PluginArgs args_;
  PluginPtr<Plugin> plugin_;
  PlacementPolicy* policy_ = nullptr;
};

// A cluster and the jobs the core knows, set up by hand.
class Scene {
 public:
  // `racks[i]` is node i's rack; every node has `gpus` GPUs, named n0, n1, ...
  Scene(int nodes, int gpus, std::vector<int> racks = {}, double cpus = 32) {
    std::vector<NodeSpec> specs;
    for (int i = 0; i < nodes; ++i)
      specs.push_back({"n" + std::to_string(i), "v100", gpus, cpus, 256, racks.empty() ? 0 : racks[i]});
    cluster = ClusterState(specs);
  }

  // A job the core knows, waiting since `waiting_since`.
  JobState& job(int gpus, int gpu_milli = 1000, const std::string& model = "", double waiting_since = 0,
                double cpus = 0) {
    JobState& job = jobs_.emplace_back();
    job.spec.id = static_cast<JobId>(all_.size());
    job.spec.gpus = job.spec.min_gpus = job.spec.max_gpus = gpus;
    job.spec.gpu_milli = gpu_milli;
    job.spec.model = model;
    job.spec.cpus = cpus;
    job.status = JobStatus::queued;
    job.waiting_since = waiting_since;
    all_.push_back(&job);
    return job;
  }

  // Some other job holds `milli` of each of these GPUs.
  void occupy(std::vector<GpuId> gpus, int milli = 1000) {
    cluster.assign(static_cast<JobId>(1000 + ++occupants_), Allocation{std::move(gpus), milli, 0, 0});
  }

  PlacementChoice place(Placer& placer, const JobState& job, double now = 0) {
    const SchedulerView view(settings_, cluster, model_, all_, {}, {}, {}, now);
    return placer.policy().place(view, job, job.spec.request());
  }

  ClusterState cluster;

 private:
  SchedulerSettings settings_;
  FlatRate model_;
  std::deque<JobState> jobs_;
  std::vector<JobState*> all_;
  int occupants_ = 0;
};

std::set<NodeId> nodes_of(const ClusterState& cluster, const std::vector<GpuId>& gpus) {
  std::set<NodeId> nodes;
  for (GpuId gpu : gpus) nodes.insert(cluster.gpu(gpu).node);
  return nodes;
}

// ------------------------------------------------------------- simulation

// Runs the experiment, checking `each_round` after every round.
RunResults run_observed(const TempDir& dir, const std::string& toml,
                        const std::function<void(const Scheduler&)>& each_round) {
  const ExperimentConfig config = load_experiment(dir.write("experiment.toml", toml));
  PluginRegistry registry;
  Simulation simulation(config, registry);
  simulation.observe_rounds([&](double, const Scheduler& scheduler, const RoundOutcome&) { each_round(scheduler); });
  return simulation.run();
}

std::string experiment(int nodes, int gpus_per_node, const std::string& admission,
                       const std::string& placement = R"({ plugin = "first_fit" })") {
  return "[cluster]\nnodes = " + std::to_string(nodes) + "\ngpus_per_node = " + std::to_string(gpus_per_node) +
         R"(
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 100
admission = )" + admission + R"(
allocation = { plugin = "fifo" }
placement = )" + placement + R"(
[output]
decisions = true
)";
}

// The first decision of `code` on `job`, as "time code: reason".
std::string decision(const RunResults& results, JobId job, const std::string& code) {
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.code == code) return std::to_string(static_cast<int>(d.time)) + " " + code + ": " + d.reason;
  return "no " + code + " decision for job " + std::to_string(job);
}

// GPU demand of the admitted jobs that are not done, in GPUs.
double admitted_demand(const Scheduler& scheduler, const std::string& vc = "*") {
  double demand = 0;
  for (const JobState* job : scheduler.jobs())
    if (job->active() && (vc == "*" || job->spec.vc == vc)) demand += job->spec.gpus * job->spec.gpu_milli / 1000.0;
  return demand;
}

}  // namespace

// ================================================================ best_fit

// The node each of `seeds` sends `job` to.
std::set<NodeId> nodes_over_seeds(Scene& scene, const std::string& plugin, const JobState& job,
                                  toml::table arguments = {}) {
  std::set<NodeId> nodes;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Placer placer(plugin, arguments, seed);
    const PlacementChoice choice = scene.place(placer, job);
    REQUIRE(choice.placed());
    nodes.insert(scene.cluster.gpu(choice.gpus[0]).node);
  }
  return nodes;
}

TEST_CASE("best_fit scores what a node keeps free, CPU and GPU weighted, as FGD's simulator does") {
  // Nodes of 4 GPUs and 32 CPUs (the largest node: 32 CPUs, 4,000 milli).
  // n0: GPUs 0, 1 busy, 32 CPUs free. n1: GPU 4 busy with 24 CPUs, 8 free.
  // A job of 1 GPU and 8 CPUs; score = int(100 * (1 - left)):
  //   n0: left = 0.5 * 24/32 + 0.5 * 1000/4000 = 0.5    -> 50
  //   n1: left = 0.5 *  0/32 + 0.5 * 2000/4000 = 0.25   -> 75   best
  // With cpu_weight = 0 only GPUs count: n0 1000/4000 -> 75, n1 2000/4000 -> 50.
  Scene scene(2, 4);
  scene.occupy({0, 1});
  scene.cluster.assign(2001, Allocation{{4}, 1000, 24, 0, {}});
  const JobState& job = scene.job(1, 1000, "", 0, 8);
  Placer placer("best_fit");
  PlacementChoice choice = scene.place(placer, job);
  CHECK(choice.gpus == std::vector<GpuId>{5});
  CHECK(choice.reason.str() == "best fit: node n1 scores 75 of 100 (what it keeps free), the highest");
  Placer gpus_only("best_fit", toml::table{{"cpu_weight", 0.0}});
  choice = scene.place(gpus_only, job);
  CHECK(choice.gpus == std::vector<GpuId>{2});
  CHECK(choice.reason.str() == "best fit: node n0 scores 75 of 100 (what it keeps free), the highest");
}

TEST_CASE("best_fit puts a fractional job on the tightest GPU of the best node; equal scores are drawn") {
  Scene scene(3, 2);           // GPUs 0, 1 on n0; 2, 3 on n1; 4, 5 on n2; 32 CPUs each
  scene.occupy({0}, 600);      // n0: 400 + 1000 free
  scene.occupy({2}, 500);      // n1: 500 + 1000 free
  scene.occupy({4, 5}, 600);   // n2: 400 + 400 free
  // 300 milli, no CPUs; left = 0.5 * 32/32 + 0.5 * (free - 300) / 2000:
  //   n0 0.775 -> 22, n1 0.8 -> 19 or 20, n2 0.625 -> 37 (best; its GPUs are equal: the lower)
  Placer placer("best_fit");
  PlacementChoice choice = scene.place(placer, scene.job(1, 300));
  CHECK(choice.gpus == std::vector<GpuId>{4});
  // 450 milli fits only on n0 and n1: 0.7375 -> 26 and 0.7625 -> 23. On n0,
  // the tightest GPU that fits: not GPU 0 (400 free), so GPU 1.
  choice = scene.place(placer, scene.job(1, 450));
  CHECK(choice.gpus == std::vector<GpuId>{1});
  // Two idle nodes score the same: the seeds draw both.
  Scene idle(2, 4);
  CHECK(nodes_over_seeds(idle, "best_fit", idle.job(1)) == std::set<NodeId>{0, 1});
}

TEST_CASE("a job no node can take whole spreads with span_nodes, and waits without") {
  Scene scene(3, 4);  // GPUs 0-3 on n0, 4-7 on n1, 8-11 on n2
  scene.occupy({0, 1, 2});
  scene.occupy({4});
  const JobState& job = scene.job(5);
  for (const char* plugin : {"best_fit", "gpu_packing", "gpu_clustering", "dot_product", "fgd", "spread"}) {
    CAPTURE(plugin);
    toml::table arguments;
    if (std::string(plugin) == "spread") arguments.insert("unit", "node");
    Placer spanning(plugin, arguments);
    const PlacementChoice spread = scene.place(spanning, job);
    CHECK(spread.gpus.size() == 5);
    arguments.insert("span_nodes", false);
    Placer one_node(plugin, arguments);
    const PlacementChoice waits = scene.place(one_node, job);
    CHECK_FALSE(waits.placed());
    CHECK(waits.reason.str() == "no node can take all 5 GPUs, and the job may not span nodes");
  }
  Placer best_fit("best_fit");
  CHECK(scene.place(best_fit, scene.job(9)).reason.str() == "needs 9 GPUs, 8 usable in the cluster");
  // GPUs drawn one by one always span nodes: saying otherwise is a mistake.
  toml::table gpu_unit;
  gpu_unit.insert("span_nodes", false);
  CHECK_THROWS_WITH_AS(Placer("spread", gpu_unit), doctest::Contains("applies only with unit = \"node\""),
                       tessel::ArgumentError);
}

// ============================================= gpu_packing, gpu_clustering, dot_product

TEST_CASE("gpu_packing fills shared GPUs, then used nodes, then idle nodes, by the simulator's scores") {
  Scene scene(3, 4);          // n0: GPUs 0-3, n1: 4-7, n2: 8-11
  scene.occupy({0}, 600);     // n0: GPU 0 has 400 free
  scene.occupy({4});          // n1: 3 idle GPUs; n2 idle
  // 300 milli: n0 uses its shared GPU 0: 100 - (400 * 100 / 1000) / 10 = 96;
  // n1 must open an idle GPU: 50 - 1 = 49; n2 is idle: max(33 - 4, 4) = 29.
  Placer placer("gpu_packing");
  PlacementChoice choice = scene.place(placer, scene.job(1, 300));
  CHECK(choice.gpus == std::vector<GpuId>{0});
  CHECK(choice.reason.str() ==
        "gpu packing: node n0 scores 96 of 100 (shared GPUs, then used nodes, then idle nodes), the highest");
  // 2 whole GPUs: n0 and n1 both open 2 idle GPUs (48), n2 is idle (29): the
  // seeds draw n0 and n1, never n2.
  CHECK(nodes_over_seeds(scene, "gpu_packing", scene.job(2)) == std::set<NodeId>{0, 1});
}

TEST_CASE("gpu_clustering puts a job with jobs of its kind, fuller nodes first") {
  // n0 holds a shared job (500 milli of GPU 0), n1 a job of 2 whole GPUs
  // (GPUs 4, 5), n2 nothing. Largest node: 4,000 milli; q = 25 * used / 4000.
  Scene scene(3, 4);
  const JobState& shared = scene.job(1, 500);
  const JobState& pair = scene.job(2);
  scene.cluster.assign(shared.spec.id, Allocation{{0}, 500, 0, 0, {}});
  scene.cluster.assign(pair.spec.id, Allocation{{4, 5}, 1000, 0, 0, {}});
  Placer placer("gpu_clustering");
  // Shared, 300 milli: n0 only its kind 75 + 25*500/4000 (3) = 78; n1 other
  // kinds 0 + 12 = 12; n2 empty 25 + 0. n0, on GPU 0 (the tightest).
  PlacementChoice choice = scene.place(placer, scene.job(1, 300));
  CHECK(choice.gpus == std::vector<GpuId>{0});
  CHECK(choice.reason.str() ==
        "gpu clustering: node n0 scores 78 of 100 (jobs of its kind there, and how full), the highest");
  // 2 whole GPUs: n1 (its kind only) 75 + 12 = 87; n0 3; n2 25.
  choice = scene.place(placer, scene.job(2));
  CHECK(choice.gpus == std::vector<GpuId>{6, 7});
  // 1 whole GPU, a kind nobody has: n2, the empty node (25), over n0 (3) and n1 (12).
  choice = scene.place(placer, scene.job(1));
  CHECK(choice.gpus == std::vector<GpuId>{8});
}

TEST_CASE("dot_product takes the node whose free CPU and GPU align least with the request") {
  // n0: GPUs 0, 1 busy (2,000 milli free), 32 CPUs; n1 idle. Largest node
  // 32 CPUs, 4,000 milli. A job of 1 GPU and 8 CPUs, request [8/32, 1000/4000]:
  //   n0: [1, 0.5] . [0.25, 0.25] = 0.375 -> int(100 * (1 - 0.1875)) = 81
  //   n1: [1, 1]   . [0.25, 0.25] = 0.5   -> 75
  Scene scene(2, 4);
  scene.occupy({0, 1});
  Placer placer("dot_product");
  PlacementChoice choice = scene.place(placer, scene.job(1, 1000, "", 0, 8));
  CHECK(choice.gpus == std::vector<GpuId>{2});
  CHECK(choice.reason.str() ==
        "dot product: node n0 scores 81 of 100 (1 - half the dot product of free and asked), the highest");
}

// ===================================================================== fgd

TEST_CASE("fgd picks the node whose expected fragmentation grows least, computed by hand") {
  // Target workload: the jobs known, three of 1 whole GPU and the 300-milli
  // job being placed, so p(1 x 1000) = 3/4 and p(1 x 300) = 1/4.
  // n0's GPUs have 400 and 1000 milli free; n1's 700 and 700.
  //
  // F(node) = sum over tasks m of p_m * (the free milli on GPUs with less
  // than m's share free, if m fits on the node; else all free milli).
  //   n0 before [400, 1000]: 300-task 0; 1000-task fits, 400 unusable: F = 3/4 * 400 = 300
  //   n0, on the 400 GPU -> [100, 1000]: 1/4 * 100 + 3/4 * 100 = 100     increase -200
  //   n0, on the 1000 GPU -> [400, 700]: 0 + 3/4 * 1100 (no whole GPU) = 825   increase +525
  //   n1 before [700, 700]: 0 + 3/4 * 1400 = 1050
  //   n1, on either GPU -> [400, 700]: 0 + 3/4 * 1100 = 825              increase -225
  // FGD takes n1 (-225), where packing by the GPU's free milli would take
  // n0's 400 (100 milli left).
  auto set_up = [](Scene& scene) {
    scene.occupy({0}, 600);
    scene.occupy({2}, 300);
    scene.occupy({3}, 300);
    for (int i = 0; i < 3; ++i) scene.job(1);
  };
  Scene scene(2, 2);
  set_up(scene);
  const JobState& job = scene.job(1, 300);
  Placer fgd("fgd", toml::table{{"scores", "exact"}});
  PlacementChoice choice = scene.place(fgd, job);
  CHECK(choice.gpus == std::vector<GpuId>{2});
  CHECK(choice.reason.str() ==
        "fgd: node n1, GPU 0: expected fragmentation changes by -225.0 milli-GPUs, the least of any choice");

  // With popularity_percent = 75 the target keeps only the most frequent
  // shape, 1 x 1000 (3 of 4 jobs): n0's 400 GPU gives [100, 1000], F 400 -> 100,
  // and n1 gives [400, 700], F 1400 -> 1100: both -300, and the tie goes to n0.
  Placer popular_only("fgd", toml::table{{"popularity_percent", 75}, {"scores", "exact"}});
  choice = scene.place(popular_only, job);
  CHECK(choice.gpus == std::vector<GpuId>{0});
  CHECK(choice.reason.str() ==
        "fgd: node n0, GPU 0: expected fragmentation changes by -300.0 milli-GPUs, the least of any choice");
}

TEST_CASE("fgd scores as the simulator: 100 * sigmoid(-increase / 1000), ties in the run's node order") {
  // The scene of the first fgd case: increases n1 -225 (either GPU) and, on
  // n0, -200 (the 400 GPU). Scores int(100 / (1 + e^(increase / 1000))):
  // n1 55 (0.556), n0 54 (0.550). n1 wins, as with exact scores.
  Scene scene(2, 2);
  scene.occupy({0}, 600);
  scene.occupy({2}, 300);
  scene.occupy({3}, 300);
  for (int i = 0; i < 3; ++i) scene.job(1);
  const JobState& job = scene.job(1, 300);
  Placer fgd("fgd");
  PlacementChoice choice = scene.place(fgd, job);
  CHECK(choice.gpus == std::vector<GpuId>{2});
  CHECK(choice.reason.str() ==
        "fgd: node n1, GPU 0: expected fragmentation changes by -225.0 milli-GPUs (score 55 of 100), the highest");
  // Two idle nodes of one GPU each take a 1-GPU job alike: the seed's node
  // order decides, the same node for every such job of the run.
  Scene idle(2, 1);
  for (int i = 0; i < 3; ++i) idle.job(1);
  const std::set<NodeId> firsts = nodes_over_seeds(idle, "fgd", idle.job(1));
  CHECK(firsts == std::set<NodeId>{0, 1});
  Placer seeded("fgd", {}, 7);
  const NodeId node = idle.cluster.gpu(idle.place(seeded, idle.job(1)).gpus[0]).node;
  for (double now : {0.0, 100.0, 5000.0})
    CHECK(idle.cluster.gpu(idle.place(seeded, idle.job(1), now).gpus[0]).node == node);
}

TEST_CASE("fgd counts all free milli as fragment to CPU-only tasks, and puts CPU-only jobs where CPUs cost least") {
  // Nodes of 1 GPU: n0 with 16 CPUs, n1 with 12. Jobs known: two CPU-only of
  // 8 CPUs (share 0), two of 1 whole GPU and 8 CPUs, and the CPU-only job of
  // 8 CPUs placed: p = 3/5 (CPU-only), 2/5 (whole GPU).
  //   F = 3/5 * free milli (always, for the CPU-only task) + 2/5 * (free milli
  //   unless a whole GPU and 8 CPUs fit)
  //   n0: before 600 + 0; after, 8 CPUs left: 600 + 0     increase 0   -> score 50
  //   n1: before 600 + 0; after, 4 CPUs left: 600 + 400   increase +400 -> score 40
  Scene scene(2, 1);
  scene.cluster = ClusterState(std::vector<NodeSpec>{{"n0", "v100", 1, 16, 256, 0}, {"n1", "v100", 1, 12, 256, 0}});
  for (int i = 0; i < 2; ++i) scene.job(1, 0, "", 0, 8);
  for (int i = 0; i < 2; ++i) scene.job(1, 1000, "", 0, 8);
  Placer fgd("fgd");
  const PlacementChoice choice = scene.place(fgd, scene.job(1, 0, "", 0, 8));
  CHECK(choice.gpus == std::vector<GpuId>{0});
  CHECK(choice.reason.str() ==
        "fgd: node n0, GPU 0: expected fragmentation changes by +0.0 milli-GPUs (score 50 of 100), the highest");
}

TEST_CASE("gpu_packing and gpu_clustering score a CPU-only job 0 everywhere: the run's first node that fits") {
  Scene scene(3, 2);
  scene.occupy({0}, 500);
  for (std::uint64_t seed : {1, 2, 3}) {
    Placer packing("gpu_packing", {}, seed), clustering("gpu_clustering", {}, seed);
    const JobState& job = scene.job(1, 0, "", 0, 4);
    const PlacementChoice packed = scene.place(packing, job);
    CHECK(packed.reason.str().find("scores 0 of 100") != std::string::npos);
    CAPTURE(packed.reason.str());
    CHECK(packed.reason.str().ends_with("first of 3 equal in the run's node order"));
    CHECK(scene.place(clustering, job).gpus == packed.gpus);
  }
}

TEST_CASE("fgd counts a node that lacks the CPUs for a target task as wholly fragmented for it") {
  // Nodes of 2 GPUs; n0 has 16 CPUs, n1 only 8. Jobs known: three of 1 GPU
  // with 8 CPUs, then the whole-GPU job placed, with no CPUs: p = 3/4, 1/4.
  //   either node, before [1000, 1000]: every task fits, nothing unusable: F = 0
  //   either node, after [0, 1000]: 16 or 8 CPUs still fit every task: F = 0
  // A tie: n0.
  Scene scene(2, 2);
  scene.cluster = ClusterState(std::vector<NodeSpec>{{"n0", "v100", 2, 16, 256, 0}, {"n1", "v100", 2, 8, 256, 0}});
  for (int i = 0; i < 3; ++i) scene.job(1, 1000, "", 0, 8);
  Placer fgd("fgd", toml::table{{"scores", "exact"}});
  CHECK(scene.place(fgd, scene.job(1)).gpus == std::vector<GpuId>{0});
  // Now n0 has 8 CPUs and n1 16, and the job takes 4 CPUs. Jobs known: three
  // of 8 CPUs, one of none, this one of 4: p = 3/5, 1/5, 1/5.
  //   n0 after [0, 1000] with 4 CPUs: the 8-CPU task cannot run there, so all
  //   1000 free milli are fragments for it: F = 3/5 * 1000 = 600     increase +600
  //   n1 after [0, 1000] with 12 CPUs: F = 0                         increase 0
  scene.cluster = ClusterState(std::vector<NodeSpec>{{"n0", "v100", 2, 8, 256, 0}, {"n1", "v100", 2, 16, 256, 0}});
  const PlacementChoice choice = scene.place(fgd, scene.job(1, 1000, "", 0, 4));
  CHECK(choice.gpus == std::vector<GpuId>{2});
  CHECK(choice.reason.str() ==
        "fgd: node n1, GPU 0: expected fragmentation changes by +0.0 milli-GPUs, the least of any choice");
}

TEST_CASE("fgd answers from its memory of nodes exactly as a fresh instance would") {
  // fgd remembers each node's fragmentation and best choice per job shape
  // while the node and the known jobs are unchanged. With the jobs known
  // from the start, place them one by one with one instance, the cluster
  // changing after most of them, and ask a fresh instance every time.
  Scene scene(5, 4, {}, 24);
  const int millis[] = {300, 1000, 500, 1000, 700, 250};
  std::vector<const JobState*> jobs;
  for (int i = 0; i < 60; ++i) {
    const int milli = millis[i % 6];
    jobs.push_back(&scene.job(milli < 1000 ? 1 : 1 + i % 2, milli, "", 0, 2 * (i % 3)));
  }
  Placer kept("fgd");
  for (int i = 0; i < 60; ++i) {
    CAPTURE(i);
    const JobState& job = *jobs[i];
    const PlacementChoice answer = scene.place(kept, job);
    Placer fresh("fgd");  // the same seed: the same node order
    const PlacementChoice expected = scene.place(fresh, job);
    CHECK(answer.gpus == expected.gpus);
    CHECK(answer.reason.str() == expected.reason.str());
    if (answer.placed() && i % 4 != 3)  // every fourth answer stays hypothetical
      scene.cluster.assign(job.spec.id, Allocation{answer.gpus, job.spec.gpu_milli, job.spec.cpus, 0});
  }
}

// ========================================================= philly_locality

TEST_CASE("philly_locality asks for the fewest servers in one rack, then relaxes as the job waits") {
  // Racks: n0, n1 in rack 0; n2, n3 in rack 1. Free GPUs: 2, 2 | 3, 1.
  Scene scene(4, 4, {0, 0, 1, 1});
  scene.occupy({0, 1});
  scene.occupy({4, 5});
  scene.occupy({8});
  scene.occupy({12, 13, 14});
  Placer placer("philly_locality", toml::table{{"relax_after_seconds", 600}});

  // 4 GPUs could fit one server; none has 4 free. Waiting since 100:
  const JobState& four = scene.job(4, 1000, "", 100);
  PlacementChoice choice = scene.place(placer, four, 699);
  CHECK_FALSE(choice.placed());
  CHECK(choice.reason.str() ==
        "waits for locality: 1 server(s) in one rack allowed after 599 s of waiting, the free GPUs need 2");
  // After 600 s, 2 servers in one rack: rack 0 and rack 1 both need 2; rack 0.
  choice = scene.place(placer, four, 700);
  CHECK(choice.gpus == std::vector<GpuId>{2, 3, 6, 7});
  CHECK(choice.reason.str() == "on 2 servers in rack 0, after 600 s of waiting");

  // 6 GPUs: no rack has 6 free (4 and 4). It needs at least 2 servers; the
  // steps allow 2, 4, then 6 servers in a rack, then any rack after 3 steps.
  const JobState& six = scene.job(6, 1000, "", 0);
  choice = scene.place(placer, six, 1799);
  CHECK_FALSE(choice.placed());
  CHECK(choice.reason.str() ==
        "waits for locality: no rack can take its 6 GPUs, and spanning racks is allowed only after 1800 s of waiting");
  // Across racks, the fewest servers: n2 (3), n0 (2), and 1 on the tightest, n3.
  choice = scene.place(placer, six, 1800);
  CHECK(choice.gpus == std::vector<GpuId>{9, 10, 11, 2, 3, 15});
  CHECK(choice.reason.str() == "relaxed to any rack after 1800 s of waiting: on 3 servers");

  // A job one server can take goes there at once: the one with fewest usable GPUs.
  choice = scene.place(placer, scene.job(1), 0);
  CHECK(choice.gpus == std::vector<GpuId>{15});
  CHECK(choice.reason.str() == "on one server, in rack 1");
}

TEST_CASE("philly_locality counts the wait from the last preemption, and a running job never relaxes") {
  Scene scene(2, 2, {0, 0});
  scene.occupy({0});
  scene.occupy({2});
  Placer placer("philly_locality", toml::table{{"relax_after_seconds", 600}});
  JobState& job = scene.job(2, 1000, "", 5000);  // preempted at 5000
  CHECK_FALSE(scene.place(placer, job, 5599).placed());
  CHECK(scene.place(placer, job, 5600).gpus == std::vector<GpuId>{1, 3});
  job.status = JobStatus::running;  // a resize: no wait to count
  CHECK_FALSE(scene.place(placer, job, 99999).placed());
}

TEST_CASE("philly_locality with relax_after_seconds = inf never relaxes: YARN's strict locality") {
  // The scene of the first philly_locality case. Free GPUs: 2, 2 | 3, 1.
  Scene scene(4, 4, {0, 0, 1, 1});
  scene.occupy({0, 1});
  scene.occupy({4, 5});
  scene.occupy({8});
  scene.occupy({12, 13, 14});
  Placer placer("philly_locality", toml::table{{"relax_after_seconds", std::numeric_limits<double>::infinity()}});
  CHECK_FALSE(placer.policy().time_sensitive());
  // 4 GPUs fit one server, none has 4 free: it waits however long.
  PlacementChoice choice = scene.place(placer, scene.job(4, 1000, "", 0), 1e9);
  CHECK_FALSE(choice.placed());
  CHECK(choice.reason.str() ==
        "waits for locality: 1 server(s) in one rack allowed after 1000000000 s of waiting, the free GPUs need 2");
  // 6 GPUs, no rack with 6 free: it never spans racks.
  choice = scene.place(placer, scene.job(6, 1000, "", 0), 1e9);
  CHECK_FALSE(choice.placed());
  CHECK(choice.reason.str() == "waits for locality: no rack can take its 6 GPUs, and it never spans racks");
  // With a finite wait it is time-sensitive, as before.
  CHECK(Placer("philly_locality", toml::table{{"relax_after_seconds", 600}}).policy().time_sensitive());
}

// =========================================================== tiresias_skew

TEST_CASE("tiresias_skew consolidates a vgg16 job but places a resnet50 job anywhere") {
  Scene scene(2, 4);  // n0: GPUs 0-3, n1: 4-7
  scene.occupy({0, 1});
  scene.occupy({4, 5});  // 2 free on each node
  Placer placer("tiresias_skew");

  PlacementChoice choice = scene.place(placer, scene.job(4, 1000, "vgg16"));
  CHECK_FALSE(choice.placed());
  CHECK(choice.reason.str() == "vgg16 is skewed: waits for one node with 4 usable GPUs, the most on one node is 2");
  choice = scene.place(placer, scene.job(4, 1000, "resnet50"));
  CHECK(choice.gpus == std::vector<GpuId>{2, 3, 6, 7});
  CHECK(choice.reason.str() == "resnet50 is not skewed: placed on the fullest nodes, 2 node(s)");

  // With n1 free, vgg16 gets it whole; a 2-GPU resnet50 job fills n0 first.
  Scene freer(2, 4);
  freer.occupy({0, 1});
  choice = freer.place(placer, freer.job(4, 1000, "VGG16"));
  CHECK(choice.gpus == std::vector<GpuId>{4, 5, 6, 7});
  CHECK(choice.reason.str() == "VGG16 is skewed: consolidated on node n1");
  CHECK(freer.place(placer, freer.job(2, 1000, "resnet50")).gpus == std::vector<GpuId>{2, 3});

  // The list of skewed models is the user's.
  Placer custom("tiresias_skew", toml::table{{"skewed_models", toml::array{"resnet50"}}});
  CHECK_FALSE(scene.place(custom, scene.job(4, 1000, "resnet50")).placed());
  CHECK(scene.place(custom, scene.job(4, 1000, "vgg16")).placed());
}

TEST_CASE("tiresias_skew puts a skewed job larger than a node on the fewest nodes, or makes it wait") {
  Scene scene(3, 4);
  scene.occupy({0});  // free: 3, 4, 4
  Placer placer("tiresias_skew");
  const JobState& job = scene.job(8, 1000, "vgg19");
  PlacementChoice choice = scene.place(placer, job);
  CHECK(choice.gpus == std::vector<GpuId>{4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(choice.reason.str() == "vgg19 is skewed: consolidated on 2 nodes, the fewest possible");
  scene.occupy({4});  // free: 3, 3, 4: 8 GPUs would need 3 nodes
  choice = scene.place(placer, job);
  CHECK_FALSE(choice.placed());
  CHECK(choice.reason.str() == "vgg19 is skewed: waits to run on 2 nodes, the free GPUs would need 3");
}

// ================================================================== spread

TEST_CASE("spread draws GPUs reproducibly for a seed, differently across seeds and times") {
  Scene scene(8, 4);
  const JobState& job = scene.job(4);
  Placer one("spread", {}, 1), same("spread", {}, 1), other("spread", {}, 2);
  const std::vector<GpuId> first = scene.place(one, job, 300).gpus;
  REQUIRE(first.size() == 4);
  CHECK(std::set<GpuId>(first.begin(), first.end()).size() == 4);
  CHECK(scene.place(one, job, 300).gpus == first);   // asked again: same answer
  CHECK(scene.place(same, job, 300).gpus == first);  // another instance, same seed
  CHECK(scene.place(other, job, 300).gpus != first);
  CHECK(scene.place(one, job, 600).gpus != first);
  CHECK(nodes_of(scene.cluster, first).size() > 1);  // unit = "gpu" spreads a job
}

TEST_CASE("spread draws only GPUs that fit: fractional shares, CPU limits, whole nodes") {
  Scene scene(2, 2);
  scene.occupy({0, 1, 2}, 500);  // GPUs 0-2 have 500 free, GPU 3 1000
  Placer placer("spread");
  for (int i = 0; i < 20; ++i) CHECK(scene.place(placer, scene.job(1, 600)).gpus == std::vector<GpuId>{3});
  std::set<GpuId> drawn;
  for (int i = 0; i < 40; ++i) drawn.insert(scene.place(placer, scene.job(1, 500)).gpus.at(0));
  CHECK(drawn == std::set<GpuId>{0, 1, 2, 3});

  // 8 CPUs per node and 4 per GPU of the job: at most 2 of its GPUs per node.
  Scene limited(4, 4, {}, 8);
  for (int i = 0; i < 20; ++i) {
    const PlacementChoice choice = limited.place(placer, limited.job(4, 1000, "", 0, 16));
    for (NodeId node : nodes_of(limited.cluster, choice.gpus))
      CHECK(std::count_if(choice.gpus.begin(), choice.gpus.end(),
                          [&](GpuId gpu) { return limited.cluster.gpu(gpu).node == node; }) <= 2);
  }

  Placer by_node("spread", toml::table{{"unit", "node"}});
  Scene busy(4, 4);
  busy.occupy({0, 1, 2, 4, 5, 6, 8});  // only n2 (3 free) and n3 (4 free) can take 3 GPUs
  std::set<NodeId> nodes;
  for (int i = 0; i < 20; ++i) {
    const PlacementChoice choice = busy.place(by_node, busy.job(3));
    REQUIRE(nodes_of(busy.cluster, choice.gpus).size() == 1);
    nodes.insert(busy.cluster.gpu(choice.gpus[0]).node);
  }
  CHECK(nodes == std::set<NodeId>{2, 3});
}

// ================================================================ most_free

TEST_CASE("most_free fills the emptiest nodes first, lowest-numbered on ties") {
  Scene scene(3, 4);        // GPUs 0-3 on n0, 4-7 on n1, 8-11 on n2
  scene.occupy({0, 1, 2});  // n0: 1 free
  scene.occupy({4});        // n1: 3 free; n2: 4 free
  Placer placer("most_free");

  // One GPU goes to the emptiest node, n2, though n0 has exactly one.
  PlacementChoice choice = scene.place(placer, scene.job(1));
  CHECK(choice.gpus == std::vector<GpuId>{8});
  CHECK(choice.reason.str() == "the emptiest nodes first: 1 node(s)");
  scene.occupy({8});  // n1 and n2 now have 3 free each: the tie goes to n1
  choice = scene.place(placer, scene.job(5));
  CHECK(choice.gpus == std::vector<GpuId>{5, 6, 7, 9, 10});
  CHECK(choice.reason.str() == "the emptiest nodes first: 2 node(s)");

  choice = scene.place(placer, scene.job(8));
  CHECK_FALSE(choice.placed());
  CHECK(choice.reason.str() == "needs 8 GPUs, 7 usable in the cluster");
}

// ============================================ every new placement, shared GPUs

TEST_CASE("every new placement plugin runs a fractional workload and keeps the invariants") {
  TempDir dir;
  std::string trace = "arrival,gpus,duration,gpu_milli,model\n";
  const int millis[] = {250, 500, 700, 1000, 300};
  const char* models[] = {"vgg16", "resnet50"};
  for (int i = 0; i < 60; ++i) {
    const int milli = millis[i % 5];
    const int gpus = milli < 1000 ? 1 : 1 + i % 3;
    trace += std::to_string(i * 20) + "," + std::to_string(gpus) + "," + std::to_string(200 + 37 * (i % 7)) + "," +
             std::to_string(milli) + "," + models[i % 2] + "\n";
  }
  dir.write("trace.csv", trace);
  for (const char* plugin : {"best_fit", "spread", "philly_locality", "tiresias_skew", "fgd", "most_free",
                             "gpu_packing", "gpu_clustering", "dot_product"}) {
    CAPTURE(plugin);
    const RunResults results = run_observed(
        dir, experiment(3, 4, R"({ plugin = "accept_all" })", std::string("{ plugin = \"") + plugin + "\" }"),
        [](const Scheduler& scheduler) {
          std::vector<int> used(scheduler.cluster().gpus().size(), 0);
          for (const JobState* job : scheduler.jobs())
            for (GpuId gpu : job->allocation.gpus) used[gpu] += job->allocation.gpu_milli;
          for (GpuId gpu = 0; gpu < used.size(); ++gpu) {
            CHECK(used[gpu] <= 1000);
            CHECK(used[gpu] == scheduler.cluster().gpu(gpu).used_milli);
          }
        });
    std::size_t finished = 0;
    for (const JobRecord& job : results.jobs) finished += job.status == "finished";
    CHECK(finished == 60);
  }
}

// ============================================================== load_based

TEST_CASE("load_based admits in order while admitted demand stays within factor x GPUs, never above") {
  // 4 GPUs, factor 1.5: at most 6 GPUs of demand admitted. All arrive at 0:
  // jobs 0, 1 (2 GPUs each) enter (4); job 2 (3) would make 7 and waits, and
  // job 3 (1 GPU, it would fit) waits behind it. At 100 jobs 0 and 1 are done:
  // jobs 2, 3, 4 enter, exactly 6.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,2,100\n0,2,100\n0,3,100\n0,1,100\n0,2,100\n");
  double most = 0;
  std::size_t rounds = 0;
  const RunResults results =
      run_observed(dir, experiment(1, 4, R"({ plugin = "load_based", factor = 1.5 })"), [&](const Scheduler& s) {
        CHECK(admitted_demand(s) <= 6);
        most = std::max(most, admitted_demand(s));
        ++rounds;
      });
  CHECK(rounds >= 3);
  CHECK(most == 6);
  CHECK(decision(results, 1, "admit") == "0 admit: admitted: demand now 4 GPUs, within 1.5 x 4");
  CHECK(decision(results, 2, "hold") == "0 hold: held: admitted demand 4 GPUs + 3 would exceed 1.5 x 4");
  CHECK(decision(results, 3, "hold") == "0 hold: held: behind job 2 in the admission queue");
  CHECK(decision(results, 4, "admit") == "100 admit: admitted: demand now 6 GPUs, within 1.5 x 4");
  for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
}

TEST_CASE("load_based rejects a job larger than the limit could ever allow") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,3,100\n0,2,100\n");
  const RunResults results = simulate(dir, experiment(1, 4, R"({ plugin = "load_based", factor = 0.5 })"));
  CHECK(results.jobs[0].status == "rejected");
  CHECK(decision(results, 0, "reject") == "0 reject: rejected: 3 GPUs is more than the 0.5 x 4 GPUs ever admitted");
  CHECK(results.jobs[1].status == "finished");
}

// ================================================================ vc_quota

TEST_CASE("vc_quota holds a VC's jobs over its cap, in order, and leaves other VCs alone") {
  // research may have 4 GPUs admitted. Jobs 0 and 1 (2 each) fill it; job 2
  // waits until they are done, job 4 waits behind job 2, job 5 (6 GPUs)
  // could never fit; prod's job 3 is not capped.
  TempDir dir;
  dir.write("trace.csv",
            "arrival,gpus,duration,vc\n"
            "0,2,100,research\n0,2,100,research\n0,2,100,research\n0,4,300,prod\n0,1,100,research\n"
            "0,6,100,research\n");
  const RunResults results = run_observed(
      dir, experiment(2, 4, R"({ plugin = "vc_quota", caps = { research = 4 } })"),
      [](const Scheduler& s) { CHECK(admitted_demand(s, "research") <= 4); });
  CHECK(decision(results, 2, "hold") ==
        "0 hold: held: vc 'research' has 4 GPUs admitted, 2 more would exceed its cap of 4");
  CHECK(decision(results, 4, "hold") == "0 hold: held: behind job 2 of vc 'research'");
  CHECK(decision(results, 3, "admit") == "0 admit: admitted: vc 'prod' has no cap");
  CHECK(decision(results, 5, "reject") ==
        "0 reject: rejected: asks for 6 GPUs, more than vc 'research' may ever have (cap 4)");
  CHECK(decision(results, 2, "admit") == "100 admit: admitted: vc 'research' now has 2 of its 4 GPUs");
  CHECK(results.jobs[2].first_start == 100);
  CHECK(results.jobs[3].first_start == 0);
  CHECK(results.jobs[5].status == "rejected");
}

// =============================================================== max_queue

TEST_CASE("max_queue rejects the job that would make N+1 wait, for good, with the reason") {
  // max_waiting = 2 on 4 GPUs. At 0: job 0 (4 GPUs) and job 1 enter and wait,
  // job 2 would be the third: rejected. Job 0 starts; job 1 waits behind it.
  // At 100 (jobs 3, 4 arrived at 50): 1 waits (job 1), so job 3 enters, job 4 not.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,4,150\n0,1,100\n0,1,100\n50,1,100\n50,1,100\n");
  const RunResults results = simulate(dir, experiment(1, 4, R"({ plugin = "max_queue", max_waiting = 2 })"));
  CHECK(decision(results, 1, "admit") == "0 admit: admitted: 2 of at most 2 jobs waiting");
  CHECK(decision(results, 2, "reject") == "0 reject: rejected: 2 jobs already wait, the limit is 2");
  CHECK(decision(results, 3, "admit") == "100 admit: admitted: 2 of at most 2 jobs waiting");
  CHECK(decision(results, 4, "reject") == "100 reject: rejected: 2 jobs already wait, the limit is 2");
  std::vector<std::string> statuses;
  for (const JobRecord& job : results.jobs) statuses.push_back(job.status);
  CHECK(statuses == std::vector<std::string>{"finished", "finished", "rejected", "finished", "rejected"});
}

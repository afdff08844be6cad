// Tenplex-style reconfiguration: the parallel-3d model against step times
// worked out by hand, the layout tenplex chooses, the bytes a change of
// layout moves, dp_only's restarts, and whole runs through a node failure.
#include <doctest/doctest.h>

#include <cmath>

#include "../plugins/elasticity/parallel_state.hpp"
#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "config/toml_document.hpp"
#include "models/models.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// Round numbers: with hidden_per_layer = 1000, a model of 1.2e10 parameters
// has hidden size h = cbrt(1000 x 1.2e10 / 12) = 1e4 and L = 1.2e10 / (12 h²)
// = 10 layers. 100 TFLOP/s, 100 GB/s within a node, 10 GB/s across nodes.
const std::string kRoundModel =
    "achieved_tflops = { v100 = 100 }, intra_node_gb_per_s = 100, inter_node_gb_per_s = 10, "
    "sequence_length = 1000, microbatch_size = 1, hidden_per_layer = 1000, activation_gb = 4";
constexpr double kRoundParameters = 1.2e10;

std::shared_ptr<const ThroughputModel> parallel_3d(const std::string& arguments) {
  const auto document = std::make_shared<const TomlDocument>(
      TomlDocument::parse("[workload]\nmodel = { name = \"parallel-3d\"" + (arguments.empty() ? "" : ", " + arguments) +
                              " }\n", "m.toml"));
  Diagnostics diagnostics;
  TableReader workload(*document, diagnostics, document->root()["workload"].as_table(), "workload");
  auto model = build_throughput_model(read_model_settings(workload, document), diagnostics);
  diagnostics.raise_if_any();
  return model;
}

JobSpec gpt(double parameters, int batch_size) {
  JobSpec job;
  job.parameters = parameters;
  job.batch_size = batch_size;
  job.min_gpus = 1;
  job.max_gpus = 16;
  return job;
}

Shape shape(int gpus, int nodes, double gpu_mem_gb, JobLayout layout = {}) {
  Shape s;
  s.gpus = gpus;
  s.nodes = nodes;
  s.gpu_type = "v100";
  s.gpu_mem_gb = gpu_mem_gb;
  s.layout = layout;
  return s;
}

// `nodes` nodes of 4 GPUs: node n holds GPUs 4n .. 4n+3.
ClusterState nodes_of_four(int nodes, double gpu_mem_gb = 32) {
  std::vector<NodeSpec> specs;
  for (int n = 0; n < nodes; ++n) {
    NodeSpec spec;
    spec.name = "n" + std::to_string(n);
    spec.gpus = 4;
    spec.gpu_mem_gb = gpu_mem_gb;
    specs.push_back(spec);
  }
  return ClusterState(specs);
}

Allocation on(std::vector<GpuId> gpus, int tp, int pp) {
  Allocation allocation;
  allocation.gpus = std::move(gpus);
  allocation.layout = {0, tp, pp};
  return allocation;
}

std::vector<GpuId> gpu_range(GpuId first, GpuId end) {
  std::vector<GpuId> ids;
  for (GpuId id = first; id < end; ++id) ids.push_back(id);
  return ids;
}

// An elasticity plugin from the build tree with these arguments (the rest
// at their defaults).
struct LoadedPolicy {
  PluginRegistry registry;
  SlotRegistry slots;
  PluginArgs args;
  PluginPtr<ElasticityPolicy> policy;

  LoadedPolicy(const std::string& name, const toml::table& arguments) {
    const PluginEntry& entry = registry.find(PluginKind::elasticity, name);
    StageConfig stage;
    stage.kind = PluginKind::elasticity;
    stage.args = arguments;
    Diagnostics diagnostics;
    args = check_arguments(stage, entry, {}, diagnostics);
    diagnostics.raise_if_any();
    PluginPtr<Plugin> plugin = PluginRegistry::create(entry, PluginContext(args, 1, slots));
    PluginDeleter deleter = plugin.get_deleter();
    policy = PluginPtr<ElasticityPolicy>(dynamic_cast<ElasticityPolicy*>(plugin.release()), std::move(deleter));
    REQUIRE(policy);
  }
};

// The argument a plugin's constructor rejects ("" if none).
std::string rejected_argument(const std::string& name, const toml::table& arguments) {
  try {
    LoadedPolicy loaded(name, arguments);
  } catch (const ArgumentError& error) {
    return error.argument();
  }
  return "";
}

// 100 GB/s within a node, 10 GB/s across, 2 GB/s from storage.
const toml::table kBandwidths{{"intra_node_gb_per_s", 100.0}, {"inter_node_gb_per_s", 10.0}, {"storage_gb_per_s", 2.0}};

// The state model's settings: kBandwidths, 16 bytes a parameter, senders
// unlimited unless `node_send_gb_per_s` is given.
elasticity::ParallelStateSettings state_settings(double node_send_gb_per_s = 0,
                                                 const std::string& state_served_by = "holders") {
  PluginArgs args;
  for (const auto& [name, value] : kBandwidths) args.set(std::string(name.str()), *value.value<double>());
  args.set("bytes_per_parameter", 16.0);
  args.set("activation_gb", 4.0);
  args.set("node_send_gb_per_s", node_send_gb_per_s);
  args.set("state_served_by", state_served_by);
  return elasticity::ParallelStateSettings(args);
}

// A view of one job on `cluster`, restarts free, priced by `model`.
struct OneJobView {
  SchedulerSettings settings;
  JobState job;
  std::vector<JobState*> all{&job};
  SchedulerView view;

  OneJobView(const ClusterState& cluster, const ThroughputModel& model, JobSpec spec)
      : view(settings, cluster, model, all, {}, {}, {}, 0) {
    settings.restart_seconds = 0;
    job.spec = std::move(spec);
  }
};

}  // namespace

TEST_CASE("a shape's layouts keep tensor parallelism within a node; memory is 16 bytes a parameter per split") {
  auto splits = [](const Shape& s) {
    std::vector<std::pair<int, int>> out;
    for (const JobLayout& layout : parallel_layouts(s))
      out.emplace_back(layout.tensor_parallel, layout.pipeline_parallel);
    return out;
  };
  // 4 GPUs on one node: tp 1, 2 or 4.
  CHECK(splits(shape(4, 1, 32)) ==
        std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {1, 3}, {1, 4}, {2, 1}, {2, 2}, {4, 1}});
  // 6 GPUs on 2 nodes, 3 each: tp 1 only (a pair would straddle nodes).
  CHECK(splits(shape(6, 2, 32)).size() == 6);
  CHECK(splits(shape(6, 2, 32)).back() == std::pair<int, int>{1, 6});
  CHECK(data_parallel({0, 2, 3}, 8) == 1);  // two GPUs idle
  CHECK(data_parallel({0, 4, 4}, 8) == 0);

  const ParallelMemory memory;  // 16 bytes a parameter, 4 GB of activations
  CHECK(memory.gb_per_gpu(2e9, {0, 2, 2}) == doctest::Approx(16 * 2e9 / 4 / 1e9 + 4));
  CHECK(memory.fits(2e9, {0, 2, 2}, 12));
  CHECK_FALSE(memory.fits(2e9, {0, 2, 1}, 12));
}

TEST_CASE("parallel-3d prices a layout as Megatron-LM's analysis does, worked by hand") {
  const auto model = parallel_3d(kRoundModel);
  const JobSpec job = gpt(kRoundParameters, 64);
  // 8 GPUs on 2 nodes, tp = 2, pp = 2, dp = 2; each replica takes m = 64 / 2 =
  // 32 microbatches of one sequence. One microbatch on one stage:
  //   compute   8 x 1.2e10 x 1000 / 4 / 1e14            = 0.24 s
  //   tensor    (10/2 layers) x 8 x 1000 x 1e4 x (1/2) x 2 bytes / 100 GB/s = 0.004 s
  //   pipeline  2 x 2 x 1000 x 1e4 bytes / 100 GB/s (tp pp = 4 GPUs, one node) = 0.0004 s
  // (32 + 2 - 1) x 0.2444 = 8.0652 s, then the ring all-reduce across nodes:
  //   2 x (1/2) x 2 bytes x 1.2e10 / 4 / 10 GB/s        = 0.6 s
  // Memory: 16 x 1.2e10 / 4 = 48 GB + 4 GB fits in 80 GB.
  CHECK(model->rate(job, shape(8, 2, 80, {0, 2, 2})) == doctest::Approx(1 / 8.6652));

  // tp = 2, pp = 1, dp = 4 needs 96 + 4 GB: the 20 GB beyond 80 go over
  // PCIe (16 GB/s) out and back every step, 2.5 s. Microbatch: 0.48 s compute
  // + 10 x 8e7 bytes / 100 GB/s = 0.488 s, 16 of them: 7.808 s; all-reduce
  // 2 x (3/4) x 2 x 1.2e10 / 2 / 10 GB/s = 1.8 s.
  CHECK(model->rate(job, shape(8, 2, 80, {0, 2, 1})) == doctest::Approx(1 / (7.808 + 1.8 + 2.5)));

  // The job's batch size, else the model's; a layout's batch size first.
  CHECK(model->rate(job, shape(8, 2, 80, {32, 2, 2})) > model->rate(job, shape(8, 2, 80, {0, 2, 2})));
}

TEST_CASE("parallel-3d checks its arguments and needs a FLOP rate for every GPU type") {
  try {
    parallel_3d("inter_node_gb_per_s = 0, achieved_tflops = { h100 = -1 }");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[0].str().find("h100") != std::string::npos);
    CHECK(e.diagnostics()[1].str().find("inter_node_gb_per_s") != std::string::npos);
  }
  std::vector<NodeSpec> nodes(2);
  nodes[1].gpu_type = "k80";
  CHECK(parallel_3d("")->check(ClusterState(nodes)) ==
        "no achieved_tflops, nor peak_tflops, matmul_efficiency, memory_gb_per_s and multiprocessors, for GPU type "
        "'k80'");
  CHECK(parallel_3d("achieved_tflops = { k80 = 4 }")->check(ClusterState(nodes)).empty());
}

TEST_CASE("tenplex arranges the throughput-best layout that fits in memory, worked by hand") {
  // 4 GPUs of 80 GB on one node; offload made nearly free, so that layouts
  // that do not fit look fastest to the model. Step times of the candidates
  // (m = 64 / dp microbatches; numbers as in the test above, one node):
  //   needs more than 80 GB (192/split + 4):
  //     tp1 pp1 dp4  16 x 0.96 + all-reduce 2 x (3/4) x 2.4e10 / 100 GB/s 0.36    = 15.72 s
  //     tp2 pp1 dp2  32 x (0.48 + 0.008) + all-reduce 0.12                        = 15.736 s
  //     tp1 pp2 dp2  33 x (0.48 + 0.0004) + 0.12                                  = 15.9732 s
  //   fits:
  //     tp2 pp2 dp1  65 x (0.24 + 0.004 + 0.0004)                                 = 15.886 s
  //     tp1 pp4 dp1  67 x (0.24 + 0.0004)                                         = 16.1068 s
  //     tp4 pp1 dp1  64 x (0.24 + 10 x 8e7 x (3/4) x 2 / 1e11 = 0.012)           = 16.128 s
  //     tp1 pp3 dp1  66 x (0.32 + 0.0004), one GPU idle                           = 21.1464 s
  const auto model = parallel_3d(kRoundModel + ", offload_gb_per_s = 1e9");
  const ClusterState cluster = nodes_of_four(1, 80);
  LoadedPolicy tenplex("tenplex", kBandwidths);
  OneJobView one(cluster, *model, gpt(kRoundParameters, 64));
  Allocation four;
  four.gpus = gpu_range(0, 4);
  CHECK(tenplex.policy->arrange(one.view, one.job, four) == JobLayout{0, 2, 2});
  // The model's own choice for an all-zero layout agrees.
  CHECK(model->rate(one.job.spec, shape(4, 1, 80)) == doctest::Approx(1 / 15.886));
  CHECK(model->rate(one.job.spec, shape(4, 1, 80, {0, 1, 1})) == doctest::Approx(1 / 15.72).epsilon(1e-4));

  // With room for everything, the fastest of all wins.
  const ClusterState roomy = nodes_of_four(1, 200);
  OneJobView big(roomy, *model, gpt(kRoundParameters, 64));
  CHECK(tenplex.policy->arrange(big.view, big.job, four) == JobLayout{0, 1, 1});
}

TEST_CASE("a change of layout moves only what each new owner lacks, bytes by hand") {
  // 1e9 parameters x 16 bytes: S = 16 GB of state. Nodes n0, n1, n2 hold GPUs
  // 0-3, 4-7, 8-11. Ranks run tensor slice fastest, then stage, then replica.
  const ClusterState cluster = nodes_of_four(3);
  const elasticity::ParallelStateSettings settings = state_settings();
  constexpr double S = 16e9;

  // (dp 4, tp 2, pp 1) on n0-n1 -> (dp 2, tp 2, pp 2) on n1-n2. GPUs 4-7 keep
  // their tensor slice of every layer and need only half of it: nothing
  // moves. GPUs 8-11 are new and need one quarter each, (slice, stage) =
  // (0,0), (1,0), (0,1), (1,1), from n0 or n1: 4 x S/4 = 16 GB over the
  // network, each receiving 4 GB in 0.4 s.
  const auto spread = elasticity::plan_transfer(cluster, S, on(gpu_range(0, 8), 2, 1), on(gpu_range(4, 12), 2, 2),
                                                settings);
  CHECK(spread.inter_node_bytes == doctest::Approx(16e9));
  CHECK(spread.intra_node_bytes == 0);
  CHECK(spread.storage_bytes == 0);
  CHECK(spread.seconds(settings) == doctest::Approx(0.4));

  // The same change on the same GPUs moves nothing at all.
  const auto in_place =
      elasticity::plan_transfer(cluster, S, on(gpu_range(0, 8), 2, 1), on(gpu_range(0, 8), 2, 2), settings);
  CHECK(in_place.intra_node_bytes + in_place.inter_node_bytes + in_place.storage_bytes == 0);

  // Back from (2, 2, 2) to (4, 2, 1): each GPU lacks the other stage of its
  // slice, S/4, and a GPU of its own node holds it: 8 x 4 GB = 32 GB over
  // NVLink, 0.04 s.
  const auto merge =
      elasticity::plan_transfer(cluster, S, on(gpu_range(0, 8), 2, 2), on(gpu_range(0, 8), 2, 1), settings);
  CHECK(merge.intra_node_bytes == doctest::Approx(32e9));
  CHECK(merge.inter_node_bytes == 0);
  CHECK(merge.seconds(settings) == doctest::Approx(0.04));

  // (dp 1, tp 4, pp 2) with stage 1 on n1, which fails: the four GPUs of n0
  // go to (1, 4, 1) and each needs stage 1 of its slice, S/8, which no
  // survivor holds: 4 x 2 GB = 8 GB from storage at 2 GB/s.
  ClusterState failed = nodes_of_four(3);
  failed.set_up(1, false);
  const auto lost =
      elasticity::plan_transfer(failed, S, on(gpu_range(0, 8), 4, 2), on(gpu_range(0, 4), 4, 1), settings);
  CHECK(lost.storage_bytes == doctest::Approx(8e9));
  CHECK(lost.intra_node_bytes + lost.inter_node_bytes == 0);
  CHECK(lost.seconds(settings) == doctest::Approx(4));
}

TEST_CASE("redeploying 6.7B: Tenplex's 13 s against Tenplex-Central's 27 s, from senders' bandwidth") {
  // Tenplex's Fig. 10 (artifact benchmark/redeployment): GPT-3 6.7B in
  // (tp 4, pp 2) moves from hosts 1-2 to hosts 3-4. Each node sends at 4.43
  // GB/s (fig9.toml gives the source, the artifact's Fig. 14). The state is
  // 16 x 6.7e9 = 107.2 GB, a shard 13.4 GB.
  const ClusterState cluster = nodes_of_four(4);
  constexpr double state = 16 * 6.7e9;
  const Allocation from = on(gpu_range(0, 8), 4, 2), to = on(gpu_range(8, 16), 4, 2);

  // Distributed: each node sends its own 4 shards, 53.6 GB in 12.1 s; the
  // receivers (13.4 GB at 10 GB/s, 1.34 s) wait for them.
  const auto distributed = elasticity::plan_transfer(cluster, state, from, to, state_settings(4.43));
  CHECK(distributed.inter_node_bytes == doctest::Approx(state));
  CHECK(distributed.busiest_gpu_seconds == doctest::Approx(1.34));
  CHECK(distributed.busiest_node_seconds == doctest::Approx(53.6e9 / 4.43e9));
  // Central: n0 sends all 8 shards, 107.2 GB in 24.2 s.
  const auto central = elasticity::plan_transfer(cluster, state, from, to, state_settings(4.43, "first_node"));
  CHECK(central.inter_node_bytes == doctest::Approx(state));
  CHECK(central.busiest_node_seconds == doctest::Approx(107.2e9 / 4.43e9));
  // The published 13 s and 27 s, within 20%.
  const auto settings = state_settings(4.43);
  CHECK(std::abs(distributed.seconds(settings) / 13 - 1) < 0.2);
  CHECK(std::abs(central.seconds(settings) / 27 - 1) < 0.2);
  // Without the senders' limit the receivers alone would take 1.34 s.
  CHECK(elasticity::plan_transfer(cluster, state, from, to, state_settings()).seconds(settings) ==
        doctest::Approx(1.34));

  // Replicas share the sending: one more replica of (tp 2, pp 1) on n2 from
  // two on n0 and n1 takes its two shards one from each node.
  const auto shared = elasticity::plan_transfer(cluster, 16e9, on(gpu_range(0, 8), 2, 1), on(gpu_range(0, 10), 2, 1),
                                                state_settings(4));
  CHECK(shared.inter_node_bytes == doctest::Approx(16e9));
  CHECK(shared.busiest_node_seconds == doctest::Approx(8e9 / 4e9));
}

TEST_CASE("tenplex's layouts pin a split per GPU count; bad entries name the argument") {
  const auto model = parallel_3d("sequence_length = 1024, microbatch_size = 8");
  ClusterState cluster = nodes_of_four(4);
  OneJobView one(cluster, *model, gpt(1.3e9, 128));
  toml::table pinned = kBandwidths;
  pinned.insert("layouts", toml::array{"4=2x2", "8=2x4", "16=2x4"});
  LoadedPolicy tenplex("tenplex", pinned);
  LoadedPolicy best("tenplex", kBandwidths);
  auto arranged = [&](LoadedPolicy& plugin, int gpus) {
    return plugin.policy->arrange(one.view, one.job, on(gpu_range(0, gpus), 0, 0));
  };
  CHECK(arranged(tenplex, 4) == JobLayout{0, 2, 2});
  CHECK(arranged(tenplex, 8) == JobLayout{0, 2, 4});
  CHECK(arranged(tenplex, 16) == JobLayout{0, 2, 4});
  // Counts not pinned, and every count without `layouts`, get the best split,
  // which for GPT-3 XL is never tp 2, pp 4.
  CHECK(arranged(tenplex, 12) == arranged(best, 12));
  CHECK(arranged(best, 8) != JobLayout{0, 2, 4});
  CHECK(arranged(best, 16) != JobLayout{0, 2, 4});

  for (const char* entry : {"6=2x4", "8", "8=2", "x=2x4", "8=0x4", "8=2x4x"}) {
    CAPTURE(entry);
    toml::table bad = kBandwidths;
    bad.insert("layouts", toml::array{entry});
    CHECK(rejected_argument("tenplex", bad) == "layouts");
  }
  toml::table twice = kBandwidths;
  twice.insert("layouts", toml::array{"8=2x4", "8=2x2"});
  CHECK(rejected_argument("tenplex", twice) == "layouts");
  toml::table bad_split = kBandwidths;
  bad_split.insert("split", "2by4");
  CHECK(rejected_argument("dp_only", bad_split) == "split");
}

TEST_CASE("dp_only restarts from the checkpoint where tenplex moves a few shards") {
  const auto model = parallel_3d("");
  ClusterState cluster = nodes_of_four(3);
  LoadedPolicy tenplex("tenplex", kBandwidths);
  LoadedPolicy dp_only("dp_only", kBandwidths);
  OneJobView one(cluster, *model, gpt(1e9, 128));  // S = 16 GB; a restart reads it at 2 GB/s: 8 s
  auto cost = [&](LoadedPolicy& plugin, const Allocation& from, const Allocation& to) {
    return plugin.policy->reconfiguration_seconds(one.view, one.job, from, to);
  };

  // A new split: tenplex moves 16 GB over the network (0.4 s, above);
  // dp_only cannot change tp or pp in place and reloads everything.
  const Allocation dp4_tp2 = on(gpu_range(0, 8), 2, 1), dp2_tp2_pp2 = on(gpu_range(4, 12), 2, 2);
  CHECK(cost(tenplex, dp4_tp2, dp2_tp2_pp2) == doctest::Approx(0.4));
  CHECK(cost(dp_only, dp4_tp2, dp2_tp2_pp2) == doctest::Approx(8));

  // One more replica of (tp 2, pp 2) on n1: both copy S/4 to each new GPU
  // over the network, 0.4 s.
  const Allocation one_replica = on(gpu_range(0, 4), 2, 2), two_replicas = on(gpu_range(0, 8), 2, 2);
  CHECK(cost(tenplex, one_replica, two_replicas) == doctest::Approx(0.4));
  CHECK(cost(dp_only, one_replica, two_replicas) == doctest::Approx(0.4));

  // n1 fails under two replicas: n0 still holds one whole, so tenplex moves
  // nothing; dp_only restarts from the checkpoint.
  cluster.set_up(1, false);
  CHECK(cost(tenplex, two_replicas, one_replica) == 0);
  CHECK(cost(dp_only, two_replicas, one_replica) == doctest::Approx(8));
}

namespace {

// One GPT-1.3B job on two nodes of four 32 GB V100s, elastic in [4, 8]; n1
// crashes at one hour and is repaired two hours later. It fits on one GPU
// (16 x 1.3e9 = 20.8 GB + 4), so every layout is pure data parallelism.
std::string failing_node(const std::string& elasticity) {
  return R"([cluster]
nodes = 2
gpus_per_node = 4
gpu_mem_gb = 32
[[cluster.events]]
at_seconds = 3600
fail = ["n1"]
[failures]
node_repair_hours = 2
[workload]
kind = "csv"
path = "trace.csv"
model = "parallel-3d"
[scheduler]
round_seconds = 300
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
elasticity = { plugin = ")" + elasticity + R"(" }
[simulation]
preemption_overhead_seconds = 30
)";
}

}  // namespace

TEST_CASE("after a node failure tenplex shrinks and keeps running; dp_only pays its restart") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,min_gpus,max_gpus,parameters\n0,8,36000,4,8,1.3e9\n");
  const RunResults tenplex = simulate(dir, failing_node("tenplex"));
  const RunResults dp_only = simulate(dir, failing_node("dp_only"));

  // At 1 h: 8 -> 4 GPUs on n0, (tp 1, pp 1); n0's replicas hold everything,
  // so tenplex pays only the 30 s restart of its workers; dp_only reads the
  // 20.8 GB checkpoint at 2 GB/s as well: 30 + 10.4 s.
  // At 3 h n1 is back and both grow to 8 GPUs, adding replicas: each GPU of
  // n1 pulls the 20.8 GB state over the network at 12.5 GB/s: 30 + 1.664 s.
  for (const RunResults* run : {&tenplex, &dp_only}) {
    REQUIRE(run->resizes.size() == 2);
    CHECK(run->resizes[0].time == 3600);
    CHECK(run->resizes[0].from_gpus == 8);
    CHECK(run->resizes[0].to_gpus == 4);
    CHECK(run->resizes[0].layout == JobLayout{0, 1, 1});
    CHECK(run->resizes[1].time == 10800);
    CHECK(run->resizes[1].from_gpus == 4);
    CHECK(run->resizes[1].to_gpus == 8);
    CHECK(run->resizes[1].cost_seconds == doctest::Approx(31.664));
    CHECK(run->jobs[0].status == "finished");
    CHECK(run->jobs[0].preemptions == 0);
    CHECK(run->jobs[0].attempts == 1);
  }
  CHECK(tenplex.resizes[0].cost_seconds == doctest::Approx(30));
  CHECK(dp_only.resizes[0].cost_seconds == doctest::Approx(40.4));
  // Same layouts at the same times: dp_only's 10.4 s more of pause on 4 GPUs
  // is made up at the 8-GPU rate.
  const auto model = parallel_3d("");
  JobSpec job = gpt(1.3e9, 0);
  const double on_four = model->rate(job, shape(4, 1, 32, {0, 1, 1}));
  const double on_eight = model->rate(job, shape(8, 2, 32, {0, 1, 1}));
  CHECK(*dp_only.jobs[0].finish - *tenplex.jobs[0].finish == doctest::Approx(10.4 * on_four / on_eight));

  // Without elasticity the job stops at the failure and waits for its 8
  // GPUs: it loses the work tenplex did on 4 GPUs from 3630 s to 3 h, and
  // restarts in 30 s where tenplex's growth took 31.664 s.
  const RunResults none = simulate(dir, failing_node("none"));
  CHECK(none.resizes.empty());
  CHECK(*none.jobs[0].finish - *tenplex.jobs[0].finish ==
        doctest::Approx((10800 - 3630) * on_four / on_eight - 1.664));
}

TEST_CASE("tenplex and dp_only keep every job within its GPU range through failures") {
  PluginRegistry registry;
  for (const char* plugin : {"tenplex", "dp_only"}) {
    CAPTURE(plugin);
    ExperimentConfig config = load_experiment(
        source_root() / "experiments/quickstart.toml",
        {"workload.jobs=150", "workload.elastic_min_gpus=1", "workload.elastic_max_gpus=16",
         "workload.model=parallel-3d", "failures.node_mtbf_hours=24", "failures.node_repair_hours=4",
         std::string("scheduler.elasticity.plugin=") + plugin});
    Simulation simulation(config, registry);
    simulation.observe_rounds([&](double, const Scheduler& scheduler, const RoundOutcome&) {
      for (const JobState* job : scheduler.jobs()) {
        if (!job->running()) continue;
        CHECK(job->allocation.gpu_count() >= job->spec.min_gpus);
        CHECK(job->allocation.gpu_count() <= job->spec.max_gpus);
        CHECK(data_parallel(job->allocation.layout, job->allocation.gpu_count()) >= 1);
      }
    });
    const RunResults results = simulation.run();
    std::size_t grew = 0, shrank = 0;
    for (const ResizeRecord& resize : results.resizes) {
      const JobRecord& job = results.jobs[resize.job];
      CHECK(resize.to_gpus >= job.min_gpus);
      CHECK(resize.to_gpus <= job.max_gpus);
      CHECK(resize.cost_seconds >= 0);
      grew += resize.to_gpus > resize.from_gpus;
      shrank += resize.to_gpus < resize.from_gpus;
    }
    CHECK(grew > 0);
    CHECK(shrank > 0);
    for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
  }
}

namespace {

// One GPT-1.3B job asking for 8 GPUs (4-16) on two nodes; n1 crashes at one
// hour and comes back at three.
std::string pausing_run(const std::string& elasticity) {
  std::string config = failing_node("x");
  config.replace(config.find("{ plugin = \"x\" }"), 16, elasticity);
  return config;
}

}  // namespace

TEST_CASE("dp_only with a fixed split pauses on too few GPUs; reconfiguration = checkpoint always reloads") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,min_gpus,max_gpus,parameters\n0,8,36000,4,8,1.3e9\n");
  // Split 2x4 needs 8 GPUs: on n0 alone the job stops and holds nothing
  // until n1 is back at 3 h, then restarts on its 8 GPUs.
  const RunResults paused = simulate(dir, pausing_run("{ plugin = \"dp_only\", split = \"2x4\" }"));
  CHECK(paused.resizes.empty());
  CHECK(paused.jobs[0].status == "finished");
  // So it finishes 2 h of pause plus the 30 s restart later than without the
  // crash.
  std::string no_crash = pausing_run("{ plugin = \"dp_only\", split = \"2x4\" }");
  const auto events = no_crash.find("[[cluster.events]]");
  no_crash.erase(events, no_crash.find("[failures]") - events);
  const RunResults steady = simulate(dir, no_crash);
  CHECK(*paused.jobs[0].finish - *steady.jobs[0].finish == doctest::Approx(7200 + 30));
  // Without the split it shrinks to 4 GPUs and keeps training: it finishes
  // earlier.
  const RunResults resplit = simulate(dir, pausing_run("{ plugin = \"dp_only\" }"));
  REQUIRE(resplit.resizes.size() == 2);
  CHECK(*resplit.jobs[0].finish < *paused.jobs[0].finish);

  // A job asking for fewer GPUs than the split could never run: the run
  // stops, saying so, as the user's mistake (exit 2), naming the argument.
  TempDir small;
  small.write("trace.csv", "arrival,gpus,duration,min_gpus,max_gpus,parameters\n0,4,36000,4,8,1.3e9\n");
  CHECK_THROWS_WITH_AS(simulate(small, pausing_run("{ plugin = \"dp_only\", split = \"2x4\" }")),
                       doctest::Contains("argument 'split': job 0 got 4 GPUs, fewer than the split's 8"),
                       UserError);

  // A restart from the checkpoint even where replicas could move: the growth
  // back to 8 GPUs at 3 h costs 30 s + 20.8 GB at 2 GB/s, not 31.664 s.
  const RunResults checkpoint =
      simulate(dir, pausing_run("{ plugin = \"dp_only\", reconfiguration = \"checkpoint\" }"));
  REQUIRE(checkpoint.resizes.size() == 2);
  CHECK(checkpoint.resizes[1].cost_seconds == doctest::Approx(40.4));
  CHECK(resplit.resizes[1].cost_seconds == doctest::Approx(31.664));
}

// Clusters: groups, presets and planned changes; node and job failures.
#include <doctest/doctest.h>

#include <cmath>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

ExperimentConfig read(const std::string& cluster) {
  const std::string text = cluster + R"(
[workload]
kind = "synthetic"
jobs = 5
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
  return read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(text, "c.toml")));
}

std::vector<std::string> problems(const std::string& cluster) {
  try {
    read(cluster);
  } catch (const ConfigError& e) {
    std::vector<std::string> lines;
    for (const auto& d : e.diagnostics()) lines.push_back(d.str());
    return lines;
  }
  return {};
}

int gpus(const std::vector<NodeSpec>& nodes) {
  int total = 0;
  for (const NodeSpec& node : nodes) total += node.gpus;
  return total;
}

// Two nodes of 4 GPUs, 100-second rounds, FIFO + first_fit, one trace.
std::string two_nodes(const std::string& extra) {
  return R"([cluster]
nodes = 2
gpus_per_node = 4
)" + extra + R"(
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 100
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
}

}  // namespace

TEST_CASE("a share of 0 holds CPUs and memory on a node and none of its GPU") {
  // One node of 2 GPUs, 32 CPUs, 256 GB. A CPU-only job (openb's, kept with
  // cpu_only = "keep") on GPU 0 at 0 milli: the GPU stays free for whole jobs.
  ClusterState cluster(std::vector<NodeSpec>{{"n0", "v100", 2, 32, 256, 0}});
  const Allocation cpu_only{{0}, 0, 30, 100, {}};
  REQUIRE(cluster.can_assign(cpu_only));
  cluster.assign(7, cpu_only);
  CHECK(cluster.free_gpus() == 2);
  CHECK(cluster.node(0).free_gpus == 2);
  CHECK(cluster.gpu(0).free());
  CHECK(cluster.node(0).free_cpus == 2);
  CHECK(cluster.node(0).free_mem_gb == 156);
  // A whole GPU fits beside it, if the CPUs do.
  CHECK(cluster.fits_on(0, Resources{1, 1000, 2, 0}) == 1);
  CHECK(cluster.fits_on(0, Resources{1, 1000, 4, 0}) == 0);
  cluster.assign(8, Allocation{{0}, 1000, 2, 0, {}});
  CHECK(cluster.node(0).free_gpus == 1);
  CHECK(cluster.gpu(0).jobs == std::vector<JobId>{7, 8});
  cluster.release(7, cpu_only);
  CHECK(cluster.node(0).free_gpus == 1);  // job 8 still holds GPU 0
  CHECK(cluster.node(0).free_cpus == 30);
  cluster.release(8, Allocation{{0}, 1000, 2, 0, {}});
  CHECK(cluster.free_gpus() == 2);
  std::string why;
  CHECK_FALSE(cluster.can_assign(Allocation{{0}, -1, 0, 0, {}}, &why));
  CHECK(why == "GPU share -1 is outside 0..1000");
}

TEST_CASE("groups build a heterogeneous cluster, each group in racks of its own") {
  const auto config = read(R"([[cluster.groups]]
count = 3
gpus_per_node = 8
gpu_type = "a100"
nodes_per_rack = 2
[[cluster.groups]]
count = 2
gpus_per_node = 4
gpu_type = "t4"
cpus_per_node = 48
)");
  const auto& nodes = config.cluster.nodes;
  REQUIRE(nodes.size() == 5);
  CHECK(nodes[0].name == "n0");
  CHECK(nodes[4].name == "n4");
  CHECK(nodes[2].gpu_type == "a100");
  CHECK(nodes[3].gpu_type == "t4");
  CHECK(nodes[3].cpus == 48);
  CHECK(std::vector<int>{nodes[0].rack, nodes[1].rack, nodes[2].rack, nodes[3].rack, nodes[4].rack} ==
        std::vector<int>{0, 0, 1, 2, 2});
  CHECK(gpus(nodes) == 32);
}

TEST_CASE("presets give the published clusters") {
  const auto philly = read("[cluster]\npreset = \"philly\"\n").cluster.nodes;
  CHECK(philly.size() == 552);
  CHECK(gpus(philly) == 2490);
  const auto gavel = read("[cluster]\npreset = \"gavel\"\n").cluster.nodes;
  CHECK(gavel.size() == 27);
  CHECK(gpus(gavel) == 108);
  CHECK(gavel.front().gpu_type == "v100");
  CHECK(gavel.back().gpu_type == "k80");
  const auto synergy = read("[cluster]\npreset = \"synergy\"\n").cluster.nodes;
  CHECK(synergy.size() == 16);
  CHECK(synergy[0].gpus == 8);
  CHECK(synergy[0].cpus == 24);
  CHECK(synergy[0].mem_gb == 500);
  CHECK(gpus(read("[cluster]\npreset = \"pollux\"\n").cluster.nodes) == 64);
  CHECK(gpus(read("[cluster]\npreset = \"blox\"\n").cluster.nodes) == 128);
}

TEST_CASE("a cluster can come from Tiresias's and Alibaba's spec files") {
  TempDir dir;
  dir.write("spec.csv", "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n2,3,4,40,256\n");
  dir.write("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nalpha,64000,262144,2,P100\nbeta,96000,393216,8,V100M16\n");
  const std::string rest = "[workload]\nkind = \"synthetic\"\n[scheduler]\nallocation = { plugin = \"fifo\" }\n"
                           "placement = { plugin = \"first_fit\" }\n";
  const auto tiresias =
      load_experiment(dir.write("t.toml", "[cluster]\ntiresias_spec = \"spec.csv\"\ngpu_type = \"v100\"\n" + rest));
  REQUIRE(tiresias.cluster.nodes.size() == 6);
  CHECK(tiresias.cluster.nodes[4].rack == 1);
  CHECK(tiresias.cluster.nodes[4].gpu_type == "v100");
  CHECK(gpus(tiresias.cluster.nodes) == 24);
  const auto openb = load_experiment(dir.write("o.toml", "[cluster]\nopenb_nodes = \"nodes.csv\"\n" + rest));
  REQUIRE(openb.cluster.nodes.size() == 2);
  CHECK(openb.cluster.nodes[1].name == "beta");
  CHECK(openb.cluster.nodes[1].gpu_type == "V100M16");
  CHECK(openb.cluster.nodes[1].cpus == 96);
  CHECK(openb.cluster.nodes[1].mem_gb == 384);
}

TEST_CASE("cluster mistakes are located and explained") {
  auto found = problems("[cluster]\npreset = \"philly\"\nnodes = 3\n");
  REQUIRE(found.size() == 1);  // the keys it names are not unknown as well
  CHECK(found[0] == "c.toml:1:1: [cluster] takes one of: 'preset', [[cluster.groups]], 'tiresias_spec', "
                    "'openb_nodes', or 'nodes' with 'gpus_per_node'");
  found = problems("[cluster]\npreset = \"phily\"\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "c.toml:2:10: unknown preset 'phily' in [cluster] (valid: philly, blox, gavel, synergy, pollux)");
  found = problems("[cluster]\nnodes = 2\ngpus_per_node = 4\n[[cluster.events]]\nat_seconds = 10\nfail = [\"n7\"]\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "c.toml:6:8: no node named 'n7' in the cluster");
  found = problems("[cluster]\nnodes = 2\ngpus_per_node = 4\n[[cluster.events]]\nat_seconds = 10\nfail = [\"n1\"]\nremove = [\"n0\"]\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "c.toml:4:1: each [[cluster.events]] needs exactly one of add, remove, fail, repair");
  found = problems("[[cluster.groups]]\ncount = 2\ngpus_per_node = 0\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "c.toml:3:17: 'gpus_per_node' in [cluster.groups] must be in 1..1024, got 0");
}

TEST_CASE("a node failure costs exactly the progress since the last checkpoint") {
  // Job 0 runs on n0 from 0, checkpointing every 300 s. n0 fails at 700: the
  // job falls back to its checkpoint at 600 (2400 of 4000 GPU-seconds), is
  // placed on n1 at the round at 700 and needs 400 s more: it ends at 1100.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,4,1000\n");
  const RunResults lossy = simulate(dir, two_nodes(R"([[cluster.events]]
at_seconds = 700
fail = ["n0"]
[failures]
checkpoint_interval_seconds = 300
)"));
  CHECK(lossy.jobs[0].finish == 1100);
  CHECK(lossy.jobs[0].gpu_seconds == doctest::Approx(4 * 700 + 4 * 400));
  CHECK(lossy.jobs[0].attempts == 1);
  CHECK(lossy.jobs[0].preemptions == 0);
  // n0 was down from 700 to the end: the cluster offered 8 GPUs until 700, then 4.
  CHECK(lossy.capacity_gpu_seconds == doctest::Approx(8 * 700 + 4 * 400));

  // Checkpointing continuously, nothing is lost: 700 + 300.
  const RunResults lossless = simulate(dir, two_nodes(R"([[cluster.events]]
at_seconds = 700
fail = ["n0"]
)"));
  CHECK(lossless.jobs[0].finish == 1000);
}

TEST_CASE("a removed node's jobs checkpoint and move; an added node takes waiting jobs") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,4,1000\n0,4,300\n0,4,100\n");
  // t=0: jobs 0 and 1 start on n0 and n1; job 2 waits. t=200: n2 joins, job 2 starts (ends 300).
  // t=500: n0 leaves; job 0 (500 s done) restarts on n1, free since 300, after a 50 s restart: ends 1050.
  const RunResults results = simulate(dir, two_nodes(R"([[cluster.events]]
at_seconds = 500
remove = ["n0"]
[[cluster.events]]
at_seconds = 200
add = { count = 1, gpus_per_node = 4 }
[simulation]
preemption_overhead_seconds = 50
)").insert(0, ""));
  CHECK(results.jobs[2].first_start == 200);
  CHECK(results.jobs[2].finish == 300);
  CHECK(results.jobs[1].finish == 300);
  CHECK(results.jobs[0].finish == 1050);
  CHECK(results.cluster_gpus == 12);
}

TEST_CASE("a job that keeps crashing is retried max_retries times, then fails") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,1000\n0,1,500\n");
  const RunResults results = simulate(dir, two_nodes(R"([failures]
job_failure_probability = 1
max_retries = 2
)"));
  for (const JobRecord& job : results.jobs) {
    CHECK(job.status == "failed");
    CHECK(job.attempts == 3);
    CHECK(job.finish.has_value());
  }
}

TEST_CASE("random node failures are reproducible and every job still finishes") {
  TempDir dir;
  const std::string toml = R"([cluster]
nodes = 8
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 200
jobs_per_hour = 4
seed = 5
[scheduler]
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "consolidated" }
[failures]
node_mtbf_hours = 48
node_repair_hours = 4
checkpoint_interval_seconds = 1800
)";
  const RunResults a = simulate(dir, toml);
  const RunResults b = simulate(dir, toml);
  double extra_work = 0;
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    CHECK(a.jobs[i].status == "finished");
    CHECK(a.jobs[i].finish == b.jobs[i].finish);
    extra_work += a.jobs[i].gpu_seconds - a.jobs[i].total_work;
  }
  CHECK(extra_work > 0);  // lost progress was run again
  CHECK(a.capacity_gpu_seconds < 32 * (a.end_time - a.jobs.front().arrival));  // nodes were down
}

TEST_CASE("shrink_on_failure: an elastic job shrinks when it loses a node, a rigid one waits again") {
  // Two nodes of 4 GPUs. Job 0 (elastic 2..8) spans both nodes with 8 GPUs;
  // n1 fails at 500: it keeps n0's 4 GPUs, pays a 20 s restart and runs at
  // half speed. It had done 8 * 500 = 4000 of 8000 GPU-seconds: 4000 left at
  // 4 GPUs = 1000 s, after 20 s: it ends at 1520.
  // Job 1 (rigid, 4 GPUs, arrives at 600) waits for GPUs.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,min_gpus,max_gpus\n0,8,1000,2,8\n600,4,100,4,4\n");
  const std::string events = R"([[cluster.events]]
at_seconds = 500
fail = ["n1"]
[simulation]
preemption_overhead_seconds = 20
)";
  std::string toml = two_nodes(events);
  toml.replace(toml.find("placement = { plugin = \"first_fit\" }"), 36,
               "placement = { plugin = \"first_fit\" }\nelasticity = { plugin = \"shrink_on_failure\" }");
  const RunResults shrunk = simulate(dir, toml);
  CHECK(shrunk.jobs[0].finish == doctest::Approx(1520));
  CHECK(shrunk.jobs[0].preemptions == 0);
  REQUIRE(shrunk.resizes.size() == 1);
  CHECK(shrunk.resizes[0].time == 500);
  CHECK(shrunk.resizes[0].from_gpus == 8);
  CHECK(shrunk.resizes[0].to_gpus == 4);
  CHECK(shrunk.resizes[0].cost_seconds == 20);
  CHECK(shrunk.jobs[1].first_start == doctest::Approx(1600));  // the round after job 0 ends

  // Without shrinking, job 0 waits for 8 GPUs until n1 is repaired, two
  // hours later (7700), pays 20 s and runs the 500 s left: it ends at 8220;
  // FIFO keeps job 1 behind it until the round at 8300.
  const RunResults requeued = simulate(dir, two_nodes(events));
  CHECK(requeued.resizes.empty());
  CHECK(requeued.jobs[0].finish == doctest::Approx(8220));
  CHECK(requeued.jobs[1].first_start == doctest::Approx(8300));

  // A rigid job is never shrunk, whatever the plugin says.
  dir.write("trace.csv", "arrival,gpus,duration\n0,8,1000\n");
  const RunResults rigid = simulate(dir, toml);
  CHECK(rigid.resizes.empty());
  CHECK(rigid.jobs[0].finish == doctest::Approx(8220));
}

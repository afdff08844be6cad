// The data-driven throughput models, pollux-apps and synergy-sensitivity:
// figures read by hand off the reference data (skipped when ../shared/data
// is absent), exact interpolation on small hand-made tables, configuration
// errors, and whole simulations.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "models/pollux_apps.hpp"
#include "models/synergy_sensitivity.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

JobSpec job_of(const std::string& model, int batch_size = 0) {
  JobSpec job;
  job.model = model;
  job.batch_size = batch_size;
  return job;
}

Shape shape_of(int gpus, int nodes, double cpus = 0, double mem_gb = 0) {
  Shape shape;
  shape.gpus = gpus;
  shape.nodes = nodes;
  shape.cpus = cpus;
  shape.mem_gb = mem_gb;
  return shape;
}

void check_step_time(StepTime actual, double step, double sync) {
  CHECK(actual.step == doctest::Approx(step));
  CHECK(actual.sync == doctest::Approx(sync));
}

// A toy application: 1 GPU steps in 1 s at 10 samples, 2 s at 20; two GPUs
// take 1.5 s on one node, 3 s on two. Two epochs, ending at progress 100
// (validation-10's first) and 250 (validation-40's second).
void write_toy_app(const TempDir& dir, const std::string& name = "toy") {
  dir.write(name + "/placements.csv",
            "placement,local_bsz,step_time,sync_time\n"
            "1,10,1.0,0.0\n"
            "1,20,2.0,0.0\n"
            "2,10,1.5,0.5\n"
            "11,10,3.0,1.0\n"
            "13,10,4.0,2.0\n"
            "22,10,2.0,1.0\n");
  dir.write(name + "/scalability.csv",
            "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
            "4,4,10,5.0,3.0\n"
            "4,8,10,7.0,4.0\n");
  dir.write(name + "/validation-10.csv",
            "progress,iteration,metric,grad_sqr,grad_var\n"
            "100,100,0.5,1,0\n"
            "300,300,0.7,1,2\n");
  dir.write(name + "/validation-40.csv",
            "progress,iteration,metric,grad_sqr,grad_var\n"
            "150,40,0.5,4,0\n"
            "250,70,0.7,1,8\n");
}

// Two profiles of model a (1 and 4 GPUs) and one of b (2 GPUs), on the grid
// CPUs {1, 2, 4} x memory {10, 20} per GPU.
const char* kToySensitivity =
    "model,gpus,best_cpus,best_mem_gb,batch,iter_time_s,speedup_at_best,cpus,mem_gb,relative_throughput\n"
    "a,1,4,20,32,0.5,2,1,10,0.5\n"
    "a,1,4,20,32,0.5,2,1,20,0.6\n"
    "a,1,4,20,32,0.5,2,2,10,1.0\n"
    "a,1,4,20,32,0.5,2,2,20,1.2\n"
    "a,1,4,20,32,0.5,2,4,10,0\n"  // not profiled
    "a,1,4,20,32,0.5,2,4,20,2.0\n"
    "a,4,2,10,32,0.5,0.8,1,10,0.4\n"
    "a,4,2,10,32,0.5,0.8,2,10,0.8\n"
    "b,2,1,10,32,0.5,1,1,10,1\n";

// The problems reported for an experiment whose [workload] model (line 8) is `model`.
std::string config_error(const TempDir& dir, const std::string& model) {
  const fs::path file = dir.write("x.toml",
                                  "[cluster]\nnodes = 1\ngpus_per_node = 4\n\n"
                                  "[workload]\nkind = \"csv\"\npath = \"trace.csv\"\n"
                                  "model = " + model + "\n\n"
                                  "[scheduler]\nallocation = { plugin = \"fifo\" }\n"
                                  "placement = { plugin = \"first_fit\" }\n");
  try {
    load_experiment(file);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::vector<double> jcts(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(NAN) - job.arrival);
  return out;
}

}  // namespace

// ------------------------------------------------------------------ pollux-apps, reference data

TEST_CASE("pollux-apps reads Pollux's six applications with its settings") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  const PolluxAppsModel model(*apps);
  const std::vector<std::string> names(model.profiles().begin(), model.profiles().end());
  CHECK(names == std::vector<std::string>{"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"});

  const PolluxApplication& cifar10 = *model.application("cifar10");
  CHECK(cifar10.init_batch_size() == 128);  // validation-128.csv .. validation-4096.csv
  CHECK(cifar10.max_batch_size() == 4096);
  CHECK(cifar10.min_local_bsz() == 32);  // placements.csv's local_bsz
  CHECK(cifar10.max_local_bsz() == 1024);
  CHECK(cifar10.max_epochs() == 100);
  CHECK(model.application("yolov3")->max_local_bsz() == 8);  // Pollux's setting, not the 16 measured
  CHECK(model.application("yolov3")->max_epochs() == 50);
  CHECK(model.application("bert")->max_epochs() == 2);
  CHECK(model.application("resnet") == nullptr);
}

TEST_CASE("pollux-apps step times are read off placements.csv and scalability.csv") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  const PolluxAppsModel model(*apps);
  const PolluxApplication& cifar10 = *model.application("cifar10");
  const std::vector<int> one_gpu{1};
  // placements.csv lines 2-3: "1,32,0.0427886962890625,0.0004995360016822816", "1,45,0.05048525333404541,..."
  check_step_time(cifar10.step_time(one_gpu, 32), 0.0427886962890625, 0.0004995360016822816);
  check_step_time(cifar10.step_time(one_gpu, 38.5), (0.0427886962890625 + 0.05048525333404541) / 2,
                  (0.0004995360016822816 + 0.000504022404551506) / 2);
  // Line 389, "13,64,...": 3 GPUs on one node and 1 on another, in any order.
  check_step_time(cifar10.step_time(std::vector<int>{3, 1}, 64), 0.1449049234390259, 0.0865192039489746);
  // Without the placement, 4 GPUs on 2 nodes average "13" with "22" (line 719).
  check_step_time(cifar10.step_time(2, 4, 64), (0.1449049234390259 + 0.1699998140335083) / 2,
                  (0.0865192039489746 + 0.11147219543457032) / 2);
  // scalability.csv line 2: "6,6,32,0.14090566635131835,0.09941204528808593".
  check_step_time(cifar10.step_time(std::vector<int>(6, 1), 32), 0.14090566635131835, 0.09941204528808593);
}

TEST_CASE("pollux-apps sizes a job by the end of its last epoch") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  const PolluxAppsModel model(*apps);
  // bert trains 2 epochs; the smallest progress on the 2nd row of its
  // validation-*.csv is validation-12's 14774.0. cifar10: 100 epochs, the
  // smallest on row 100 is validation-256's.
  CHECK(model.default_work(job_of("bert")) == 14774.0);
  CHECK(model.default_work(job_of("cifar10")) == 39062.90816659533);
  CHECK(model.default_work(job_of("cifar10", 4096)) == 39062.90816659533);  // whatever the batch size
  CHECK(model.default_work(job_of("unknown")) == 0);
}

TEST_CASE("pollux-apps efficiency follows Pollux's formula on the gradient statistics") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  const PolluxAppsModel model(*apps);
  const PolluxApplication& cifar10 = *model.application("cifar10");
  // First rows (epoch 0) of validation-512.csv and validation-1024.csv.
  const GradientStats at512{8.220063889732206, 8.914520446545186};
  const GradientStats at1024{8.978532644212862, 6.740279795719679};
  auto efficiency = [](double scale, GradientStats s) { return (s.var + s.sqr) / (s.var / scale + s.sqr) / scale; };

  const GradientStats stats = cifar10.gradient_stats(512, 0);
  CHECK(stats.sqr == doctest::Approx(at512.sqr));
  CHECK(stats.var == doctest::Approx(at512.var));
  CHECK(cifar10.efficiency(512, stats) == doctest::Approx(efficiency(512.0 / 128, at512)));

  const GradientStats between = cifar10.gradient_stats(768, 0);  // halfway between 512 and 1024
  CHECK(between.sqr == doctest::Approx((at512.sqr + at1024.sqr) / 2));
  CHECK(between.var == doctest::Approx((at512.var + at1024.var) / 2));
  CHECK(cifar10.efficiency(768, between) == doctest::Approx(efficiency(768.0 / 128, between)));
  CHECK(cifar10.efficiency(128, stats) == doctest::Approx(1.0));

  // From the start of epoch 1 the second rows count (validation-512.csv line 3).
  const GradientStats epoch1 = cifar10.gradient_stats(512, cifar10.epoch_start(1));
  CHECK(epoch1.sqr == doctest::Approx(0.6935198677965431));
  CHECK(epoch1.var == doctest::Approx(1.7814744166924186));
}

TEST_CASE("pollux-apps splits a batch over GPUs as Pollux's simulator does") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  const PolluxAppsModel model(*apps);
  const PolluxApplication& cifar10 = *model.application("cifar10");
  auto split = [&](int batch, int replicas) {
    const BatchSplit s = cifar10.split(batch, replicas);
    return std::vector<int>{s.atomic_bsz, s.accum_steps};
  };
  CHECK(split(128, 1) == std::vector<int>{128, 0});
  CHECK(split(256, 1) == std::vector<int>{128, 1});    // one GPU above the initial batch accumulates
  CHECK(split(4096, 1) == std::vector<int>{1024, 3});  // at most 1024 per micro-batch
  CHECK(split(8192, 1) == std::vector<int>{512, 7});   // capped at 4096 in all
  CHECK(split(2048, 6) == std::vector<int>{342, 0});   // ceil(2048 / 6)
  CHECK(split(0, 8) == std::vector<int>{32, 0});       // no batch size: 32 per GPU
  CHECK(model.application("ncf")->split(32768, 1).atomic_bsz == 16384);
}

TEST_CASE("pollux-apps trains a fixed-configuration job in the time Pollux's simulator takes") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  // Reference: Job.step of simulator.py (osdi21-artifact) run to completion
  // with this placement and batch size, without its whole-second rounding
  // of epoch ends.
  const PolluxAppsModel model(*apps);
  auto seconds = [&](const std::string& app, int batch, int gpus, int nodes) {
    const JobSpec job = job_of(app, batch);
    return model.default_work(job) / model.rate(job, shape_of(gpus, nodes));
  };
  CHECK(seconds("cifar10", 128, 1, 1) == doctest::Approx(4027.9844063076025));
  CHECK(seconds("cifar10", 2048, 8, 2) == doctest::Approx(868.9923344741867));
  CHECK(seconds("imagenet", 6400, 48, 12) == doctest::Approx(19687.77496776145));
  CHECK(seconds("ncf", 32768, 1, 1) == doctest::Approx(45.93535232720872));
  CHECK(seconds("bert", 384, 16, 4) == doctest::Approx(1323.8830895449114));
}

TEST_CASE("pollux-apps jobs on a fixed allocation finish when Pollux's simulator says, epoch by epoch") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  // The same references as above, now simulated: the rate is each epoch's
  // (rate_at) and changes where the epochs end, not at round boundaries.
  // cifar10 at 2048 on 8 GPUs runs 100 epochs in 869 s, seven per round;
  // ncf finishes its 10 epochs within the first round.
  TempDir dir;
  dir.write("jobs.csv",
            "name,time,application,num_replicas,batch_size\n"
            "a,0,cifar10,8,2048\nb,0,imagenet,48,6400\nc,0,ncf,1,32768\nd,0,bert,16,384\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 30
gpus_per_node = 4

[workload]
kind = "pollux-workload"
path = "jobs.csv"
model = { name = "pollux-apps", path = ")" + apps->string() + R"(" }

[scheduler]
round_seconds = 60
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
)");
  const std::vector<double> jct = jcts(results);
  CHECK(jct[0] == doctest::Approx(868.9923344741867).epsilon(1e-9));
  CHECK(jct[1] == doctest::Approx(19687.77496776145).epsilon(1e-9));
  CHECK(jct[2] == doctest::Approx(45.93535232720872).epsilon(1e-9));
  CHECK(jct[3] == doctest::Approx(1323.8830895449114).epsilon(1e-9));
}

TEST_CASE("pollux-apps refuses nodes larger than any measured placement") {
  const auto apps = shared_data("pollux/apps");
  if (!apps) {
    MESSAGE("skipped: ../shared/data/pollux/apps is absent");
    return;
  }
  const PolluxAppsModel model(*apps);
  CHECK(model.check(ClusterState({{"n0", "v100", 4, 32, 256, 0}})).empty());
  CHECK(model.check(ClusterState({{"n0", "v100", 4, 32, 256, 0}, {"n1", "v100", 8, 32, 256, 0}})) ==
        "node 'n1' has 8 GPUs; the measured placements have at most 4 per node");
}

// ------------------------------------------------------------------ pollux-apps, hand-made data

TEST_CASE("pollux-apps interpolates step times linearly and clamps at the ends") {
  TempDir dir;
  write_toy_app(dir);
  const PolluxAppsModel model(dir.path());
  const PolluxApplication& toy = *model.application("toy");
  const std::vector<int> one{1};
  check_step_time(toy.step_time(one, 15), 1.5, 0);
  check_step_time(toy.step_time(one, 5), 1.0, 0);   // below the smallest local batch
  check_step_time(toy.step_time(one, 30), 2.0, 0);  // above the largest
  check_step_time(toy.step_time(std::vector<int>{2, 2}, 10), 2.0, 1.0);
  check_step_time(toy.step_time(std::vector<int>{0, 3, 1}, 10), 4.0, 2.0);  // empty nodes ignored, rotated to 13
  check_step_time(toy.step_time(2, 4, 10), 3.0, 1.5);                        // mean of 13 and 22
  check_step_time(toy.step_time(2, 3, 10), 3.0, 1.25);                       // between 11 and the 4-GPU mean
  // Three nodes lie halfway between the measured 2 and 4, compared at equal GPUs per node.
  check_step_time(toy.step_time(std::vector<int>{1, 1, 1}, 10), (3.0 + 5.0) / 2, (1.0 + 3.0) / 2);
  check_step_time(toy.step_time(3, 6, 10), (3.0 + 7.0) / 2, (1.5 + 4.0) / 2);
  check_step_time(toy.step_time(8, 8, 10), 7.0, 4.0);  // more nodes than measured: priced as 4
  CHECK(toy.max_gpus_per_node() == 3);
}

TEST_CASE("pollux-apps progress: epochs, gradient statistics, efficiency and goodput by hand") {
  TempDir dir;
  write_toy_app(dir);
  const PolluxAppsModel model(dir.path());
  const PolluxApplication& toy = *model.application("toy");
  CHECK(toy.init_batch_size() == 10);
  CHECK(toy.max_batch_size() == 40);
  CHECK(toy.max_epochs() == 2);  // the shortest curve
  CHECK(toy.epoch_start(1) == 100);
  CHECK(toy.target_progress() == 250);
  CHECK(model.default_work(job_of("toy")) == 250);
  CHECK(toy.epoch_at(0) == 0);
  CHECK(toy.epoch_at(99.9) == 0);
  CHECK(toy.epoch_at(100) == 1);
  CHECK(toy.epoch_at(250) == 2);

  // Batch 20 lies a third of the way from 10 to 40.
  const GradientStats epoch0 = toy.gradient_stats(20, 50);
  CHECK(epoch0.sqr == doctest::Approx(2));
  CHECK(epoch0.var == doctest::Approx(0));
  const GradientStats epoch1 = toy.gradient_stats(20, 120);
  CHECK(epoch1.sqr == doctest::Approx(1));
  CHECK(epoch1.var == doctest::Approx(4));
  CHECK(toy.gradient_stats(20, 1000).var == doctest::Approx(4));  // past the end: the last epoch
  CHECK(toy.gradient_stats(80, 120).var == doctest::Approx(8));   // past the largest batch: its curve

  // gain = (var + sqr) / (var / scale + sqr) = 5 / (4 / 2 + 1); efficiency = gain / scale.
  CHECK(toy.efficiency(20, epoch1) == doctest::Approx(5.0 / 3 / 2));
  CHECK(toy.efficiency(20, GradientStats{0, 0}) == doctest::Approx(0.5));
  // Two replicas of 10 samples on two nodes: 20 samples per 3 s.
  const std::vector<int> spread{1, 1};
  CHECK(toy.throughput(spread, BatchSplit{10, 0}) == doctest::Approx(20.0 / 3));
  CHECK(toy.goodput(spread, BatchSplit{10, 0}, 120) == doctest::Approx(20.0 / 3 * 5 / 6));
  // One GPU, 20 samples, accumulating once: two micro-batches of 2 s with no sync.
  CHECK(toy.throughput(std::vector<int>{1}, BatchSplit{20, 1}) == doctest::Approx(40.0 / 4));
}

TEST_CASE("pollux-apps rate: training-long progress per second for the job's batch and shape") {
  TempDir dir;
  write_toy_app(dir);
  const PolluxAppsModel model(dir.path());
  // Batch 40 on 1 GPU: 2 micro-batches of 20 (max local), 2 s each. Gains:
  // epoch 0 (progress 0-100) 1; epoch 1 (100-250) 9 / (8 / 4 + 1) = 3.
  const double gain40 = 250 / (100 / 1.0 + 150 / 3.0);
  CHECK(model.rate(job_of("toy", 40), shape_of(1, 1)) == doctest::Approx(gain40 / 4));
  // No batch size on 2 GPUs: 10 each, global 20. Gain in epoch 1: 5 / 3.
  const double gain20 = 250 / (100 / 1.0 + 150 / (5.0 / 3));
  CHECK(model.rate(job_of("toy"), shape_of(2, 1)) == doctest::Approx(gain20 / 1.5));
  CHECK(model.rate(job_of("toy"), shape_of(2, 2)) == doctest::Approx(gain20 / 3.0));
  Shape half = shape_of(2, 2);
  half.gpu_milli = 500;
  CHECK(model.rate(job_of("toy"), half) == doctest::Approx(gain20 / 3.0 / 2));
  CHECK_THROWS_AS(model.rate(job_of("other"), shape_of(1, 1)), std::invalid_argument);
}

TEST_CASE("pollux-apps rate_at: each epoch's gain, changing where the epoch ends") {
  TempDir dir;
  write_toy_app(dir);
  const PolluxAppsModel model(dir.path());
  CHECK(model.rate_depends_on_progress());
  // Batch 40 on 1 GPU: two micro-batches of 20, 4 s a batch. Epoch 0 (stats
  // of validation-40's first row, sqr 4, var 0): gain 1. Epoch 1 (sqr 1,
  // var 8): gain 9 / (8 / 4 + 1) = 3.
  const JobSpec job = job_of("toy", 40);
  CHECK(model.rate_at(job, shape_of(1, 1), 0) == doctest::Approx(1.0 / 4));
  CHECK(model.rate_at(job, shape_of(1, 1), 99.9) == doctest::Approx(1.0 / 4));
  CHECK(model.rate_at(job, shape_of(1, 1), 100) == doctest::Approx(3.0 / 4));
  CHECK(model.rate_at(job, shape_of(1, 1), 400) == doctest::Approx(3.0 / 4));  // past the end: the last epoch
  CHECK(model.next_rate_change(job, 0) == 100);
  CHECK(model.next_rate_change(job, 100) == 250);
  CHECK(std::isinf(model.next_rate_change(job, 250)));
  // 100 / (1/4) + 150 / (3/4) = 600 s in all; rate() is the average over them.
  CHECK(model.rate(job, shape_of(1, 1)) == doctest::Approx(250.0 / 600));

  // A layout's batch size overrides the job's.
  Shape shape = shape_of(1, 1);
  shape.layout.batch_size = 40;
  CHECK(model.rate_at(job_of("toy", 10), shape, 100) == doctest::Approx(3.0 / 4));
  CHECK(model.rate(job_of("toy"), shape) == doctest::Approx(250.0 / 600));

  // From the initial batch (or 10 per GPU) up to the largest validated, 40.
  auto range = [&](int gpus) {
    const BatchSizeRange r = model.batch_sizes(job_of("toy"), gpus).value();
    return std::vector<int>{r.smallest, r.largest};
  };
  CHECK(range(1) == std::vector<int>{10, 40});
  CHECK(range(2) == std::vector<int>{20, 40});
  CHECK(range(4) == std::vector<int>{40, 40});
  CHECK(model.batch_sizes(job_of("toy"), 5)->empty());  // 50 samples at the least
}

TEST_CASE("pollux-apps: the simulator follows the rate from epoch to epoch between rounds") {
  // The job above alone, with 1000 s rounds: 400 s in epoch 0 and 200 s in
  // epoch 1. Were its rate re-read only at rounds, it would take 1000 s.
  TempDir dir;
  write_toy_app(dir);
  dir.write("jobs.csv", "name,time,application,num_replicas,batch_size\nj,0,toy,1,40\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 2

[workload]
kind = "pollux-workload"
path = "jobs.csv"
model = { name = "pollux-apps", path = "." }

[scheduler]
round_seconds = 1000
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)");
  CHECK(results.jobs[0].total_work == 250);
  CHECK(jcts(results)[0] == doctest::Approx(600));
}

TEST_CASE("pollux-apps: a job spread over two nodes runs at the measured two-node step time") {
  // 2 nodes x 2 GPUs. first_fit puts job 0 on GPU 0 and job 1 on GPUs 1 and
  // 2, across both nodes. Job 1's 100 s were priced packed on one node (1.5
  // s per step, in epoch 0 throughout: gain 1, 66.7 units), and it runs at
  // the two-node 3 s per step: 200 s.
  TempDir dir;
  write_toy_app(dir);
  dir.write("trace.csv", "arrival,gpus,duration,model\n0,1,100,toy\n0,2,100,toy\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 2
gpus_per_node = 2

[workload]
kind = "csv"
path = "trace.csv"
model = { name = "pollux-apps", path = "." }

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)");
  CHECK(jcts(results)[0] == doctest::Approx(100));
  CHECK(jcts(results)[1] == doctest::Approx(200));
  CHECK(results.jobs[1].total_work == doctest::Approx(100 / 1.5));
}

TEST_CASE("pollux-apps, placement = \"exact\": a shape is priced at its GPUs on each node") {
  TempDir dir;
  write_toy_app(dir);
  const PolluxAppsModel by_count(dir.path());
  const PolluxAppsModel exact(dir.path(), PolluxPlacementPricing::exact);
  // No batch size on 4 GPUs: 10 per GPU, global 40; gains 1 then 3 (epochs
  // of 100 and 150 units): 250 units per 150 step times.
  Shape shape = shape_of(4, 2);
  shape.node_gpus = {3, 1};  // rotated to the measured 13: 4 s a step
  CHECK(exact.rate(job_of("toy"), shape) == doctest::Approx(250.0 / 150 / 4.0));
  CHECK(by_count.rate(job_of("toy"), shape) == doctest::Approx(250.0 / 150 / 3.0));  // mean of 13 and 22
  shape.node_gpus = {2, 2};
  CHECK(exact.rate(job_of("toy"), shape) == doctest::Approx(250.0 / 150 / 2.0));
  CHECK(exact.rate_at(job_of("toy"), shape, 120) == doctest::Approx(3.0 / 2.0));
  // GPUs per node that do not add up to the shape's (a shape built by hand): the node-count mean.
  shape.node_gpus = {1};
  CHECK(exact.rate(job_of("toy"), shape) == doctest::Approx(250.0 / 150 / 3.0));
}

TEST_CASE("pollux-apps, placement = \"exact\": a running job is priced on the nodes it was placed on") {
  // 2 nodes x 3 GPUs, first_fit: job a takes GPUs 0-1, job b GPU 2 on node
  // 0 and all of node 1: 1 + 3, the measured 13, 4 s a step, 150 steps'
  // worth of time (above): 600 s. By node count it is priced at the mean of
  // 13 and 22, 3 s a step: 450 s.
  TempDir dir;
  write_toy_app(dir);
  dir.write("jobs.csv", "name,time,application,num_replicas,batch_size\na,0,toy,2,20\nb,0,toy,4,40\n");
  auto run = [&](const std::string& placement) {
    return jcts(simulate(dir, R"([cluster]
nodes = 2
gpus_per_node = 3

[workload]
kind = "pollux-workload"
path = "jobs.csv"
model = { name = "pollux-apps", path = ".", placement = ")" + placement + R"(" }

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)"))[1];
  };
  CHECK(run("exact") == doctest::Approx(600));
  CHECK(run("node_count") == doctest::Approx(450));
}

TEST_CASE("pollux-apps: rate_change_times = \"whole_seconds\" ends each epoch on a whole second") {
  // The toy job of batch 40 on one GPU: epoch 0 takes 400 s, epoch 1 200 s.
  // A 0.6 s start delays both: exactly, epoch 0 ends at 400.6 and the job
  // at 600.6. On whole seconds epoch 0 ends at 401, where the job has run
  // 0.4 s into epoch 1 and is set back to its start, as Pollux's Job.step
  // does; it ends 200 s later, at 601.
  TempDir dir;
  write_toy_app(dir);
  dir.write("jobs.csv", "name,time,application,num_replicas,batch_size\nj,0,toy,1,40\n");
  auto run = [&](const std::string& times) {
    return jcts(simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 2

[workload]
kind = "pollux-workload"
path = "jobs.csv"
model = { name = "pollux-apps", path = "." }

[scheduler]
round_seconds = 1000
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }

[simulation]
start_overhead_seconds = 0.6
rate_change_times = ")" + times + R"("
)"))[0];
  };
  CHECK(run("exact") == doctest::Approx(600.6));
  CHECK(run("whole_seconds") == 601);
  CHECK_THROWS_WITH_AS(run("seconds"),
                       doctest::Contains("unknown rate_change_times 'seconds' in [simulation] (valid: exact, "
                                         "whole_seconds)"),
                       ConfigError);
}

TEST_CASE("optimus, remaining_work = \"by_epoch\": the work left after the epoch under way") {
  // The toy job of batch 40, rigid on one GPU, with 100 s rounds: epoch 0
  // (100 units at 1/4 a second) ends at 400; on average it trains at 250
  // units per 600 s. At t=100 it has done 25 units: 225 left, 540 s; by
  // epoch, the 150 after epoch 0, 360 s. At t=500, 75 units into its last
  // epoch: 75 left (180 s), or by epoch a token (about 0 s).
  TempDir dir;
  write_toy_app(dir);
  dir.write("jobs.csv", "name,time,application,num_replicas,batch_size\nj,0,toy,1,40\n");
  auto last_reason = [&](const std::string& remaining_work, double time) {
    const RunResults results = simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 2

[workload]
kind = "pollux-workload"
path = "jobs.csv"
model = { name = "pollux-apps", path = "." }

[scheduler]
round_seconds = 100
allocation = { plugin = "optimus", remaining_work = ")" + remaining_work + R"(" }
placement = { plugin = "first_fit" }

[output]
decisions = true
)");
    std::string reason;  // the allocation's last word on the job by `time`
    for (const DecisionRecord& d : results.decisions)
      if (d.stage == PluginKind::allocation && d.time <= time) reason = d.reason;
    return reason;
  };
  CHECK(last_reason("continuous", 100) == "rigid: its request of 1 GPUs; about 540 s left");
  CHECK(last_reason("by_epoch", 100) == "rigid: its request of 1 GPUs; about 360 s left");
  CHECK(last_reason("continuous", 500) == "rigid: its request of 1 GPUs; about 180 s left");
  CHECK(last_reason("by_epoch", 500) == "rigid: its request of 1 GPUs; about 0 s left");
}

TEST_CASE("pollux-apps names the file at fault") {
  TempDir dir;
  write_toy_app(dir);
  const fs::path apps = dir.path();
  auto problem = [&]() -> std::string {
    try {
      PolluxAppsModel model(apps);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  const std::string toy = (apps / "toy").string();

  dir.write("toy/placements.csv", "placement,local_bsz,step_time,sync_time\n1,10,1.0,0.0\n2x,10,1.0,0.0\n");
  CHECK(problem() == toy + "/placements.csv:3: field 'placement': expected the GPUs on each node as digits 1-9, "
                           "such as 22, got '2x'");
  dir.write("toy/placements.csv", "placement,local_bsz,step_time,sync_time\n1,10,1.0,2.0\n");
  CHECK(problem() == toy + "/placements.csv:2: field 'sync_time': exceeds step_time, of which it is a part");
  write_toy_app(dir);
  dir.write("toy/validation-40.csv", "progress,iteration,metric,grad_sqr,grad_var\n150,40,0.5,4,0\n140,70,0.7,1,8\n");
  CHECK(problem() == toy + "/validation-40.csv:3: field 'progress': decreases from the previous epoch's");
  write_toy_app(dir);
  dir.write("toy/validation-x.csv", "progress,grad_sqr,grad_var\n");
  CHECK(problem() == toy + "/validation-x.csv: expected a name validation-<batch size>.csv with a positive integer");
  fs::remove(apps / "toy/validation-x.csv");
  fs::remove(apps / "toy/scalability.csv");
  CHECK(problem() == toy + "/scalability.csv: cannot open trace: No such file or directory");

  // A directory named after a Pollux application must hold its epochs.
  TempDir other;
  write_toy_app(other, "bert");
  other.write("bert/validation-10.csv", "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.5,1,0\n");
  CHECK_THROWS_WITH_AS(PolluxAppsModel(other.path()),
                       ((other.path() / "bert/validation-10.csv").string() +
                        ": holds 1 of the 2 epochs Pollux trains bert for").c_str(),
                       TraceError);
}

// ------------------------------------------------------------------ synergy-sensitivity, reference data

TEST_CASE("synergy-sensitivity reads Synergy's profiles: res18 starves on 1 CPU") {
  const auto csv = shared_data("synergy/model_sensitivity.csv");
  if (!csv) {
    MESSAGE("skipped: ../shared/data/synergy/model_sensitivity.csv is absent");
    return;
  }
  const SynergySensitivityModel model(*csv, {});
  CHECK(model.profiles().size() == 12);
  // Lines 750 and 760: "res18,1,9,62.5,512,0.64,2.4,1,62.5,0.37" and "...,3,62.5,1".
  CHECK(model.relative_throughput("res18", 1, 1, 62.5) == doctest::Approx(0.37));
  CHECK(model.relative_throughput("res18", 1, 3, 62.5) == doctest::Approx(1.0));
  CHECK(model.relative_throughput("res18", 4, 12, 250) == doctest::Approx(1.0));  // 3 CPUs per GPU
  CHECK(model.relative_throughput("res18", 1, 0, 0) == doctest::Approx(1.0));     // the proportional share
  // Lines 542-543: m5 with 6 CPUs gets 2 at 125 GB and 2.5 at 187.5 GB.
  CHECK(model.relative_throughput("m5", 1, 6, 156.25) == doctest::Approx(2.25));
  CHECK(model.rate(job_of("res18"), shape_of(2, 1, 2, 125)) == doctest::Approx(2 * 0.37));

  const SynergyDemand best = model.best_demand("res18", 4);  // the 1-GPU profile, per GPU
  CHECK(best.cpus == 36);
  CHECK(best.mem_gb == 250);
  CHECK(best.speedup == 2.4);
}

TEST_CASE("synergy-sensitivity can use the profile measured on the job's GPU count") {
  const auto csv = shared_data("synergy/model_sensitivity.csv");
  if (!csv) {
    MESSAGE("skipped: ../shared/data/synergy/model_sensitivity.csv is absent");
    return;
  }
  SynergySensitivityModel::Options options;
  options.profiles_by_gpu_count = true;
  const SynergySensitivityModel model(*csv, options);
  const SynergyDemand best = model.best_demand("res18", 4);  // "res18,4,6,62.5,512,0.64,1.75,..."
  CHECK(best.cpus == 24);
  CHECK(best.mem_gb == 250);
  CHECK(best.speedup == 1.75);
  // Line 857: 9 CPUs per GPU was not profiled on 4 GPUs (0); it runs as 6 do (line 853).
  CHECK(model.relative_throughput("res18", 4, 36, 750) == doctest::Approx(1.75));
}

TEST_CASE("synergy-sensitivity: trace durations are at the proportional share, end to end") {
  const auto csv = shared_data("synergy/model_sensitivity.csv");
  if (!csv) {
    MESSAGE("skipped: ../shared/data/synergy/model_sensitivity.csv is absent");
    return;
  }
  // Job 0 declares nothing: 100 GPU-seconds at the share. Job 1 declares 1
  // CPU per GPU, where res18 runs at 0.37. Job 2 gets a random profile.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,model,cpus\n0,1,100,res18,\n0,2,100,res18,2\n0,1,100,,\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 4
cpus_per_node = 24
mem_gb_per_node = 500

[workload]
kind = "csv"
path = "trace.csv"
model = { name = "synergy-sensitivity", path = ")" + csv->string() + R"(" }

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)");
  CHECK(jcts(results) == std::vector<double>{100, 100, 100});
  CHECK(results.jobs[0].total_work == doctest::Approx(100));
  CHECK(results.jobs[1].total_work == doctest::Approx(100 * 2 * 0.37));
  CHECK_FALSE(results.jobs[2].model.empty());
}

// ------------------------------------------------------------------ synergy-sensitivity, hand-made data

TEST_CASE("synergy-sensitivity interpolates bilinearly per GPU and fills unprofiled points") {
  TempDir dir;
  SynergySensitivityModel::Options options;
  options.share_cpus_per_gpu = 2;
  options.share_mem_gb_per_gpu = 20;
  const SynergySensitivityModel model(dir.write("s.csv", kToySensitivity), options);
  CHECK(std::vector<std::string>(model.profiles().begin(), model.profiles().end()) ==
        std::vector<std::string>{"a", "b"});
  CHECK(model.relative_throughput("a", 1, 2, 10) == doctest::Approx(1.0));
  CHECK(model.relative_throughput("a", 1, 1.5, 15) == doctest::Approx((0.5 + 0.6 + 1.0 + 1.2) / 4));
  CHECK(model.relative_throughput("a", 1, 3, 20) == doctest::Approx(1.6));
  CHECK(model.relative_throughput("a", 2, 6, 40) == doctest::Approx(1.6));  // per GPU
  // (4 CPUs, 10 GB) was not profiled: as fast as (2 CPUs, 10 GB).
  CHECK(model.relative_throughput("a", 1, 4, 10) == doctest::Approx(1.0));
  CHECK(model.relative_throughput("a", 1, 3, 10) == doctest::Approx(1.0));
  // Beyond the grid: its edges.
  CHECK(model.relative_throughput("a", 1, 0.5, 5) == doctest::Approx(0.5));
  CHECK(model.relative_throughput("a", 1, 8, 40) == doctest::Approx(2.0));
  // No demand declared: the proportional share, 2 CPUs and 20 GB per GPU here.
  CHECK(model.relative_throughput("a", 1, 0, 0) == doctest::Approx(1.2));
  CHECK(model.relative_throughput("a", 1, 1, 0) == doctest::Approx(0.6));
  // By default every job uses the profile on the fewest GPUs.
  CHECK(model.relative_throughput("a", 4, 8, 80) == doctest::Approx(1.2));
  CHECK(model.relative_throughput("b", 1, 1, 10) == doctest::Approx(1.0));

  CHECK(model.rate(job_of("a"), shape_of(2, 1, 4, 40)) == doctest::Approx(2 * 1.2));
  Shape half = shape_of(2, 1, 4, 40);
  half.gpu_milli = 500;
  CHECK(model.rate(job_of("a"), half) == doctest::Approx(1.2));
  const SynergyDemand best = model.best_demand("a", 4);
  CHECK(best.cpus == 16);
  CHECK(best.mem_gb == 80);
  CHECK(best.speedup == 2);
  CHECK_THROWS_AS(model.rate(job_of("c"), shape_of(1, 1)), std::invalid_argument);
}

TEST_CASE("synergy-sensitivity speedup = best_or_share: the speedup at the best demand, capped to a server") {
  TempDir dir;
  SynergySensitivityModel::Options options;
  options.share_cpus_per_gpu = 1;
  options.share_mem_gb_per_gpu = 10;
  options.best_or_share = true;
  options.server_gpus = 4;  // a server: 4 GPUs, 4 CPUs, 40 GB
  const SynergySensitivityModel model(dir.write("s.csv", kToySensitivity), options);
  // a on 1 GPU: best 4 CPUs, 20 GB, 2x. Below it the profile, never above 1.
  CHECK(model.rate(job_of("a"), shape_of(1, 1, 4, 20)) == doctest::Approx(2));
  CHECK(model.rate(job_of("a"), shape_of(1, 1, 3, 20)) == doctest::Approx(1));  // the profile gives 1.6
  CHECK(model.rate(job_of("a"), shape_of(1, 1, 1, 10)) == doctest::Approx(0.5));
  // On 2 GPUs the best, 8 CPUs and 40 GB, is cut to the server's 4 CPUs and
  // the speedup rescaled between the share (2 CPUs, 1x) and 8 CPUs (2x): 1 + 2/6.
  const SynergyDemand capped = model.capped_demand("a", 2);
  CHECK(capped.cpus == 4);
  CHECK(capped.mem_gb == 40);
  CHECK(capped.speedup == doctest::Approx(4.0 / 3));
  CHECK(model.rate(job_of("a"), shape_of(2, 1, 4, 40)) == doctest::Approx(2 * 4.0 / 3));
  // Wider than a server: the share, no speedup.
  const SynergyDemand wide = model.capped_demand("a", 5);
  CHECK(wide.cpus == 5);
  CHECK(wide.mem_gb == 50);
  CHECK(wide.speedup == 1);
  // Without a server size the best demand stands.
  options.server_gpus = 0;
  const SynergySensitivityModel uncapped(dir.path() / "s.csv", options);
  CHECK(uncapped.capped_demand("a", 2).cpus == 8);
  CHECK(uncapped.rate(job_of("a"), shape_of(2, 1, 4, 40)) == doctest::Approx(2 * 1.0));
  // One iteration: 0.5 s at the share on each GPU.
  CHECK(uncapped.iteration_work(job_of("a"), 2) == doctest::Approx(1.0));
}

TEST_CASE("synergy-sensitivity by GPU count takes the largest profile not above the job's") {
  TempDir dir;
  SynergySensitivityModel::Options options;
  options.profiles_by_gpu_count = true;
  const SynergySensitivityModel model(dir.write("s.csv", kToySensitivity), options);
  // a on 4 GPUs: (1, 10) 0.4 and (2, 10) 0.8; its 20 GB column is absent and filled from 10 GB.
  CHECK(model.relative_throughput("a", 4, 4, 40) == doctest::Approx(0.4));
  CHECK(model.relative_throughput("a", 8, 16, 160) == doctest::Approx(0.8));
  CHECK(model.relative_throughput("a", 2, 4, 40) == doctest::Approx(1.2));  // 1-GPU profile
  CHECK(model.relative_throughput("b", 1, 1, 10) == doctest::Approx(1.0));  // only profile: 2 GPUs
  CHECK(model.best_demand("a", 4).cpus == 8);
}

TEST_CASE("synergy-sensitivity names the line at fault") {
  TempDir dir;
  const std::string header =
      "model,gpus,best_cpus,best_mem_gb,batch,iter_time_s,speedup_at_best,cpus,mem_gb,relative_throughput\n";
  auto problem = [&](const std::string& rows) -> std::string {
    const fs::path file = dir.write("s.csv", header + rows);
    try {
      SynergySensitivityModel model(file, {});
    } catch (const UserError& e) {
      return std::string(e.what()).substr(file.string().size());
    }
    return "";
  };
  CHECK(problem("a,1,4,20,32,0.5,2,1,10,fast\n") ==
        ":2: field 'relative_throughput': expected a number >= 0, got 'fast'");
  CHECK(problem("a,1,4,20,32,0.5,2,1,10,1\na,1,4,20,32,0.5,2,1,10,1\n") ==
        ":3: repeats the point cpus = 1, mem_gb = 10 of a on 1 GPU");
  CHECK(problem("a,1,4,20,32,0.5,2,1,10,1\na,1,6,20,32,0.5,2,2,10,1\n") ==
        ":3: field 'best_cpus': best_cpus, best_mem_gb, speedup_at_best and iter_time_s differ from earlier rows of a "
        "on 1 GPU");
  CHECK(problem("a,1,4,20,32,0.5,2,1,10,1\na,1,4,20,32,0.7,2,2,10,1\n") ==
        ":3: field 'best_cpus': best_cpus, best_mem_gb, speedup_at_best and iter_time_s differ from earlier rows of a "
        "on 1 GPU");
  CHECK(problem("a,2,4,20,32,0.5,2,1,10,0\na,2,4,20,32,0.5,2,2,10,1\n") ==
        ": a on 2 GPUs has no profiled point at or below cpus = 1, mem_gb = 10");
  CHECK(problem("a,1,4,20,32,0.5,2,0,10,1\n") == ":2: field 'cpus': expected a positive number of CPUs per GPU");
  CHECK(problem("") == ": no profiles");
}

// ------------------------------------------------------------------ configuration

TEST_CASE("the models read their arguments like any config key") {
  TempDir dir;
  write_toy_app(dir, "apps/toy");
  const std::string x = (dir.path() / "x.toml").string();
  CHECK(config_error(dir, R"({ name = "pollux-apps", path = "apps" })").empty());
  dir.write("s.csv", kToySensitivity);
  CHECK(config_error(dir, R"({ name = "synergy-sensitivity", path = "s.csv", speedup = "best" })") ==
        x + ":8:67: unknown speedup 'best' in [workload.model] (valid: interpolated, best_or_share)");
  CHECK(config_error(dir, R"({ name = "synergy-sensitivity", path = "s.csv", server_gpus = 8 })") ==
        x + ":8:71: synergy-sensitivity: 'server_gpus' caps the best demand of speedup = \"best_or_share\"; with "
            "\"interpolated\" the rate follows what a job holds");
  CHECK(config_error(dir, R"({ name = "pollux-apps" })") ==
        x + ":8:9: [workload.model] is missing required key 'path'");
  CHECK(config_error(dir, R"({ name = "pollux-apps", path = "apps", colour = 1 })") ==
        x + ":8:48: unknown key 'colour' in [workload.model] (valid: name, path, placement)");
  CHECK(config_error(dir, R"({ name = "pollux-apps", path = "apps", placement = "exact" })").empty());
  CHECK(config_error(dir, R"({ name = "pollux-apps", path = "apps", placement = "packed" })") ==
        x + ":8:60: unknown placement 'packed' in [workload.model] (valid: node_count, exact)");
  CHECK(config_error(dir, R"({ name = "pollux-apps", path = "nowhere" })") ==
        x + ":8:40: pollux-apps: '" + (dir.path() / "nowhere").string() + "' is not a directory");
  CHECK(config_error(dir, R"({ name = "pollux-apps", path = "x.toml" })") ==
        x + ":8:40: pollux-apps: '" + x + "' is not a directory");
  dir.write("empty/notes.txt", "");
  CHECK(config_error(dir, R"({ name = "pollux-apps", path = "empty" })") ==
        x + ":8:40: pollux-apps: '" + (dir.path() / "empty").string() +
            "' holds no application directories (such as cifar10/ with placements.csv)");

  dir.write("s.csv", kToySensitivity);
  CHECK(config_error(dir, R"({ name = "synergy-sensitivity", path = "s.csv", share_cpus_per_gpu = 4 })").empty());
  CHECK(config_error(dir, R"({ name = "synergy-sensitivity", share_cpus_per_gpu = 0 })") ==
        x + ":8:9: [workload.model] is missing required key 'path'\n" + x +
            ":8:62: 'share_cpus_per_gpu' in [workload.model] must be >= 0.001, got 0");
  CHECK(config_error(dir, R"({ name = "synergy-sensitivity", path = "s.csv", gpus = 2 })") ==
        x + ":8:57: unknown key 'gpus' in [workload.model] (valid: name, path, profiles_by_gpu_count, "
            "server_gpus, share_cpus_per_gpu, share_mem_gb_per_gpu, speedup)");
  CHECK(config_error(dir, R"({ name = "synergy-sensitivity", path = "missing.csv" })") ==
        x + ":8:48: synergy-sensitivity: " + (dir.path() / "missing.csv").string() +
            ": cannot open trace: No such file or directory");
}

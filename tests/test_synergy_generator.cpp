// Synergy's generator, draw for draw: CPython's `random` (PythonRandom) and
// `[workload] kind = "synergy"` against what Python itself gives.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "common/python_random.hpp"
#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"
#include "workloads/synergy_generator.hpp"
#include "workloads/workload.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

std::string experiment(const std::string& workload) {
  return "[cluster]\nnodes = 2\ngpus_per_node = 8\n\n[workload]\nkind = \"synergy\"\n" + workload +
         "\n[scheduler]\nallocation = { plugin = \"fifo\" }\nplacement = { plugin = \"first_fit\" }\n";
}

}  // namespace

// /usr/bin/python3 (3.11.2) -c "import random
// r=random.Random(42); print([repr(r.random()) for _ in range(3)])
// r=random.Random(42); print([r.getrandbits(32) for _ in range(3)])
// r=random.Random(42); print([r.randint(0,9) for _ in range(12)])
// r=random.Random(2**40+5); print([repr(r.random()) for _ in range(2)])
// r=random.Random(0); print([repr(r.random()) for _ in range(2)])
// r=random.Random(42); print(repr(r.uniform(1.5,3)), repr(60*10**r.uniform(3,4)))"
TEST_CASE("PythonRandom: CPython's random.seed(int), random(), getrandbits(), randint(), uniform()") {
  {
    PythonRandom r(42);
    CHECK(r.random() == 0.6394267984578837);
    CHECK(r.random() == 0.025010755222666936);
    CHECK(r.random() == 0.27502931836911926);
  }
  {
    PythonRandom r(42);
    CHECK(r.getrandbits(32) == 2746317213U);
    CHECK(r.getrandbits(32) == 478163327U);
    CHECK(r.getrandbits(32) == 107420369U);
  }
  {
    // _randbelow(10) draws 4 bits and rejects 10..15: the counts of 32-bit
    // outputs used differ from draw to draw.
    PythonRandom r(42);
    std::vector<std::int64_t> drawn;
    for (int i = 0; i < 12; ++i) drawn.push_back(r.randint(0, 9));
    CHECK(drawn == std::vector<std::int64_t>{1, 0, 4, 3, 3, 2, 1, 8, 1, 9, 6, 0});
  }
  {
    PythonRandom r((std::int64_t{1} << 40) + 5);  // a seed of two 32-bit words
    CHECK(r.random() == 0.5043802970418443);
    CHECK(r.random() == 0.2686044399723282);
  }
  {
    PythonRandom r(0);
    CHECK(r.random() == 0.8444218515250481);
    CHECK(r.random() == 0.7579544029403025);
  }
  {
    PythonRandom r(42);
    CHECK(r.uniform(1.5, 3) == 2.4591401976868257);
    CHECK(60 * std::pow(10.0, r.uniform(3, 4)) == 63556.79746350358);
  }
  PythonRandom r(1);
  CHECK_THROWS_AS(r.getrandbits(33), std::invalid_argument);
  CHECK_THROWS_AS(r.randint(3, 2), std::invalid_argument);
}

// The reference is Synergy's own Workload.generate_next_job (msr-fiddle/synergy
// commit 1bb2bed, simulator/, run with /usr/bin/python3 3.11.2): a Philly-format
// cluster_job_log of 8,000 one-attempt single-GPU jobs, Workload(cluster_job_log,
// jobs_per_hour=np.float64(9.0), sum_attempts=True, exponential=True,
// model_class_split=(20, 70, 10), per_server_size=[8, 24, 500, 500]) built once
// after random.seed(42) (writing philly_jobs_sum_attempts_exp_single.pickle) and
// again after random.seed(42) (reading it), then generate_next_job(last arrival)
// and add_runnable_job(job.job_class_id) per job, as Runner does, printing
// job_id, job_arrival_time, job_model.model_name, job_total_iteration,
// job_iteration_time, job_total_iteration * job_iteration_time.
TEST_CASE("synergy generator: seed 42 gives Synergy's own jobs, arrival, model and iterations") {
  struct Expected {
    std::size_t id;
    double arrival;
    const char* model;
    double iterations;
    double duration;
  };
  const Expected expected[] = {
      {0, 409, "alexnet", 3447, 2068.2},
      {1, 951, "gnmt", 34181, 4101.72},
      {2, 1053, "transformer", 29317, 19642.39},
      {3, 1505, "m5", 122162, 73297.2},
      {4, 1542, "lstm", 191185, 2103.035},
      {5, 1555, "gnmt", 90573, 10868.76},
      {6, 1654, "res18", 5891, 3770.2400000000002},
      {7, 2023, "transformer", 18598, 12460.66},
      {8, 2112, "lstm", 1320252, 14522.771999999999},
      {9, 2330, "gnmt", 507538, 60904.56},
      {10, 2686, "res50", 383880, 299426.4},
      {3999, 1583852, "gnmt", 217629, 26115.48},  // the first tracked job's predecessor
      {5999, 2391549, "lstm", 1760648, 19367.128},
  };
  SynergyGeneratorParameters p;
  p.jobs = 6000;
  const Trace trace = synergy_jobs(p, 42);
  REQUIRE(trace.jobs.size() == 6000);
  for (const Expected& e : expected) {
    CAPTURE(e.id);
    const TraceJob& job = trace.jobs[e.id];
    CHECK(job.spec.arrival == e.arrival);
    CHECK(job.spec.model == e.model);
    CHECK(job.spec.gpus == 1);
    CHECK(job.duration == e.duration);
  }
  // Seed 7, the first three (the same command with random.seed(7)).
  const Trace seven = synergy_jobs(p, 7);
  CHECK(seven.jobs[0].spec.arrival == 157);
  CHECK(seven.jobs[0].duration == 3194.4);
  CHECK(seven.jobs[1].spec.arrival == 358);
  CHECK(seven.jobs[1].duration == 2436.72);
  CHECK(seven.jobs[2].spec.model == "transformer");
  CHECK(seven.jobs[2].duration == 6709.38);
}

TEST_CASE("synergy generator: ModelAssignment.OVERALL keeps the class split exact, each class's models in turn") {
  SynergyGeneratorParameters p;
  p.jobs = 1000;
  p.class_split = {20, 70, 10};
  const Trace trace = synergy_jobs(p, 3);
  std::map<std::string, int> per_model;
  for (const TraceJob& job : trace.jobs) ++per_model[job.spec.model];
  // 200 image jobs over 5 models, 700 language over 3, 100 speech over 2.
  CHECK(per_model["alexnet"] == 40);
  CHECK(per_model["shufflenet"] == 40);
  CHECK(per_model["gnmt"] == 234);
  CHECK(per_model["transformer"] == 233);
  CHECK(per_model["lstm"] == 233);
  CHECK(per_model["m5"] == 50);
  CHECK(per_model["deepspeech"] == 50);
  // Another split moves the shares; the arrivals stay (the same draws).
  p.class_split = {50, 0, 50};
  const Trace other = synergy_jobs(p, 3);
  per_model.clear();
  for (const TraceJob& job : other.jobs) ++per_model[job.spec.model];
  CHECK(per_model["alexnet"] == 100);
  CHECK(per_model["m5"] == 250);
  CHECK(per_model.count("gnmt") == 0);
  CHECK(other.jobs[999].spec.arrival == trace.jobs[999].spec.arrival);
}

TEST_CASE("synergy generator: the zoo's iteration times are the profiles'; work is whole iterations") {
  const auto profiles = shared_data("synergy/model_sensitivity.csv");
  if (!profiles) {
    MESSAGE("skipped: ../shared/data/synergy/model_sensitivity.csv is absent");
    return;
  }
  TempDir dir;
  const ExperimentConfig config = load_experiment(dir.write(
      "e.toml", experiment("jobs = 200\nmodel = { name = \"synergy-sensitivity\", path = \"" + profiles->string() +
                           "\" }\n")));
  const Workload workload = build_workload(config.workload, ClusterState(config.cluster.nodes));
  REQUIRE(workload.jobs.size() == 200);
  for (const SynergyZooModel& model : synergy_model_zoo()) {
    JobSpec spec;
    spec.model = std::string(model.name);
    spec.gpus = 1;
    CHECK(workload.model->iteration_work(spec, 1) == doctest::Approx(model.iteration_seconds).epsilon(1e-12));
  }
  // Run seed 1 (the default): job 0 of random.seed(1) is an alexnet of
  // int(seconds / 0.6) iterations.
  for (const JobSpec& job : workload.jobs) {
    const double iterations = job.total_work / workload.model->iteration_work(job, 1);
    CHECK(std::abs(iterations - std::round(iterations)) < 1e-6);
  }
  CHECK(workload.jobs[0].model == "alexnet");
}

TEST_CASE("synergy generator: bad keys are refused with the key named") {
  TempDir dir;
  const auto refused = [&](const std::string& keys, const char* what) {
    CAPTURE(keys);
    CHECK_THROWS_WITH_AS(load_experiment(dir.write("e.toml", experiment(keys))), doctest::Contains(what),
                         ConfigError);
  };
  refused("class_split = [20, 80]\n", "class_split");
  refused("class_split = [0, 0, 0]\n", "class_split");
  refused("jobs_per_hour = 0\n", "jobs_per_hour");
  refused("jobs = 0\n", "jobs");
  refused("gpu_counts = [1, 2]\n", "gpu_counts");  // not a key of this kind
}

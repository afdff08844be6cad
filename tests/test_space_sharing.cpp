// Space sharing: two whole-GPU jobs on the same GPUs, each at the rate the
// co-location table gives the pair. The cluster's bookkeeping of a shared
// GPU, gavel's `_packed` policies on a hand-worked case (finish times,
// the `jobs` and `samples` columns, `tessel explain`), and the errors: a
// table that lacks a pair, a packed policy on a model with no pairs.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "fifo_scheduler.hpp"
#include "models/gavel_table.hpp"
#include "support.hpp"
#include "tessel/cluster.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

NodeSpec node(int gpus) {
  NodeSpec spec;
  spec.name = "n0";
  spec.gpus = gpus;
  return spec;
}

Allocation on(std::vector<GpuId> gpus) {
  Allocation allocation;
  allocation.gpus = std::move(gpus);
  return allocation;
}

// One V100. Alone, Alpha runs 6 steps/s and Beta 4; sharing the GPU, Alpha
// runs 4 and Beta 3 (each pair listed under both jobs, [own, partner]).
const char* kPairTable = R"json({
  "v100": {
    "('Alpha', 1)": {"null": 6.0, "('Alpha', 1)": [3.0, 3.0], "('Beta', 1)": [4.0, 3.0]},
    "('Beta', 1)": {"null": 4.0, "('Alpha', 1)": [3.0, 4.0], "('Beta', 1)": [2.0, 2.0]}
  }
})json";

// Alpha with 2,400 steps (400 s alone on the V100), Beta with 2,700 (675 s).
const char* kTwoJobs = "arrival,gpus,duration,model\n0,1,400,Alpha\n0,1,675,Beta\n";

std::string experiment(const std::string& policy, const std::string& model = "gavel-table") {
  const std::string model_line = model == "gavel-table"
                                     ? R"(model = { name = "gavel-table", path = "throughputs.json" })"
                                     : R"(model = { name = ")" + model + R"(" })";
  return R"([[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "v100"

[workload]
kind = "csv"
path = "trace.csv"
reference_gpu_type = "v100"
)" + model_line + R"(

[scheduler]
round_seconds = 300
allocation = { plugin = "gavel", policy = ")" +
         policy + R"(" }
placement = { plugin = "consolidated" }

[output]
database = "e.db"
decisions = true
)";
}

}  // namespace

TEST_CASE("a GPU two whole-GPU jobs share stays busy until both leave") {
  ClusterState cluster({node(2)});
  cluster.assign(0, on({0}));
  std::string why;
  CHECK_FALSE(cluster.can_share(on({1}), 2, &why));  // GPU 1 is free: nothing to share
  CHECK(why == "GPU 1 is not held by whole-GPU jobs alone");
  CHECK(cluster.can_share(on({0}), 2));
  cluster.share(1, on({0}), 2);
  CHECK(cluster.gpu(0).jobs == std::vector<JobId>{0, 1});
  CHECK(cluster.gpu(0).sharers == 1);
  CHECK(cluster.free_gpus() == 1);
  CHECK(cluster.shared_gpus() == 1);
  CHECK_FALSE(cluster.can_share(on({0}), 2, &why));
  CHECK(why == "GPU 0 already holds 2 jobs, the most the throughput model prices together");

  // The first tenant leaves: the GPU stays busy with the second.
  cluster.release(0, on({0}));
  CHECK(cluster.gpu(0).jobs == std::vector<JobId>{1});
  CHECK(cluster.gpu(0).used_milli == 1000);
  CHECK(cluster.shared_gpus() == 0);
  CHECK(cluster.free_gpus() == 1);
  cluster.release(1, on({0}));
  CHECK(cluster.gpu(0).free());
  CHECK(cluster.free_gpus() == 2);

  // A fractional tenant's GPU is not shared whole.
  Allocation half = on({1});
  half.gpu_milli = 500;
  cluster.assign(2, half);
  CHECK_FALSE(cluster.can_share(on({1}), 2));
}

TEST_CASE("gavel max_min_fairness_packed: the pair's time share and its finish times, by hand") {
  // One V100, so prop_j (throughput on an equal share) is the job's own rate:
  // Alpha 6, Beta 4. With shares a (Alpha alone), b (Beta alone) and p (the
  // pair), a + b + p <= 1, Alpha's normalised throughput is (6a + 4p) / 6
  // and Beta's (4b + 3p) / 4. Max-min: b = 0, a = 1 - p and
  // 1 - p + 2p/3 = 3p/4, so p = 12/13, a = 1/13, z = 9/13.
  //
  // Rounds: the pair's priority (12/13) / 0.5 beats Alpha's (1/13) / 0.5, so
  // the pair runs from 0, and again at 300 ((12/13) / 1.5 against the same
  // 2/13). Alpha does its 2,400 steps at 4/s: done at 600. Beta has done
  // 3 x 600 = 1,800 of its 2,700 steps and runs alone from then, at 4/s:
  // the other 900 take 225 s, done at 825.
  TempDir dir;
  dir.write("throughputs.json", kPairTable);
  dir.write("trace.csv", kTwoJobs);
  const RunResults results = simulate(dir, experiment("max_min_fairness_packed"));
  REQUIRE(results.jobs.size() == 2);
  CHECK(results.jobs[0].finish == doctest::Approx(600));
  CHECK(results.jobs[1].finish == doctest::Approx(825));
  CHECK(results.jobs[0].shared_seconds == doctest::Approx(600));
  CHECK(results.jobs[1].shared_seconds == doctest::Approx(600));
  bool reasoned = false;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == 1 && d.time == 0 && d.stage == PluginKind::allocation) {
      CHECK(d.reason.find("runs sharing its GPUs with job 0 on v100") != std::string::npos);
      CHECK(d.reason.find("the pair's time share 0.9231 there") != std::string::npos);
      CHECK(d.reason.find("every job gets at least 0.6923 times") != std::string::npos);
      reasoned = true;
    }
  CHECK(reasoned);

  // Without space sharing the V100 is time-shared (max-min equalises
  // 6a / 6 = 4(1 - a) / 4: half each), in 300-s rounds: Alpha needs 400 s
  // alone, so it cannot finish by 600.
  const RunResults alone = simulate(dir, experiment("max_min_fairness"), "alone.toml");
  CHECK(alone.jobs[0].shared_seconds == 0);
  CHECK(*alone.jobs[0].finish > 600);
}

TEST_CASE("space sharing is in the store's jobs and samples, and tessel explain says with whom") {
  TempDir dir;
  dir.write("throughputs.json", kPairTable);
  dir.write("trace.csv", kTwoJobs);
  dir.write("e.toml", experiment("min_total_duration_packed"));
  const CommandResult run = run_tessel({"run", "e.toml"}, dir.path());
  REQUIRE_MESSAGE(run.code == 0, run.err);
  const fs::path db = dir.path() / "e.db";
  // min_total_duration_packed: with the pair all the time both jobs finish
  // by 825 s; apart, the V100 needs 400 + 675 = 1,075 s. The pair runs at 0.
  CHECK(count(db, "SELECT COUNT(*) FROM jobs WHERE shared_seconds > 0") == 2);
  CHECK(count(db, "SELECT shared_gpus FROM samples WHERE time = 0") == 1);
  CHECK(count(db, "SELECT MAX(shared_gpus) FROM samples WHERE time >= 900") == 0);

  const CommandResult explain = run_tessel({"explain", "e.db", "1"}, dir.path());
  REQUIRE_MESSAGE(explain.code == 0, explain.err);
  CHECK(explain.out.find("shared its GPUs with other jobs for") != std::string::npos);
  CHECK(explain.out.find("shares GPU 0 with job 0 (space sharing)") != std::string::npos);
  const CommandResult host = run_tessel({"explain", "e.db", "0"}, dir.path());
  CHECK(host.out.find("job 1 joins it on its GPU 0") != std::string::npos);
}

TEST_CASE("a co-location table that lacks a pair is an error naming the file and the pair") {
  TempDir dir;
  // Beta's pairs are missing under both jobs.
  dir.write("throughputs.json", R"json({
  "v100": {
    "('Alpha', 1)": {"null": 6.0, "('Alpha', 1)": [3.0, 3.0]},
    "('Beta', 1)": {"null": 4.0}
  }
})json");
  dir.write("trace.csv", kTwoJobs);
  dir.write("e.toml", experiment("max_min_fairness_packed"));
  const CommandResult run = run_tessel({"run", "e.toml"}, dir.path());
  CHECK(run.code == 2);
  CHECK(run.err.find("throughputs.json: no co-location throughput for 'Alpha' beside 'Beta' on 1 v100 GPU") !=
        std::string::npos);
}

TEST_CASE("a packed policy on a model without co-location throughputs is refused") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,400\n0,1,675\n");
  dir.write("e.toml", experiment("max_min_fairness_packed", "linear"));
  const CommandResult run = run_tessel({"run", "e.toml"}, dir.path());
  CHECK(run.code == 2);
  CHECK(run.err.find("'max_min_fairness_packed' pairs jobs on shared GPUs, but throughput model 'linear' has no "
                     "co-location throughputs") != std::string::npos);
}

TEST_CASE("a daemon recovering two jobs on one GPU adopts them as sharing it; one leaving regroups the other") {
  TempDir dir;
  const fs::path table = dir.write("throughputs.json", kPairTable);
  NodeSpec v100 = node(1);
  v100.gpu_type = "v100";
  Scheduler scheduler(fifo_plugins(), ClusterState({v100}),
                      std::make_shared<GavelTableModel>(table.string(), false), SchedulerSettings{});
  for (JobId id : {0u, 1u}) {
    JobState saved;
    saved.spec.id = id;
    saved.spec.model = id == 0 ? "Alpha" : "Beta";
    saved.spec.total_work = 1000;
    saved.status = JobStatus::running;
    saved.attempts = 1;
    scheduler.restore(saved);
  }
  scheduler.adopt(0, on({0}), 10);
  scheduler.adopt(1, on({0}), 10);
  CHECK(scheduler.cluster().gpu(0).sharers == 1);
  REQUIRE(scheduler.partners(0).size() == 1);
  CHECK(scheduler.partners(0)[0] == 1);
  CHECK(scheduler.partners(1)[0] == 0);

  scheduler.report_progress(0, 100, 70);
  scheduler.report_progress(1, 100, 70);
  CHECK(scheduler.job(0).shared_seconds == 60);
  scheduler.interrupt(0, 70);
  CHECK(scheduler.partners(1).empty());
  CHECK(scheduler.take_regrouped() == std::vector<JobId>{1});
  CHECK(scheduler.cluster().gpu(0).jobs == std::vector<JobId>{1});
  CHECK(scheduler.cluster().shared_gpus() == 0);
  // Alone now: its time no longer counts as shared.
  scheduler.report_progress(1, 200, 100);
  CHECK(scheduler.job(1).shared_seconds == 60);
}

TEST_CASE("tessel serve refuses a model that prices shared GPUs: real nodes run one launch per GPU") {
  TempDir dir;
  dir.write("throughputs.json", kPairTable);
  dir.write("secret", "a-shared-secret-for-the-tests-0123456789\n");
  fs::permissions(dir.path() / "secret", fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  dir.write("serve.toml", R"([scheduler]
allocation = { plugin = "gavel", policy = "max_min_fairness_packed" }
placement = { plugin = "consolidated" }
[serve]
listen = "127.0.0.1:0"
model = { name = "gavel-table", path = "throughputs.json" }
[output]
database = "serve.db"
)");
  const auto refused = run_tessel({"serve", "serve.toml", "--secret-file", "secret"}, dir.path());
  CHECK(refused.code == 2);
  CHECK(refused.err.find("[serve] model: 'gavel-table' prices jobs sharing a GPU, which real nodes do not run") !=
        std::string::npos);
}

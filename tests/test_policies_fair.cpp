// The allocation plugins optimus, drf and vc_fair_share, each on a
// hand-made trace whose decisions and completion times are worked out by
// hand in the comments (themis: tests/test_policies_themis.cpp); and their
// argument errors as a user meets them.
//
// The workload model is `linear`: a job's work is its duration times its
// GPUs, and it progresses at one unit per GPU per second.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// 100-second rounds, decisions recorded, consolidated placement.
std::string experiment(const std::string& cluster, const std::string& allocation, const std::string& extra = "") {
  return "[cluster]\n" + cluster + R"(
[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
round_seconds = 100
allocation = )" + allocation + R"(
placement = { plugin = "consolidated" }

[output]
decisions = true
)" + extra;
}

std::string one_node(int gpus) { return "nodes = 1\ngpus_per_node = " + std::to_string(gpus); }

std::vector<double> jcts(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(NAN) - job.arrival);
  return out;
}

std::vector<int> preemptions(const RunResults& results) {
  std::vector<int> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.preemptions);
  return out;
}

// "time code: reason" of one job's decisions at one stage.
std::vector<std::string> decisions_of(const RunResults& results, JobId job, PluginKind stage) {
  std::vector<std::string> out;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.stage == stage) out.push_back(std::to_string(int(d.time)) + " " + d.code + ": " + d.reason);
  return out;
}

// The allocation decision about `job` at `time`, or "" if none was recorded then.
std::string allocation_at(const RunResults& results, JobId job, double time) {
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.stage == PluginKind::allocation && d.time == time) return d.code + ": " + d.reason;
  return "";
}

}  // namespace

// ------------------------------------------------------------------ optimus

TEST_CASE("optimus gives the third GPU to the larger marginal gain, then grows the survivor") {
  // Three GPUs; two elastic jobs on [1, 3] GPUs, each asking for 1:
  // job 0 has 600 GPU-seconds of work, job 1 has 200.
  // t=0    minimums: 1 GPU each. Third GPU: job 0 gains T(1) - T(2) = 600 - 300 = 300 s,
  //        job 1 gains 200 - 100 = 100 s  ->  job 0 runs on 2 GPUs, job 1 on 1.
  // t=100  job 0 has 400 left, job 1 100: gains 400 - 200 = 200 vs 100 - 50 = 50; unchanged.
  // t=200  job 1 finishes (JCT 200). Job 0 (200 left) alone: +1 saves 100 s, +1 more saves
  //        33 s; its maximum is 3  ->  3 GPUs, 200/3 s to go: finishes at 266.67.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,min_gpus,max_gpus\n0,1,600,1,3\n0,1,200,1,3\n");
  const RunResults results = simulate(dir, experiment(one_node(3), R"({ plugin = "optimus" })"));
  const std::vector<double> jct = jcts(results);
  CHECK(jct[0] == doctest::Approx(200 + 200.0 / 3));
  CHECK(jct[1] == doctest::Approx(200));
  CHECK(results.jobs[0].gpu_seconds == doctest::Approx(600));
  CHECK(results.jobs[1].gpu_seconds == doctest::Approx(200));
  CHECK(preemptions(results) == std::vector<int>{0, 0});
  CHECK(allocation_at(results, 0, 0) ==
        "grant: 2 GPUs by marginal gain; about 300 s left; one more would save 100 s, less than the gains that "
        "took the cluster's GPUs");
  CHECK(allocation_at(results, 1, 0) ==
        "grant: 1 GPUs by marginal gain; about 200 s left; one more would save 100 s, less than the gains that "
        "took the cluster's GPUs");
  CHECK(allocation_at(results, 0, 200) == "grant: 3 GPUs, its maximum, by marginal gain; about 67 s left");
}

TEST_CASE("optimus, remaining_work = \"by_epoch\": a model without epochs counts continuously") {
  // The trace of the first optimus test; `linear` has no epochs, so its
  // decisions and times are the same (by epoch proper: tests/test_perf_models.cpp).
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,min_gpus,max_gpus\n0,1,600,1,3\n0,1,200,1,3\n");
  const RunResults results =
      simulate(dir, experiment(one_node(3), R"({ plugin = "optimus", remaining_work = "by_epoch" })"));
  CHECK(jcts(results)[0] == doctest::Approx(200 + 200.0 / 3));
  CHECK(jcts(results)[1] == doctest::Approx(200));
  CHECK(allocation_at(results, 0, 200) == "grant: 3 GPUs, its maximum, by marginal gain; about 67 s left");
}

TEST_CASE("optimus shrinks a running elastic job for a newcomer instead of preempting it") {
  // Two GPUs. Job 0 is elastic on [1, 2] with 1000 GPU-seconds; job 1 (1 GPU, 100 s) arrives at 50.
  // t=0    job 0 alone takes both GPUs.
  // t=100  job 0 has done 200, 800 left. Minimums 1 + 1 fill the cluster: job 0 shrinks to 1
  //        GPU in place (listed first, so the core resizes it before placing job 1), job 1 starts.
  // t=200  job 1 ends (JCT 150); job 0 (700 left) grows back to 2 GPUs: ends at 200 + 350 = 550.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,min_gpus,max_gpus\n0,1,1000,1,2\n50,1,100,1,1\n");
  const RunResults results = simulate(dir, experiment(one_node(2), R"({ plugin = "optimus" })"));
  CHECK(jcts(results) == std::vector<double>{550, 150});
  CHECK(preemptions(results) == std::vector<int>{0, 0});
  CHECK(results.jobs[1].first_start == 100);
  const auto placed = decisions_of(results, 0, PluginKind::placement);
  REQUIRE(placed.size() == 3);
  CHECK(placed[1].starts_with("100 resize: "));
  CHECK(placed[2].starts_with("200 resize: "));
}

TEST_CASE("optimus admits minimums shortest remaining time first when they do not all fit") {
  // Two GPUs, three rigid 1-GPU jobs at t=0 needing 300, 100 and 200 s.
  // t=0    by remaining time: job 1 (100), job 2 (200) run; job 0 (300) waits.
  // t=100  job 1 ends (JCT 100); job 0 starts on its GPU. t=200: job 2 ends (JCT 200).
  //        Job 0 ends at 400.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,300\n0,1,100\n0,1,200\n");
  const RunResults results = simulate(dir, experiment(one_node(2), R"({ plugin = "optimus" })"));
  CHECK(jcts(results) == std::vector<double>{400, 100, 200});
  CHECK(allocation_at(results, 0, 0) ==
        "deny: needs at least 1 GPUs; the minimums of jobs with less remaining time fill the cluster's 2 GPUs");
  CHECK(allocation_at(results, 1, 0) == "grant: rigid: its request of 1 GPUs; about 100 s left");
}

TEST_CASE("optimus, minimums_order = \"arrival\": minimums go to the earliest jobs") {
  // The same jobs; jobs 0 and 1 run, job 2 waits for job 1's GPU at 100
  // and ends at 300. Job 0 ends at 300.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,300\n0,1,100\n0,1,200\n");
  const RunResults results =
      simulate(dir, experiment(one_node(2), R"({ plugin = "optimus", minimums_order = "arrival" })"));
  CHECK(jcts(results) == std::vector<double>{300, 100, 300});
  CHECK(allocation_at(results, 2, 0) ==
        "deny: needs at least 1 GPUs; the minimums of earlier arrivals fill the cluster's 2 GPUs");
}

// ------------------------------------------------------------------ drf

namespace {

// One node of 3 GPUs, 12 CPUs, 64 GB. Alice's jobs (0, 1) each take 1 GPU, 1 CPU, 24 GB: shares
// GPU 1/3, CPU 1/12, memory 24/64 = 0.375, so each adds 0.375 to her dominant share (memory).
// Bob's jobs (2, 3) each take 1 GPU, 1 CPU, 2 GB: dominant GPU, 1/3 each.
std::string drf_experiment(const std::string& allocation) {
  return experiment(one_node(3) + "\ncpus_per_node = 12\nmem_gb_per_node = 64", allocation);
}
const char* kDrfTrace =
    "arrival,gpus,duration,tenant,cpus,mem_gb\n"
    "0,1,600,alice,1,24\n"
    "0,1,600,alice,1,24\n"
    "0,1,300,bob,1,2\n"
    "0,1,300,bob,1,2\n";

}  // namespace

TEST_CASE("drf serves the tenant with the lowest dominant share; memory makes alice's larger") {
  // Progressive filling at t=0:
  //   alice 0, bob 0: equal, alice's next job (0) arrived first  -> job 0; alice 0.375
  //   bob 0 < 0.375                                               -> job 2; bob 1/3
  //   bob 1/3 < 0.375                                             -> job 3; bob 2/3; 3 GPUs used
  //   alice 0.375: job 1 needs a GPU, none is left                -> waits
  // By GPUs alone alice (1 GPU) and bob (1 GPU) would tie at step 3 and alice would win it.
  // t=300  bob's jobs end (JCT 300); job 1 starts, ends at 900. Job 0 ends at 600.
  TempDir dir;
  dir.write("trace.csv", kDrfTrace);
  const RunResults results = simulate(dir, drf_experiment(R"({ plugin = "drf" })"));
  CHECK(jcts(results) == std::vector<double>{600, 900, 300, 300});
  CHECK(results.jobs[1].first_start == 300);
  CHECK(allocation_at(results, 3, 0) ==
        "grant: its tenant's weighted dominant share was 0.3333 (GPUs 0.3333, CPUs 0.08333, memory 0.03125), the "
        "lowest of tenants still asking");
  CHECK(allocation_at(results, 1, 0) ==
        "deny: does not fit in what tenants with lower dominant shares left: 0 GPUs, 9 CPUs, 36 GB free");
}

TEST_CASE("drf weights divide a tenant's dominant share") {
  // weights = { alice = 2 }: each alice job adds 0.375 / 2 = 0.1875.
  //   tie at 0 -> job 0 (alice 0.1875); bob 0 -> job 2 (bob 1/3); alice 0.1875 < 1/3 -> job 1
  //   (alice 0.375); bob: job 3 finds no GPU and waits.
  // t=300  job 2 ends; job 3 starts, ends at 600. Alice's jobs end at 600.
  TempDir dir;
  dir.write("trace.csv", kDrfTrace);
  const RunResults results = simulate(dir, drf_experiment(R"({ plugin = "drf", weights = { alice = 2 } })"));
  CHECK(jcts(results) == std::vector<double>{600, 600, 300, 600});
  CHECK(allocation_at(results, 1, 0) ==
        "grant: its tenant's weighted dominant share was 0.1875 (GPUs 0.3333, CPUs 0.08333, memory 0.375), the "
        "lowest of tenants still asking");
}

// ------------------------------------------------------------------ vc_fair_share

namespace {

// Four GPUs, quotas a = b = 0.5 (2 GPUs each). VC a's jobs 0 and 1 (2 GPUs, 1000 s: 2000
// GPU-seconds each) arrive at 0; VC b's job 2 (2 GPUs, 100 s) at 150.
const char* kVcTrace = "arrival,gpus,duration,vc\n0,2,1000,a\n0,2,1000,a\n150,2,100,b\n";

}  // namespace

TEST_CASE("vc_fair_share lends idle quota and reclaims it by preemption when the owner's job arrives") {
  // t=0    job 0 is within a's quota (2 of 2); job 1 is beyond it and borrows b's idle GPUs.
  // t=200  job 2 arrived: within b's quota, ranked above the borrower. No GPU is free, so the
  //        core preempts job 1 (the lowest-ranked running job) and no one else: job 2 runs
  //        200..300 (JCT 150).
  // t=300  job 1 borrows again: it did 400 of 2000 GPU-seconds, 1600 left on 2 GPUs: ends at
  //        1100. Job 0 ends at 1000.
  TempDir dir;
  dir.write("trace.csv", kVcTrace);
  const RunResults results = simulate(
      dir, experiment(one_node(4), R"({ plugin = "vc_fair_share", quotas = { a = 0.5, b = 0.5 } })"));
  CHECK(jcts(results) == std::vector<double>{1000, 1100, 150});
  CHECK(preemptions(results) == std::vector<int>{0, 1, 0});
  CHECK(results.jobs[1].first_start == 0);
  CHECK(results.jobs[2].first_start == 200);
  CHECK(allocation_at(results, 1, 0) ==
        "grant: its VC's quota of 2 GPUs is taken (2 in use or queued ahead); may borrow idle GPUs until their VC "
        "needs them");
  CHECK(allocation_at(results, 2, 200) == "grant: within its VC's quota: 2 of 2 GPUs with this job");
  CHECK(decisions_of(results, 1, PluginKind::placement)[1] ==
        "200 preempt: preempted so that job 2 (higher priority) can run");
}

TEST_CASE("vc_fair_share without lending keeps a VC to its quota while GPUs idle") {
  // lend_idle = false: job 1 waits although two GPUs are idle until 200; it starts when job 0
  // ends at 1000 and ends at 2000. Job 2 runs 200..300. Nobody is preempted.
  TempDir dir;
  dir.write("trace.csv", kVcTrace);
  const std::string allocation = R"({ plugin = "vc_fair_share", quotas = { a = 0.5, b = 0.5 }, lend_idle = false })";
  const RunResults results = simulate(dir, experiment(one_node(4), allocation));
  CHECK(jcts(results) == std::vector<double>{1000, 2000, 150});
  CHECK(preemptions(results) == std::vector<int>{0, 0, 0});
  CHECK(allocation_at(results, 1, 0) ==
        "deny: its VC's quota of 2 GPUs is taken (2 in use or queued ahead) and lend_idle is off");
}

TEST_CASE("vc_fair_share: VCs not listed share what the listed ones leave") {
  // quotas = { a = 0.5 }: VC c (not listed) owns the other 2 GPUs. Job 2 of VC c is within that
  // pool's quota and reclaims it from a's borrower exactly as b did above.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,vc\n0,2,1000,a\n0,2,1000,a\n150,2,100,c\n");
  const RunResults results =
      simulate(dir, experiment(one_node(4), R"({ plugin = "vc_fair_share", quotas = { a = 0.5 } })"));
  CHECK(jcts(results) == std::vector<double>{1000, 1100, 150});
  CHECK(preemptions(results) == std::vector<int>{0, 1, 0});
}

// ------------------------------------------------------------------ arguments

TEST_CASE("wrong argument values are reported at the argument, file:line:col") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n");
  struct Case {
    const char* allocation;
    const char* expected;
  };
  // `allocation = ...` is line 10 of experiment(); the column is the argument's value.
  const Case cases[] = {
      {R"({ plugin = "themis", fairness_knob = 1.5 })",
       "bad.toml:10:51: argument 'fairness_knob' of allocation plugin 'themis': must be in [0, 1], got 1.5"},
      {R"({ plugin = "themis", fairness_knob = -0.1 })",
       "bad.toml:10:51: argument 'fairness_knob' of allocation plugin 'themis': must be in [0, 1], got -0.1"},
      {R"({ plugin = "vc_fair_share", quotas = { a = -0.5 } })",
       "bad.toml:10:51: argument 'quotas' of allocation plugin 'vc_fair_share': the share of VC 'a' must be in "
       "[0, 1], got -0.5"},
      {R"({ plugin = "vc_fair_share", quotas = { a = 0.7, b = 0.4 } })",
       "bad.toml:10:51: argument 'quotas' of allocation plugin 'vc_fair_share': the shares add up to 1.1, more "
       "than the whole cluster (1)"},
      {R"({ plugin = "drf", weights = { alice = 0 } })",
       "bad.toml:10:42: argument 'weights' of allocation plugin 'drf': the weight of tenant 'alice' must be > 0, "
       "got 0"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.allocation);
    dir.write("bad.toml", experiment(one_node(4), c.allocation));
    const auto result = run_tessel({"validate", "bad.toml"}, dir.path());
    CHECK(result.code == 2);
    CHECK(result.err == std::string(c.expected) + "\n");
  }
}

// ------------------------------------------------------------------ whole runs

TEST_CASE("each policy finishes an elastic, multi-tenant, multi-VC workload within every job's range") {
  // 160 jobs, one a minute, on 16 GPUs: elastic in [1, 2 x request], three tenants, four VCs,
  // CPUs and memory declared. After every round: sizes within range, no GPU double-booked.
  std::string trace = "arrival,gpus,duration,tenant,vc,min_gpus,max_gpus,cpus,mem_gb\n";
  const int sizes[] = {1, 2, 1, 4, 1, 2, 8};
  for (int i = 0; i < 160; ++i) {
    const int gpus = sizes[i % 7];
    trace += std::to_string(i * 60) + "," + std::to_string(gpus) + "," + std::to_string(300 + (i * 7919) % 7200) +
             ",t" + std::to_string(i % 3) + ",v" + std::to_string(i % 4) + ",1," + std::to_string(2 * gpus) + "," +
             std::to_string(2 * gpus) + "," + std::to_string(16 * gpus) + "\n";
  }
  TempDir dir;
  dir.write("trace.csv", trace);
  PluginRegistry registry;
  for (const char* allocation : {R"({ plugin = "optimus" })", R"({ plugin = "themis", fairness_knob = 0.5 })",
                                 R"({ plugin = "drf", weights = { t0 = 2 } })",
                                 R"({ plugin = "vc_fair_share", quotas = { v0 = 0.4, v1 = 0.3 } })"}) {
    CAPTURE(allocation);
    dir.write("run.toml", experiment("nodes = 4\ngpus_per_node = 4\ncpus_per_node = 32\nmem_gb_per_node = 256",
                                     allocation));
    Simulation simulation(load_experiment(dir.path() / "run.toml", {}), registry);
    std::size_t rounds = 0;
    simulation.observe_rounds([&](double, const Scheduler& scheduler, const RoundOutcome&) {
      ++rounds;
      std::vector<int> used(scheduler.cluster().gpus().size(), 0);
      for (const JobState* job : scheduler.jobs()) {
        if (!job->running()) continue;
        CHECK(job->allocation.gpu_count() >= job->spec.min_gpus);
        CHECK(job->allocation.gpu_count() <= job->spec.max_gpus);
        for (GpuId gpu : job->allocation.gpus) used[gpu] += job->allocation.gpu_milli;
      }
      for (GpuId gpu = 0; gpu < used.size(); ++gpu) CHECK(used[gpu] == scheduler.cluster().gpu(gpu).used_milli);
    });
    const RunResults results = simulation.run();
    CHECK(rounds > 0);
    for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
  }
}

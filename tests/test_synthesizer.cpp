// The synthesizer: what-if simulations through the lab choose the policy.
#include <doctest/doctest.h>

#include "fifo_scheduler.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// One node of 4 GPUs. A long 4-GPU job arrives first, then eight short
// 1-GPU jobs: SRTF lets the short ones pass, FIFO makes them wait.
const char* kTrace =
    "arrival,gpus,duration\n"
    "0,4,20000\n"
    "100,1,300\n100,1,300\n100,1,300\n100,1,300\n"
    "200,1,600\n200,1,600\n200,1,600\n200,1,600\n";

std::string experiment(const std::string& allocation, const std::string& admission = "{ plugin = \"accept_all\" }") {
  return R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 100
admission = )" + admission + R"(
allocation = )" + allocation + R"(
placement = { plugin = "first_fit" }
[output]
decisions = true
)";
}

std::vector<double> finishes(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(-1));
  return out;
}

}  // namespace

TEST_CASE("the synthesizer picks the candidate its forecasts favour, and runs exactly like it") {
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults srtf = simulate(dir, experiment(R"({ plugin = "srtf" })"));
  const RunResults fifo = simulate(dir, experiment(R"({ plugin = "fifo" })"));
  REQUIRE(finishes(srtf) != finishes(fifo));

  // SRTF first: whenever the forecasts tie, the synthesizer keeps it.
  const RunResults chosen = simulate(dir, experiment(R"({ plugin = "synthesizer", every_rounds = 1, horizon_seconds = 100000, )"
                                              R"(candidates = ["accept_all + srtf", "accept_all + fifo"] })"));
  CHECK(finishes(chosen) == finishes(srtf));
  // The delegate's reasons are what users see.
  bool srtf_reason = false;
  for (const DecisionRecord& d : chosen.decisions)
    srtf_reason = srtf_reason || (d.plugin == "synthesizer" && d.code == "grant" &&
                                  d.reason.find("remaining") != std::string::npos);
  CHECK(srtf_reason);

  // Listed second, SRTF still wins on its forecast.
  const RunResults reordered = simulate(dir, experiment(R"({ plugin = "synthesizer", every_rounds = 1, horizon_seconds = 100000, )"
                                              R"(candidates = ["accept_all + fifo", "accept_all + srtf"] })"));
  double mean_reordered = 0, mean_fifo = 0;
  for (std::size_t i = 0; i < reordered.jobs.size(); ++i) {
    mean_reordered += *reordered.jobs[i].finish - reordered.jobs[i].arrival;
    mean_fifo += *fifo.jobs[i].finish - fifo.jobs[i].arrival;
  }
  CHECK(mean_reordered < mean_fifo);
}

TEST_CASE("the synthesizer switches admission too") {
  // The run starts with an admission that rejects every job beyond one
  // waiting. Candidate 1 keeps it; its forecast counts the rejected jobs'
  // time to the horizon's end, far beyond when accept_all would finish them:
  // the synthesizer switches to accept_all before the short jobs arrive, and
  // nobody is rejected.
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const std::string strict = R"({ plugin = "max_queue", max_waiting = 1 })";
  const RunResults alone = simulate(dir, experiment(R"({ plugin = "fifo" })", strict));
  std::size_t rejected = 0;
  for (const JobRecord& job : alone.jobs) rejected += job.status == "rejected";
  REQUIRE(rejected > 0);

  const RunResults results = simulate(dir, experiment(R"({ plugin = "synthesizer", every_rounds = 1, )"
                                                      R"(horizon_seconds = 100000, candidates = )"
                                                      R"(["max_queue { max_waiting = 1 } + fifo", "accept_all + fifo"] })",
                                                      strict));
  for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
  bool admitted_by_accept_all = false;
  for (const DecisionRecord& d : results.decisions)
    admitted_by_accept_all = admitted_by_accept_all || (d.code == "admit" && d.plugin == "accept_all");
  CHECK(admitted_by_accept_all);
}

TEST_CASE("a candidate the lab cannot create is the user's error") {
  TempDir dir;
  dir.write("trace.csv", kTrace);
  dir.write("bad.toml", experiment(R"({ plugin = "synthesizer", candidates = ["accept_all + lass"] })"));
  const auto result = run_tessel({"run", "bad.toml", "-q"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.starts_with("policy 'lass': unknown allocation plugin 'lass' (valid: "));
  CHECK(run_tessel({"validate", "bad.toml"}, dir.path()).code == 0);  // caught only when it runs

  dir.write("worse.toml", experiment(R"({ plugin = "synthesizer", candidates = ["fifo"] })"));
  const auto worse = run_tessel({"validate", "worse.toml"}, dir.path());
  CHECK(worse.code == 2);
  CHECK(worse.err.find("argument 'candidates' of allocation plugin 'synthesizer': 'fifo' is not \"admission + "
                       "allocation\"") != std::string::npos);
}

namespace {

// One 4-GPU node, rounds of 100 s. Job 0 (2 GPUs) arrives at 0, jobs 1 and
// 2 (1 GPU, 500 s) at 50, job 3 (1 GPU, 100 s) at 300. The run starts with
// load_based admission at 0.5x, which admits at most 2 GPUs of demand: job 0
// at t=0, and then holds jobs 1 and 2 while job 0 runs.
const char* kProbeTrace = "arrival,gpus,duration\n0,2,1000\n50,1,500\n50,1,500\n300,1,100\n";

struct Probe {
  double in_system = -1, queueing = -1, end = -1;
  std::size_t jobs = 0, finished = 0;
};

// At round 1 (t=100) the probe forecasts "accept_all + fifo" and adopts it.
Probe probe(const TempDir& dir, const std::string& options, RunResults* out = nullptr) {
  const std::string allocation = "{ plugin = \"forecast_probe\", path = \"" + test_plugin("forecast_probe").string() +
                                 "\", admission = \"accept_all\", allocation = \"fifo\", at_round = 1" + options + " }";
  const RunResults results = simulate(dir, experiment(allocation, R"({ plugin = "load_based", factor = 0.5 })"));
  Probe p;
  for (const DecisionRecord& d : results.decisions)
    if (d.reason.starts_with("forecast ")) {
      REQUIRE(d.time == 100);
      std::sscanf(d.reason.c_str(), "forecast in_system=%lf queueing=%lf jobs=%zu finished=%zu end=%lf", &p.in_system,
                  &p.queueing, &p.jobs, &p.finished, &p.end);
    }
  if (out != nullptr) *out = results;
  return p;
}

}  // namespace

TEST_CASE("a forecast is what adopting its candidate does: admission switches from the next round") {
  // t=100: load_based holds jobs 1 and 2 this round; the probe adopts
  // accept_all + fifo, so they are admitted at t=200 and run 200..700. Job 3
  // (t=300) waits for a GPU until 700 and ends at 800; job 0 ends at 1000.
  // JCTs 1000, 650, 650, 500: mean 700. Queueing 0, 150, 150, 400: 175.
  // (A forecast that admitted them again at t=100 would say 625.)
  TempDir dir;
  dir.write("trace.csv", kProbeTrace);
  RunResults results;
  const Probe p = probe(dir, ", horizon_seconds = 0", &results);
  CHECK(finish_times(results) == std::vector<double>{1000, 700, 700, 800});
  CHECK(p.jobs == 4);
  CHECK(p.finished == 4);
  CHECK(p.in_system == doctest::Approx(700).epsilon(1e-12));
  CHECK(p.queueing == doctest::Approx(175).epsilon(1e-12));
  CHECK(p.end == 1000);
}

TEST_CASE("a forecast without known arrivals simulates only the jobs already submitted") {
  // As above without job 3: jobs 0, 1, 2 end at 1000, 700, 700. JCTs 1000,
  // 650, 650: mean 766.67; queueing 0, 150, 150: 100. The forecast ends
  // with its last job, at 1000.
  TempDir dir;
  dir.write("trace.csv", kProbeTrace);
  const Probe p = probe(dir, ", horizon_seconds = 0, known_arrivals = false");
  CHECK(p.jobs == 3);
  CHECK(p.finished == 3);
  CHECK(p.in_system == doctest::Approx(2300.0 / 3).epsilon(1e-12));
  CHECK(p.queueing == doctest::Approx(100).epsilon(1e-12));
  CHECK(p.end == 1000);
}

TEST_CASE("a forecast with a horizon counts unfinished jobs to its end") {
  // Horizon 400 s from t=100: nobody finishes by 500. Time in system to 500:
  // 500, 450, 450 and 200 (job 3 arrived at 300): mean 400. Queueing: 0, 150,
  // 150, and job 3 never starts before 500: 200; mean 125.
  TempDir dir;
  dir.write("trace.csv", kProbeTrace);
  const Probe p = probe(dir, ", horizon_seconds = 400");
  CHECK(p.jobs == 4);
  CHECK(p.finished == 0);
  CHECK(p.in_system == doctest::Approx(400).epsilon(1e-12));
  CHECK(p.queueing == doctest::Approx(125).epsilon(1e-12));
  CHECK(p.end == 500);
}

TEST_CASE("on a tie the synthesizer keeps its current choice") {
  // SRTF wins the first evaluation (the short jobs pass the long one). Once
  // the short jobs are done, only job 0 is left and every candidate's
  // forecast is the same: the synthesizer stays with SRTF instead of going
  // back to FIFO, the first listed. The delegate's reasons name it.
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults results = simulate(dir, experiment(R"({ plugin = "synthesizer", every_rounds = 1, )"
                                                      R"(horizon_seconds = 100000, )"
                                                      R"(candidates = ["accept_all + fifo", "accept_all + srtf"] })"));
  std::string last_grant;
  double last_time = -1;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == 0 && d.code == "grant" && d.time >= last_time) {
      last_grant = d.reason;
      last_time = d.time;
    }
  CHECK(last_time >= 0);
  CHECK(last_grant.starts_with("accept_all + srtf: "));
  for (const DecisionRecord& d : results.decisions)
    if (d.code == "grant") CHECK_FALSE(d.reason.starts_with("accept_all + fifo"));
}

TEST_CASE("a forecast sees the run's failures: planned, random nodes and crashing jobs, with the run's draws") {
  // Whatever fails, a forecast run to completion from round 1 is what the
  // run then does: it continues the run's events and random draws.
  TempDir dir;
  dir.write("trace.csv",
            "arrival,gpus,duration\n0,2,900\n0,1,600\n50,1,400\n120,2,700\n250,1,300\n400,2,500\n");
  const std::string allocation = "{ plugin = \"forecast_probe\", path = \"" + test_plugin("forecast_probe").string() +
                                 "\", admission = \"accept_all\", allocation = \"las\", at_round = 1 }";
  const RunResults results = simulate(dir, R"([cluster]
nodes = 2
gpus_per_node = 2
[[cluster.events]]
at_seconds = 450
fail = ["n1"]
[workload]
kind = "csv"
path = "trace.csv"
seed = 3
[scheduler]
round_seconds = 100
allocation = )" + allocation + R"(
placement = { plugin = "first_fit" }
[simulation]
preemption_overhead_seconds = 20
[failures]
node_mtbf_hours = 0.3
node_repair_hours = 0.05
checkpoint_interval_seconds = 100
job_failure_probability = 0.5
max_retries = 100
[output]
decisions = true
)");
  Probe p;
  for (const DecisionRecord& d : results.decisions)
    if (d.reason.starts_with("forecast "))
      std::sscanf(d.reason.c_str(), "forecast in_system=%lf queueing=%lf jobs=%zu finished=%zu end=%lf", &p.in_system,
                  &p.queueing, &p.jobs, &p.finished, &p.end);
  double in_system = 0, queueing = 0, end = 0;
  std::size_t jobs = 0, crashed = 0;
  for (const JobRecord& job : results.jobs) {
    REQUIRE(job.status == "finished");
    crashed += job.attempts > 1;
    if (*job.finish <= 100) continue;  // done before the forecast
    ++jobs;
    in_system += *job.finish - job.arrival;
    queueing += *job.first_start - job.arrival;
    end = std::max(end, *job.finish);
  }
  CHECK(crashed > 0);
  CHECK(p.jobs == jobs);
  CHECK(p.finished == jobs);
  CHECK(p.in_system == doctest::Approx(in_system / jobs).epsilon(1e-12));
  CHECK(p.queueing == doctest::Approx(queueing / jobs).epsilon(1e-12));
  CHECK(p.end == end);
}

TEST_CASE("a fork copies every job, done ones too, with its slots; the fork's plugins see only their own") {
  std::unique_ptr<Scheduler> parent_scheduler = fifo_scheduler({NodeSpec{"n0", "v100", 4, 32, 256, 0}});
  Scheduler& parent = *parent_scheduler;
  JobSpec spec;
  spec.gpus = spec.min_gpus = spec.max_gpus = 1;
  spec.total_work = 100;
  parent.submit(spec, 0);
  parent.submit(spec, 0);
  parent.run_round(0);
  parent.complete(0, 10, JobStatus::finished);

  SlotRegistry parent_plugin;
  Slot<int> mine(parent_plugin.next_job_slot());
  mine(parent.job(0).slots) = 1;
  mine(parent.job(1).slots) = 2;

  ComposedScheduler plugins = fifo_plugins();
  const std::shared_ptr<SlotRegistry> fork_slots = plugins.slots;
  std::unique_ptr<Scheduler> fork = parent.fork(std::move(plugins));
  CHECK(&fork->job(0) != &parent.job(0));  // done, and still copied
  CHECK(mine(fork->job(0).slots) == 1);
  CHECK(mine(fork->job(1).slots) == 2);

  Slot<std::string> theirs(fork_slots->next_job_slot());
  theirs(fork->job(0).slots) = "written by the fork";
  mine(fork->job(0).slots) = 3;
  CHECK(mine(parent.job(0).slots) == 1);
}

// The simulated cluster, checked against job completion times worked out by
// hand on small traces.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "engine/errors.hpp"
#include "plugins/registry.hpp"
#include "results/sqlite.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// One node of 4 GPUs, 100-second rounds.
std::string experiment(const std::string& allocation, const std::string& placement,
                       const std::string& extra = "") {
  return R"([cluster]
nodes = 1
gpus_per_node = 4

[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
round_seconds = 100
allocation = )" + allocation + R"(
placement = )" + placement + "\n" + extra;
}

const char* kTrace =
    "arrival,gpus,duration\n"
    "0,2,250\n"    // job 0
    "0,4,100\n"    // job 1: needs the whole node
    "50,2,120\n"   // job 2
    "120,1,60\n";  // job 3

std::vector<double> jcts(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(NAN) - job.arrival);
  return out;
}

// Simulates the experiment with `model` in place of the configured one (when
// given). A run still going after `max_rounds` rounds fails the test
// instead of hanging it.
RunResults simulate_bounded(const TempDir& dir, const std::string& toml,
                            std::shared_ptr<const ThroughputModel> model = nullptr, int max_rounds = 1000) {
  const ExperimentConfig config = load_experiment(dir.write("experiment.toml", toml));
  PluginRegistry registry(config.scheduler.plugin_path);
  Simulation simulation(config, registry, std::move(model));
  int rounds = 0;
  simulation.observe_rounds([&](double now, const Scheduler&, const RoundOutcome&) {
    if (++rounds > max_rounds)
      throw std::runtime_error("the run does not end: round " + std::to_string(rounds) + " at " +
                               std::to_string(now) + " s");
  });
  return simulation.run();
}

// One GPU-second of work per GPU-second, as `linear`, but a rate that (the
// model says) depends on progress: it changes every `epoch` units of work,
// or only once, `before_end` short of the job's total work.
class EpochModel final : public ThroughputModel {
 public:
  explicit EpochModel(double epoch, double before_end = 0) : epoch_(epoch), before_end_(before_end) {}
  std::string_view name() const override { return "epochs"; }
  double rate(const JobSpec&, const Shape& shape) const override { return shape.gpus * shape.gpu_milli / 1000.0; }
  bool rate_depends_on_progress() const override { return true; }
  double next_rate_change(const JobSpec& job, double progress) const override {
    if (before_end_ > 0) {
      const double change = job.total_work - before_end_;
      return progress < change ? change : std::numeric_limits<double>::infinity();
    }
    return (std::floor(progress / epoch_) + 1) * epoch_;
  }

 private:
  double epoch_;
  double before_end_;
};

// FGD's protocol on one node of 4 GPUs (see "pods that never leave" below):
// six pods that never end, all arriving at 0.
const char* kEndlessPods =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n"
    "p0,1000,1024,2,1000,,LS,Running,10,20,10\n"
    "p1,1000,1024,4,1000,,LS,Running,10,20,10\n"
    "p2,1000,1024,1,600,,LS,Running,10,20,10\n"
    "p3,1000,1024,1,500,,LS,Running,10,20,10\n"
    "p4,1000,1024,1,300,,LS,Running,10,20,10\n"
    "p5,1000,1024,1,1000,,LS,Pending,10,20,\n";

std::string endless_pods(const std::string& allocation, const std::string& extra = "") {
  return R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "openb"
path = "pods.csv"
times = "ignore"
[scheduler]
round_seconds = 1
allocation = )" + allocation + R"(
placement = { plugin = "first_fit" }
)" + extra;
}

std::vector<int> held_gpus(const RunResults& results) {
  std::vector<int> held;
  for (const JobRecord& job : results.jobs) held.push_back(job.held_gpus);
  return held;
}

}  // namespace

TEST_CASE("FIFO + first_fit, exact completion: JCTs by hand") {
  // t=0    round: job 0 starts on 2 GPUs; job 1 (4 GPUs) does not fit and blocks the queue.
  // t=250  job 0 ends.               JCT 250
  // t=300  round: job 1 starts.      ends at 400, JCT 400
  // t=400  round: jobs 2 and 3 start; job 3 ends at 460 (JCT 340), job 2 at 520 (JCT 470).
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults results = simulate(dir, experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })"));
  CHECK(jcts(results) == std::vector<double>{250, 400, 470, 340});
  CHECK(results.jobs[2].first_start == 400);
  CHECK(results.end_time == 520);
}

TEST_CASE("FIFO + first_fit, completion at round ends: JCTs by hand") {
  // Each job holds its GPUs until the end of the round in which it finishes.
  // job 0: 250 -> 300.  t=300: job 1 starts, ends on the boundary 400.
  // t=400: jobs 2, 3 start; job 3 460 -> 500 (JCT 380), job 2 520 -> 600 (JCT 550).
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults results = simulate(
      dir, experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })", "[simulation]\ncompletion = \"round\"\n"));
  CHECK(jcts(results) == std::vector<double>{300, 400, 550, 380});
}

TEST_CASE("FIFO + first_fit, exact finish with GPUs held to the round's end (completion = exact-held): by hand") {
  // The GPUs are released as with "round" (so every start is as there), the
  // finish is the exact one: job 0 250, job 1 400, job 3 460 (JCT 340), job 2
  // 520 (JCT 470); job 2's GPUs are held until 600, so its GPU time counts to
  // then: 2 GPUs x 200 s.
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults results = simulate(dir, experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })",
                                                      "[simulation]\ncompletion = \"exact-held\"\n"));
  CHECK(jcts(results) == std::vector<double>{250, 400, 470, 340});
  CHECK(results.jobs[1].first_start == 300);
  CHECK(results.jobs[2].first_start == 400);
  CHECK(results.jobs[2].gpu_seconds == doctest::Approx(400));
}

TEST_CASE("FIFO with backfill starts later jobs around a blocked one") {
  // t=0: job 0 on 2 GPUs, job 1 blocked.  t=100: job 2 backfills the other 2 GPUs (ends 220).
  // t=200: job 3 finds no GPU.  t=300: all free; job 1 first (ends 400), job 3 does not fit.
  // t=400: job 3 starts, ends 460.
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults results =
      simulate(dir, experiment(R"({ plugin = "fifo", backfill = true })", R"({ plugin = "first_fit" })"));
  CHECK(jcts(results) == std::vector<double>{250, 400, 170, 340});
}

TEST_CASE("pods that never leave: each offered once in order, the run ends when none can change, GPU allocation") {
  // FGD's protocol on one node of 4 GPUs: openb pods read with times =
  // "ignore" all arrive at 0 and never leave. With backfill, the round
  // places each pod that fits, in file order, and passes over the rest:
  //   p0 2 x 1000  GPUs 0, 1
  //   p1 4 x 1000  2 GPUs free: passed over
  //   p2 1 x 600   GPU 2 (400 left)           (first_fit: the lowest GPU with room)
  //   p3 1 x 500   GPU 3 (500 left)
  //   p4 1 x 300   GPU 2 (100 left)
  //   p5 1 x 1000  no free GPU: passed over (it never ran in the trace: kept)
  // Nothing can change after that, so the run ends at 0 with 4 pods running:
  // GPU allocation (2000 + 600 + 500 + 300) / 4000 = 0.85.
  TempDir dir;
  dir.write("pods.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time\n"
            "p0,1000,1024,2,1000,,LS,Running,10,20,10\n"
            "p1,1000,1024,4,1000,,LS,Running,10,20,10\n"
            "p2,1000,1024,1,600,,LS,Running,10,20,10\n"
            "p3,1000,1024,1,500,,LS,Running,10,20,10\n"
            "p4,1000,1024,1,300,,LS,Running,10,20,10\n"
            "p5,1000,1024,1,1000,,LS,Pending,10,20,\n");
  auto run = [&](const char* backfill) {
    return simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "openb"
path = "pods.csv"
times = "ignore"
[scheduler]
round_seconds = 1
allocation = { plugin = "fifo", backfill = )" + std::string(backfill) + R"( }
placement = { plugin = "first_fit" }
)");
  };
  const RunResults results = run("true");
  std::vector<int> held;
  for (const JobRecord& job : results.jobs) held.push_back(job.held_gpus);
  CHECK(held == std::vector<int>{2, 0, 1, 1, 1, 0});
  CHECK(results.jobs[2].gpu_milli == 600);
  CHECK(results.jobs[0].status == "running");
  CHECK(results.jobs[1].status == "queued");
  CHECK(results.end_time == 0);
  CHECK(results.note == "2 jobs never finished: the scheduler could not place them; "
                        "4 jobs were still running when the run ended");
  CHECK(summarize(results.jobs, results.capacity_gpu_seconds, results.cluster_gpus, results.end_time).gpu_allocation
        == doctest::Approx(0.85));
  // Without backfill the queue stops at the first pod that does not fit:
  // only p0 runs, 2000 / 4000.
  const RunResults blocked = run("false");
  CHECK(summarize(blocked.jobs, blocked.capacity_gpu_seconds, blocked.cluster_gpus, blocked.end_time).gpu_allocation
        == doctest::Approx(0.5));

  // A CPU-only pod kept (cpu_only = "keep") takes 30 of the node's 32 CPUs
  // and no GPU share: then a 500-milli pod of 4 CPUs finds too few CPUs, one
  // of 2 CPUs fits. GPU allocation 500 / 4000.
  dir.write("pods.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
            "scheduled_time\n"
            "c0,30000,1024,0,0,,LS,Running,10,20,10\n"
            "g1,4000,1024,1,500,,LS,Running,10,20,10\n"
            "g2,2000,1024,1,500,,LS,Running,10,20,10\n");
  const RunResults cpus = simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 4
cpus_per_node = 32
[workload]
kind = "openb"
path = "pods.csv"
times = "ignore"
cpu_only = "keep"
[scheduler]
round_seconds = 1
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "first_fit" }
)");
  std::vector<std::string> statuses;
  for (const JobRecord& job : cpus.jobs) statuses.push_back(job.status);
  CHECK(statuses == std::vector<std::string>{"running", "queued", "running"});
  CHECK(summarize(cpus.jobs, cpus.capacity_gpu_seconds, cpus.cluster_gpus, cpus.end_time).gpu_allocation
        == doctest::Approx(0.125));
}

TEST_CASE("preemption frees GPUs for a higher-priority job and charges the restart") {
  // newest_first ranks the latest arrival first. t=0: job 0 takes all 4 GPUs.
  // t=200: job 1 (arrived 150) preempts job 0, which has done 800 of 1200 GPU-seconds.
  // job 1 ends at 300 (JCT 150). t=300: job 0 resumes, pays 30 s, needs 100 s more: ends 430.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,4,300\n150,2,100\n");
  const std::string newest = "{ plugin = \"newest_first\", path = \"" + test_plugin("newest_first").string() + "\" }";
  const RunResults results = simulate(
      dir, experiment(newest, R"({ plugin = "first_fit" })",
                      "[simulation]\npreemption_overhead_seconds = 30\n"));
  CHECK(jcts(results) == std::vector<double>{430, 150});
  CHECK(results.jobs[0].preemptions == 1);
  CHECK(results.jobs[1].preemptions == 0);
  CHECK(results.jobs[0].gpu_seconds == doctest::Approx(4 * 200 + 4 * 130));
}

TEST_CASE("a start overhead delays every job's first run, not its restarts") {
  // As above, with 20 s at each first start: job 0 runs 200 - 20 = 180 s
  // (720 GPU-seconds) before job 1 preempts it at 200; job 1 ends at
  // 200 + 20 + 100 = 320 (JCT 170); job 0 resumes in the round at 400, pays
  // its 30 s restart, needs 480 / 4 = 120 s more: ends 550.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,4,300\n150,2,100\n");
  const std::string newest = "{ plugin = \"newest_first\", path = \"" + test_plugin("newest_first").string() + "\" }";
  const RunResults results = simulate(
      dir, experiment(newest, R"({ plugin = "first_fit" })",
                      "[simulation]\npreemption_overhead_seconds = 30\nstart_overhead_seconds = 20\n"));
  CHECK(jcts(results) == std::vector<double>{550, 170});
}

TEST_CASE("no job is preempted when preempting would not let the waiting job run") {
  // Job 2 asks for more CPUs than any node has. Every round it ranks first
  // and the core tries releasing jobs 1 and 0, finds it still cannot fit,
  // and gives them back: they run undisturbed; job 2 never runs.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,cpus\n0,2,300,0\n10,2,300,0\n150,1,100,64\n");
  const std::string newest = "{ plugin = \"newest_first\", path = \"" + test_plugin("newest_first").string() + "\" }";
  const RunResults results = simulate(dir, experiment(newest, R"({ plugin = "first_fit" })"));
  CHECK(results.jobs[0].preemptions == 0);
  CHECK(results.jobs[1].preemptions == 0);
  CHECK(jcts(results)[0] == 300);
  CHECK(jcts(results)[1] == 390);  // arrived at 10, started at the round at 100
  CHECK(results.jobs[2].status == "queued");
  CHECK(results.note == "1 jobs never finished: the scheduler could not place them");
}

TEST_CASE("only the victims whose GPUs are needed are preempted") {
  // Two 2-GPU jobs fill the node; a 1-GPU newcomer needs one GPU. The lowest
  // priority job (the oldest) is released first and suffices; the other runs on.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,2,1000\n10,2,1000\n150,1,100\n");
  const std::string newest = "{ plugin = \"newest_first\", path = \"" + test_plugin("newest_first").string() + "\" }";
  const RunResults results = simulate(dir, experiment(newest, R"({ plugin = "first_fit" })"));
  CHECK(results.jobs[0].preemptions == 1);
  CHECK(results.jobs[1].preemptions == 0);
  CHECK(results.jobs[2].first_start == 200);
}

TEST_CASE("time jumps over idle periods instead of stepping through them") {
  // Two jobs a simulated year apart: a handful of events, not 100,000 rounds.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n31536000,1,100\n");
  const RunResults results = simulate(dir, experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })"));
  CHECK(jcts(results) == std::vector<double>{100, 100});
  CHECK(results.events < 10);
}

TEST_CASE("a clock pushed past 1e12 s by a number no experiment means is refused, naming the cause") {
  // A round of 1e308 s had ended the run with infinite JCTs and jobs never
  // placed; 1e-300 jobs an hour, with a makespan of 2e302 s.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n0,4,100\n");
  auto error_of = [&](const std::string& toml) {
    try {
      simulate(dir, toml);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string rounds = experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })");
  rounds.replace(rounds.find("round_seconds = 100"), 19, "round_seconds = 1e308");
  // Refused as it is read, so that `tessel validate` says so too.
  CHECK(error_of(rounds) == (dir.path() / "experiment.toml").string() +
                                ":10:17: 'round_seconds' in [scheduler] must be at most 1e12 s (31,700 years), "
                                "where a simulation's clock ends");
  // A round of its own length can still reach past the end.
  rounds.replace(rounds.find("round_seconds = 1e308"), 21, "round_seconds = 6e11");
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n9.5e11,1,100\n");
  CHECK(error_of(rounds) == "the next round would come at t=1.2e+12 s, past the 1e12 s (31,700 years) a simulation "
                            "runs: see [scheduler] round_seconds");
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n2e12,1,100\n");
  CHECK(error_of(experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })")) ==
        "job 1 would arrive at t=2e+12 s, past the 1e12 s (31,700 years) a simulation runs: see [workload]'s arrivals");
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n0,1,2e12\n");
  CHECK(error_of(experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })")) ==
        "a job's completion or rate change would come at t=2e+12 s, past the 1e12 s (31,700 years) a simulation "
        "runs: see the jobs' durations and the throughput model");
}

TEST_CASE("the same config and seed give identical jobs") {
  TempDir dir;
  const std::string toml = R"([cluster]
nodes = 8
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 300
jobs_per_hour = 8
seed = 42
[scheduler]
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "consolidated" }
)";
  const RunResults a = simulate(dir, toml);
  const RunResults b = simulate(dir, toml);
  REQUIRE(a.jobs.size() == 300);
  REQUIRE(b.jobs.size() == 300);
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    CAPTURE(i);
    CHECK(a.jobs[i].arrival == b.jobs[i].arrival);
    CHECK(a.jobs[i].first_start == b.jobs[i].first_start);
    CHECK(a.jobs[i].finish == b.jobs[i].finish);
    CHECK(a.jobs[i].gpu_seconds == b.jobs[i].gpu_seconds);
  }
  const RunResults other = simulate(dir, toml + "\n", "other.toml");
  CHECK(other.jobs[7].arrival == a.jobs[7].arrival);

  std::string reseeded = toml;
  reseeded.replace(reseeded.find("seed = 42"), 9, "seed = 43");
  const RunResults c = simulate(dir, reseeded);
  CHECK(c.jobs[7].arrival != a.jobs[7].arrival);
}

TEST_CASE("a job larger than the cluster is rejected at arrival, with the reason") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,8,100\n0,1,100\n");
  const RunResults results = simulate(dir, experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })") +
                                               "[output]\ndecisions = true\n");
  CHECK(results.jobs[0].status == "rejected");
  CHECK(results.jobs[1].status == "finished");
  REQUIRE_FALSE(results.decisions.empty());
  CHECK(results.decisions[0].code == "reject");
  CHECK(results.decisions[0].reason == "asks for 8 GPUs, the cluster has 4");
}

TEST_CASE("decisions carry reasons, recorded only when they change") {
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults results = simulate(
      dir, experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })", "[output]\ndecisions = true\n"));
  std::vector<std::string> job1;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == 1) job1.push_back(std::to_string(int(d.time)) + " " + d.code + ": " + d.reason);
  CHECK(job1 == std::vector<std::string>{
                    "0 admit: accept_all admits every job",
                    "0 grant: arrived at 0 s; served in arrival order",
                    "0 wait: needs 4 GPUs, 2 free",
                    "300 place: first free GPUs, on 1 node(s)",
                });
  std::vector<std::string> job2;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == 2 && d.stage == PluginKind::placement) job2.push_back(d.plugin + " " + d.code + ": " + d.reason);
  CHECK(job2 == std::vector<std::string>{
                    "core wait: queued behind job 1, which does not fit yet",  // rounds 100, 200
                    "first_fit wait: needs 2 GPUs, 0 free",                    // round 300: job 1 took all
                    "first_fit place: first free GPUs, on 1 node(s)",          // round 400
                });
}

TEST_CASE("a placement plugin that double-books a GPU stops the run, named") {
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const std::string booker = "{ plugin = \"double_booker\", path = \"" + test_plugin("double_booker").string() + "\" }";
  CHECK_THROWS_WITH_AS(simulate(dir, experiment(R"({ plugin = "fifo", backfill = true })", booker)),
                       "placement plugin 'double_booker' broke its contract: placed job 2 where it cannot "
                       "go: GPU 0 is held by job 0",
                       PluginContractError);
}

TEST_CASE("attained service counts GPU-seconds or seconds, as configured") {
  // Job 0 holds 4 GPUs for 200 s, then (after its preemption) for 130 s.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,4,300\n150,2,100\n");
  const std::string newest = "{ plugin = \"newest_first\", path = \"" + test_plugin("newest_first").string() + "\" }";
  const std::string overhead = "[simulation]\npreemption_overhead_seconds = 30\n";
  const RunResults gpu_seconds = simulate(dir, experiment(newest, R"({ plugin = "first_fit" })", overhead));
  CHECK(gpu_seconds.jobs[0].attained_service == doctest::Approx(4 * 330));
  CHECK(gpu_seconds.jobs[1].attained_service == doctest::Approx(2 * 100));
  std::string seconds_config = experiment(newest, R"({ plugin = "first_fit" })", overhead);
  seconds_config.insert(seconds_config.find("allocation ="), "attained_service = \"seconds\"\n");
  const RunResults seconds = simulate(dir, seconds_config);
  CHECK(seconds.jobs[0].attained_service == doctest::Approx(330));
  CHECK(seconds.jobs[0].executed_work == doctest::Approx(1200));
}

TEST_CASE("jobs that never end: a time-sensitive scheduler or a drifting rate does not keep the run going") {
  // The pods of "pods that never leave", under policies that ask for a round
  // every round (LAS, Tiresias: running jobs gain service), and under a
  // model whose rates change with progress. Pods that never end cannot
  // change anything by running: after the first round places what fits
  // (LAS skips what does not fit, as backfill does), nothing can ever
  // start, finish or change, and the run ends at 0.
  TempDir dir;
  dir.write("pods.csv", kEndlessPods);
  const RunResults las = simulate_bounded(dir, endless_pods(R"({ plugin = "las" })"));
  CHECK(held_gpus(las) == std::vector<int>{2, 0, 1, 1, 1, 0});
  CHECK(las.jobs[0].preemptions == 0);
  CHECK(las.end_time == 0);
  CHECK(las.note == "2 jobs never finished: the scheduler could not place them; "
                    "4 jobs were still running when the run ended");

  const RunResults tiresias = simulate_bounded(dir, endless_pods(R"({ plugin = "tiresias" })"));
  CHECK(tiresias.end_time == 0);
  CHECK(tiresias.jobs[0].status == "running");

  // Rates re-read every round and at every epoch end (every 100 units):
  // neither is a reason to go on.
  const RunResults epochs = simulate_bounded(dir, endless_pods(R"({ plugin = "fifo", backfill = true })"),
                                             std::make_shared<EpochModel>(100));
  CHECK(held_gpus(epochs) == std::vector<int>{2, 0, 1, 1, 1, 0});
  CHECK(epochs.end_time == 0);
}

TEST_CASE("jobs that never end: random failures do not keep the run going, planned changes do") {
  // With node failures every hour on average, failures and repairs would go
  // on forever, reshuffling pods that never end. Once only such pods run and
  // nothing is left to arrive, failures are no longer simulated: the run
  // ends as it would without them.
  TempDir dir;
  dir.write("pods.csv", kEndlessPods);
  const std::string failures = "[failures]\nnode_mtbf_hours = 1\n";
  for (const char* allocation : {R"({ plugin = "fifo", backfill = true })", R"({ plugin = "las" })"}) {
    CAPTURE(allocation);
    const RunResults results = simulate_bounded(dir, endless_pods(allocation, failures));
    CHECK(held_gpus(results) == std::vector<int>{2, 0, 1, 1, 1, 0});
    CHECK(results.end_time == 0);
  }

  // A planned change still to come could make room: the run goes on to it,
  // failures included. At 60 s a second node of 4 GPUs joins, and p1
  // (4 GPUs) starts on it.
  const std::string added = failures + R"([[cluster.events]]
at_seconds = 60
add = { count = 1, gpus_per_node = 4 }
)";
  for (const char* allocation : {R"({ plugin = "fifo", backfill = true })", R"({ plugin = "las" })"}) {
    CAPTURE(allocation);
    const RunResults results = simulate_bounded(dir, endless_pods(allocation, added));
    CHECK(results.jobs[1].first_start == 60);
    CHECK(results.jobs[1].held_gpus == 4);
    CHECK(results.cluster_gpus == 8);
  }
}

TEST_CASE("a rate change due when the job completes is not handled after its completion") {
  // The model's one rate change comes 1e-12 units before the end of the
  // job's 100 units. Started at 1e6 s, the job reaches both at 1000100 s:
  // the two times are the same double. The completion comes first; the
  // rate change, now about a finished job, is dropped.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n1000000,1,100\n1000000,1,300\n");
  const RunResults results = simulate_bounded(
      dir, experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })"), std::make_shared<EpochModel>(0, 1e-12));
  CHECK(finish_times(results) == std::vector<double>{1000100, 1000300});
  CHECK(results.jobs[0].status == "finished");
  CHECK(results.end_time == 1000300);
}

// ------------------------------------------------------------------ Synergy's simulator rules

namespace {

// Model `a` on 1 GPU: throughput 1 at every point, 0.7 s an iteration.
const char* kIterationProfile =
    "model,gpus,best_cpus,best_mem_gb,batch,iter_time_s,speedup_at_best,cpus,mem_gb,relative_throughput\n"
    "a,1,3,62.5,32,0.7,1,3,62.5,1\n";

std::string whole_iterations_experiment(const std::string& progress) {
  return R"([cluster]
nodes = 1
gpus_per_node = 4

[workload]
kind = "csv"
path = "trace.csv"
model = { name = "synergy-sensitivity", path = "profile.csv" }

[scheduler]
round_seconds = 100
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }

[simulation]
completion = "round"
progress = ")" + progress + "\"\n";
}

}  // namespace

TEST_CASE("progress = whole_iterations: floor(round / iteration time) iterations per round") {
  // 300 s of work at the share. Continuous: 100 a round, done at 300.
  // Whole iterations of 0.7 s: floor(100 / 0.7) = 142 a round, 99.4 s of
  // work; 298.2 after three rounds, so the job ends with the fourth, at 400.
  TempDir dir;
  dir.write("profile.csv", kIterationProfile);
  dir.write("trace.csv", "arrival,gpus,duration,model\n0,1,300,a\n");
  CHECK(jcts(simulate(dir, whole_iterations_experiment("continuous"))) == std::vector<double>{300});
  CHECK(jcts(simulate(dir, whole_iterations_experiment("whole_iterations"))) == std::vector<double>{400});
}

TEST_CASE("progress = whole_iterations needs a model that knows iterations") {
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const std::string toml = experiment(R"({ plugin = "fifo" })", R"({ plugin = "first_fit" })",
                                      "[simulation]\ncompletion = \"round\"\nprogress = \"whole_iterations\"\n");
  const std::string expected = (dir.path() / "experiment.toml").string() +
                               ":15:12: progress = \"whole_iterations\": throughput model 'linear' gives no "
                               "iteration size for job 0 (profile '')";
  CHECK_THROWS_WITH_AS(simulate(dir, toml), expected.c_str(), ConfigError);
}

TEST_CASE("rounds = events refuses a placement that changes its mind as jobs wait") {
  // philly_locality relaxes after 600 s of waiting: at events alone no round
  // would come to relax for, and a job that needs the relaxation would end
  // the run "never placed". Never relaxing (inf) does not depend on time.
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const std::string relaxing = experiment(R"({ plugin = "fifo" })",
                                          R"({ plugin = "philly_locality", relax_after_seconds = 600 })",
                                          "[simulation]\nrounds = \"events\"\n");
  const std::string expected = (dir.path() / "experiment.toml").string() +
                               ":14:10: 'rounds = \"events\"' in [simulation] holds no round for a placement plugin "
                               "that changes its decisions as time passes ('philly_locality'); use rounds = "
                               "\"clock\", or a setting of the plugin that does not depend on time";
  CHECK_THROWS_WITH_AS(simulate(dir, relaxing), expected.c_str(), ConfigError);
  const std::string strict = experiment(R"({ plugin = "fifo" })",
                                        R"({ plugin = "philly_locality", relax_after_seconds = inf })",
                                        "[simulation]\nrounds = \"events\"\n");
  CHECK(jcts(simulate(dir, strict)).size() == 4);
}

TEST_CASE("placement_each_round = every_round: running jobs are placed again, and move") {
  // Two nodes of one GPU. t=0: job 0 (250 s) on node 0, job 1 (1000 s) on
  // node 1. Round 300, job 0 gone: placed again first-fit, job 1 moves to
  // node 0 (a preemption, free here) and still ends at 1000; kept, it stays.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,250\n0,1,1000\n");
  auto run = [&](const std::string& rules) {
    return simulate(dir, R"([cluster]
nodes = 2
gpus_per_node = 1

[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
round_seconds = 300
allocation = { plugin = "fifo" }
placement = { plugin = "synergy", rule = "first_fit" }
)" + rules);
  };
  const RunResults kept = run("");
  const RunResults moved = run("left_out = \"stop\"\nplacement_each_round = \"every_round\"\n");
  CHECK(jcts(kept) == std::vector<double>{250, 1000});
  CHECK(jcts(moved) == std::vector<double>{250, 1000});
  CHECK(kept.jobs[1].preemptions == 0);
  CHECK(moved.jobs[1].preemptions == 1);
  CHECK(moved.jobs[0].preemptions == 0);
}

TEST_CASE("a run whose row cannot be written stops simulating and throws the store's error") {
  TempDir dir;
  const std::string database = (dir.path() / "other.db").string();
  {
    sql::Database other(database);
    other.exec("CREATE TABLE t (x)");
  }
  // 400,000 jobs, which the run would simulate to their end before it found
  // out, were the store's error not to stop it.
  const ExperimentConfig config = load_experiment(dir.write(
      "big.toml", busy_experiment(R"({ plugin = "fifo" })", "", {.nodes = 500, .jobs = 400000, .jobs_per_hour = 200})));
  PluginRegistry registry(config.scheduler.plugin_path);
  const OpeningStore store(database);
  std::atomic<bool> stop{false};
  // Not Interrupted: the stop was the store's, and its error is the one to report.
  CHECK_THROWS_WITH_AS(run_simulation(config, registry, store, {}, stop),
                       (database + ": not a tessel results database").c_str(), UserError);
  CHECK(stop);
  CHECK_THROWS_AS(store.get(), UserError);
}

// The ordering allocation policies, srtf, sjf, las, tiresias and gittins, each
// on its decision rule: small traces on one 4-GPU node whose completion
// times and reasons are worked out by hand in the comments.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

// Failed checks on lists of decisions print the lists.
template <>
struct doctest::StringMaker<std::vector<std::string>> {
  static doctest::String convert(const std::vector<std::string>& lines) {
    std::string text = "{";
    for (const std::string& line : lines) text += "\n  \"" + line + "\"";
    return (text + "\n}").c_str();
  }
};

namespace {

// One node of 4 GPUs, first-fit placement, decisions recorded. The linear
// model: a job of duration d on g GPUs needs d x g GPU-seconds and runs for d
// seconds on its g GPUs.
std::string experiment(const std::string& allocation, int round_seconds, const std::string& scheduler_extra = "",
                       const std::string& extra = "") {
  return R"([cluster]
nodes = 1
gpus_per_node = 4

[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
round_seconds = )" + std::to_string(round_seconds) + "\n" + scheduler_extra + R"(allocation = )" + allocation + R"(
placement = { plugin = "first_fit" }

[output]
decisions = true
)" + extra;
}

RunResults run(const std::string& trace, const std::string& allocation, int round_seconds,
               const std::string& scheduler_extra = "", const TempDir& dir = TempDir(), const std::string& extra = "") {
  dir.write("trace.csv", "arrival,gpus,duration\n" + trace);
  return simulate(dir, experiment(allocation, round_seconds, scheduler_extra, extra));
}

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

// "time: reason" of the allocation policy's grants for one job, as recorded
// (a decision is recorded only when its reason changes).
std::vector<std::string> grants(const RunResults& results, JobId job) {
  std::vector<std::string> out;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.stage == PluginKind::allocation && d.code == "grant")
      out.push_back(std::to_string(static_cast<int>(d.time)) + ": " + d.reason);
  return out;
}

// Times at which the core preempted one job.
std::vector<double> preempted_at(const RunResults& results, JobId job) {
  std::vector<double> out;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.code == "preempt") out.push_back(d.time);
  return out;
}

// A number as a reason prints it.
std::string shown(double value) {
  char text[32];
  std::snprintf(text, sizeof text, value == std::round(value) ? "%.0f" : "%.4g", value);
  return text;
}

// Tiresias's Gittins index of `service` (run_sim.py, cal_r_gittins_index and
// get_gittins_index), written the simulator's way with linear scans, scaled
// by 10^6: a second implementation to check the plugin against.
double simulator_gittins_index(std::vector<double> samples, double delta, double service) {
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  auto first_above = [&](double a) {
    std::size_t k = 0;
    while (k < n && samples[k] <= a) ++k;
    return k;
  };
  const std::size_t sample = first_above(service);
  if (sample == n) return 0;
  const double a = samples[sample] - 1;
  const std::size_t i = first_above(a);
  const std::size_t j = a + delta > samples[n - 1] - 1 ? n - 1 : first_above(a + delta);
  const double p = double(j - i) / double(n - i);
  double e = delta * double(n - j);
  for (std::size_t k = i; k < j; ++k) e += samples[k];
  e /= double(n - i);
  return p / e * 1e6;
}

std::vector<double> read_column(const fs::path& csv) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header: duration
  std::vector<double> values;
  while (std::getline(in, line))
    if (!line.empty()) values.push_back(std::stod(line));
  return values;
}

const char* kValidateBase = R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 5
[scheduler]
placement = { plugin = "first_fit" }
)";

}  // namespace

// ------------------------------------------------------------------ srtf

TEST_CASE("srtf preempts a long job for a shorter newcomer, by remaining time") {
  SUBCASE("a newcomer shorter than what is left preempts") {
    // t=0    job 0 (1000 s) starts.
    // t=200  (job 1 arrived at 150) job 1 has 200 s left, job 0 800 s: job 1
    //        ranks first and preempts job 0; it ends at 400.       JCT 250
    // t=400  job 0 resumes with 800 s left and ends at 1200.      JCT 1200
    // srtf is not time-sensitive: rounds follow only arrivals, completions
    // and rounds that changed something (0, 100, 200, 300, 400, 500).
    const RunResults results = run("0,4,1000\n150,4,200\n", R"({ plugin = "srtf" })", 100);
    CHECK(jcts(results) == std::vector<double>{1200, 250});
    CHECK(preempted_at(results, 0) == std::vector<double>{200});
    // A grant is recorded once: later rounds change only its numbers.
    CHECK(grants(results, 1) == std::vector<std::string>{
                                    "200: 200 s left on 4 GPUs; the shortest remaining time runs first",
                                });
    CHECK(grants(results, 0) == std::vector<std::string>{
                                    "0: 1000 s left on 4 GPUs; the shortest remaining time runs first",
                                });
  }
  SUBCASE("a newcomer longer than what is left waits, though shorter in all") {
    // t=700  job 1 (400 s) arrives; job 0 (1000 s) has 300 s left and keeps
    //        running; it ends at 1000. job 1 runs 1000-1400.      JCT 700
    const RunResults results = run("0,4,1000\n700,4,400\n", R"({ plugin = "srtf" })", 100);
    CHECK(jcts(results) == std::vector<double>{1000, 700});
    CHECK(preemptions(results) == std::vector<int>{0, 0});
  }
}

// ------------------------------------------------------------------- sjf

TEST_CASE("sjf never preempts and starts the shortest waiting job first") {
  SUBCASE("waiting jobs by total run time, behind the running one") {
    // t=0     job 0 (1000 s) starts.
    // t=100   jobs 1 (500 s) and 2 (300 s) arrive; job 0 keeps its GPUs
    //         although both are shorter than what it has left.
    // t=1000  job 0 ends (JCT 1000); job 2, the shorter, starts: ends 1300 (JCT 1200).
    // t=1300  job 1 starts: ends 1800 (JCT 1700).
    const RunResults results = run("0,4,1000\n100,4,500\n100,4,300\n", R"({ plugin = "sjf" })", 100);
    CHECK(jcts(results) == std::vector<double>{1000, 1700, 1200});
    CHECK(preemptions(results) == std::vector<int>{0, 0, 0});
    CHECK(grants(results, 0) == std::vector<std::string>{
                                    "0: runs 1000 s on 4 GPUs in all; the shortest waiting job starts first",
                                    "100: running; SJF never preempts",
                                });
    // Job 2 is granted as a waiting job at 1000 and starts; from the next
    // round it is granted as a running one.
    CHECK(grants(results, 2) ==
          std::vector<std::string>{"100: runs 300 s on 4 GPUs in all; the shortest waiting job starts first",
                                   "1100: running; SJF never preempts"});

    // The same trace under srtf: job 2 preempts job 0 at 100.
    const RunResults srtf = run("0,4,1000\n100,4,500\n100,4,300\n", R"({ plugin = "srtf" })", 100);
    CHECK(preempted_at(srtf, 0) == std::vector<double>{100});
  }
  SUBCASE("a shorter job that does not fit is passed over, not waited for") {
    // t=100  job 0 holds 2 GPUs. job 1 (300 s, 4 GPUs) ranks first but does
    //        not fit; job 2 (500 s, 2 GPUs) fits and starts: ends 600 (JCT 500).
    // t=1000 job 0 ends (JCT 1000); job 1 runs 1000-1300 (JCT 1200).
    const RunResults results = run("0,2,1000\n100,4,300\n100,2,500\n", R"({ plugin = "sjf" })", 100);
    CHECK(jcts(results) == std::vector<double>{1000, 1200, 500});
  }
}

// ------------------------------------------------------------------- las

TEST_CASE("las alternates two equal jobs, a round each") {
  // Two 4-GPU jobs of 250 s arrive together. Each round the one with less
  // attained service runs; a tie goes to the earlier arrival (job 0).
  //   t=0   0 | 0        -> job 0 runs
  //   t=100 400 | 0      -> job 1 runs, job 0 preempted
  //   t=200 400 | 400    -> tie: job 0 runs, job 1 preempted
  //   t=300 800 | 400    -> job 1, t=400 800 | 800 -> job 0: its last 50 s, ends 450 (JCT 450)
  //   t=500 job 1 runs its last 50 s and ends 550 (JCT 550).
  const RunResults results = run("0,4,250\n0,4,250\n", R"({ plugin = "las" })", 100);
  CHECK(jcts(results) == std::vector<double>{450, 550});
  CHECK(preempted_at(results, 0) == std::vector<double>{100, 300});
  CHECK(preempted_at(results, 1) == std::vector<double>{200, 400});
  // The grant stands while only the service it names grows: recorded once.
  CHECK(grants(results, 1) == std::vector<std::string>{"0: attained 0 GPU-s; the least attained service runs first"});

  // Counting seconds instead changes nothing here (both jobs hold 4 GPUs),
  // but the reasons say what is counted.
  const RunResults seconds =
      run("0,4,250\n0,4,250\n", R"({ plugin = "las" })", 100, "attained_service = \"seconds\"\n");
  CHECK(jcts(seconds) == std::vector<double>{450, 550});
  CHECK(grants(seconds, 0)[0] == "0: attained 0 s of running; the least attained service runs first");
}

TEST_CASE("las counts service in the configured unit: GPU-seconds weigh a job's width") {
  // Job 0 (1 GPU, 1000 s) and job 1 (4 GPUs from t=50, 1000 s).
  // In GPU-seconds job 1 gains 400 per round it runs, job 0 only 100:
  //   t=100 job 1 (0 < 100) runs; t=200 job 0 (100 < 400) runs until it
  //   passes 400 at t=600 (a tie at t=500 keeps it: earlier arrival);
  //   job 1 runs 600-700 (800); job 0 runs 700-1100 (passes 800 at 1100);
  //   job 1 runs 1100-1200 (1200); job 0 runs 1200-1300 and is done.
  //   Job 1 then runs its last 700 s: 1300-2000.
  // In seconds they simply take turns: job 0 runs the even rounds up to
  //   1800-1900, job 1 the odd ones, then 1900-2000.
  const std::string trace = "0,1,1000\n50,4,1000\n";
  const RunResults gpu_seconds = run(trace, R"({ plugin = "las" })", 100);
  CHECK(jcts(gpu_seconds) == std::vector<double>{1300, 1950});
  CHECK(preempted_at(gpu_seconds, 0) == std::vector<double>{100, 600, 1100});
  CHECK(preempted_at(gpu_seconds, 1) == std::vector<double>{200, 700, 1200});

  const RunResults seconds = run(trace, R"({ plugin = "las" })", 100, "attained_service = \"seconds\"\n");
  CHECK(jcts(seconds) == std::vector<double>{1900, 1950});
  CHECK(preemptions(seconds) == std::vector<int>{9, 9});
}

// -------------------------------------------------------------- tiresias

TEST_CASE("tiresias demotes a 4-GPU job after 900 s (3600 GPU-s) and starts the waiting 1-GPU job") {
  // Default thresholds [3600]: two queues. 300-second rounds.
  // t=0    job 0 (4 GPUs, 2000 s) starts in queue 1.
  // t=300  job 1 (1 GPU, 600 s, arrived at 100) waits in queue 1 behind the
  //        running job 0 (1200 GPU-s); t=600: 2400 GPU-s.
  // t=900  job 0 has 3600 GPU-s: queue 2. Job 1, in queue 1, ranks first and
  //        preempts it; job 1 runs 900-1500.                     JCT 1400
  // t=1500 job 0 resumes with 1100 s left: ends 2600.            JCT 2600
  const std::string trace = "0,4,2000\n100,1,600\n";
  const RunResults results = run(trace, R"({ plugin = "tiresias" })", 300);
  CHECK(jcts(results) == std::vector<double>{2600, 1400});
  CHECK(preempted_at(results, 0) == std::vector<double>{900});
  const std::vector<std::string> job0 = grants(results, 0);
  REQUIRE(job0.size() >= 4);
  CHECK(std::vector<std::string>(job0.begin(), job0.begin() + 4) ==
        std::vector<std::string>{
            "0: queue 1 of 2: attained 0 GPU-s < 3600",
            "300: queue 1 of 2: attained 1200 GPU-s < 3600",
            "600: queue 1 of 2: attained 2400 GPU-s < 3600",
            "900: queue 2 of 2: attained 3600 GPU-s >= 3600",
        });
  CHECK(grants(results, 1).front() == "300: queue 1 of 2: attained 0 GPU-s < 3600");

  // GPU-seconds whatever [scheduler] attained_service says: counted in
  // seconds, job 0 would stay in queue 1 (3600 s > its 2000 s) and job 1
  // would wait until 2000 (JCTs 2000, 2500).
  const RunResults seconds =
      run(trace, R"({ plugin = "tiresias" })", 300, "attained_service = \"seconds\"\n");
  CHECK(jcts(seconds) == std::vector<double>{2600, 1400});
}

TEST_CASE("tiresias with rounds at events: a round at each arrival and exactly when a job crosses a threshold") {
  // Threshold 3600 GPU-s, 500-second rounds on the clock.
  // t=0    job 0 (3 GPUs, 2000 s) starts; it reaches 3600 GPU-s at 1200.
  // t=100  job 1 (2 GPUs, 600 s) arrives and waits (1 GPU free), in queue 1
  //        behind the running job 0.
  // Events: a round at 100 (the arrival) and at 1200, where job 0 moves to
  //   queue 2 and job 1 preempts it; job 1 runs 1200-1800.       JCT 1700
  //   Job 0 resumes at 1800 with 800 s left: ends 2600.          JCT 2600
  // Clock: job 1 waits for the round at 500; the crossing is seen at the
  //   round at 1500; job 1 runs 1500-2100 (JCT 2000), job 0 resumes at the
  //   round at 2500 with 500 s left and ends 3000.
  const std::string trace = "0,3,2000\n100,2,600\n";
  const RunResults events =
      run(trace, R"({ plugin = "tiresias" })", 500, "", TempDir(), "[simulation]\nrounds = \"events\"\n");
  CHECK(jcts(events) == std::vector<double>{2600, 1700});
  CHECK(preempted_at(events, 0) == std::vector<double>{1200});
  CHECK(grants(events, 1).front() == "100: queue 1 of 2: attained 0 GPU-s < 3600");
  CHECK(grants(events, 0) == std::vector<std::string>{"0: queue 1 of 2: attained 0 GPU-s < 3600",
                                                      "100: queue 1 of 2: attained 300 GPU-s < 3600",
                                                      "1200: queue 2 of 2: attained 3600 GPU-s >= 3600"});
  const RunResults clock = run(trace, R"({ plugin = "tiresias" })", 500);
  CHECK(jcts(clock) == std::vector<double>{3000, 2000});
  CHECK(preempted_at(clock, 0) == std::vector<double>{1500});
}

TEST_CASE("tiresias: within a queue, a running job keeps its GPUs ahead of an earlier waiting one") {
  // 100-second rounds, threshold 3600 GPU-s: every job stays in queue 1.
  // t=0    job 0 (2 GPUs, 3000 s) and job 1 (1 GPU, 150 s) start.
  // t=100  job 2 (2 GPUs, 200 s, arrived 10) does not fit in the 1 free GPU;
  //        job 3 (1 GPU, 300 s, arrived 20) does and starts.
  // t=200  job 1 ended at 150: 1 GPU free. Ranked by arrival alone, job 2
  //        would preempt job 3 and take its GPU; as in Tiresias's simulator,
  //        running jobs go first within a queue, so job 3 runs on to 400.
  //                                                              JCT 380
  // t=400  job 2 runs 400-600.                                   JCT 590
  const RunResults results =
      run("0,2,3000\n0,1,150\n10,2,200\n20,1,300\n", R"({ plugin = "tiresias" })", 100);
  CHECK(jcts(results) == std::vector<double>{3000, 150, 590, 380});
  CHECK(preemptions(results) == std::vector<int>{0, 0, 0, 0});
}

TEST_CASE("tiresias, entry_order: a job demoted while running queues behind the jobs already waiting there") {
  // Threshold 100 GPU-s, 10-second rounds.
  // t=0   job 0 (2 GPUs) and job 1 (1 GPU) start in queue 1.
  // t=50  job 0 reaches 100 GPU-s: queue 2.
  // t=60  job 2 (2 GPUs, arrived 60) in queue 1 outranks job 0 and preempts
  //       it; job 0 waits in queue 2.
  // t=100 job 1 reaches 100 GPU-s and enters queue 2, running. Entry order:
  //       behind the waiting job 0, which then needs job 1's GPU and preempts
  //       it. Running first (the default): job 1 keeps its GPU, job 0 waits.
  const std::string trace = "0,2,1000\n0,1,1000\n60,2,300\n";
  const std::string thresholds = R"(plugin = "tiresias", queue_thresholds_gpu_seconds = [100])";
  const RunResults entry = run(trace, "{ " + thresholds + ", entry_order = true }", 10);
  CHECK(preempted_at(entry, 0) == std::vector<double>{60});
  CHECK(preempted_at(entry, 1) == std::vector<double>{100});
  const RunResults running_first = run(trace, "{ " + thresholds + " }", 10);
  CHECK(preempted_at(running_first, 0) == std::vector<double>{60});
  CHECK(preempted_at(running_first, 1).empty());
}

TEST_CASE("tiresias, running_first = false: an earlier waiting job preempts a later one of its queue") {
  // The trace above, ranked by arrival alone as in Pollux's simulator.
  // t=200  job 2 (arrived 10) ranks before job 3 (arrived 20): it preempts
  //        job 3 (100 of its 300 s done) and runs 200-400.      JCT 390
  // t=400  job 3 resumes with 200 s left: ends 600.              JCT 580
  const RunResults results = run("0,2,3000\n0,1,150\n10,2,200\n20,1,300\n",
                                 R"({ plugin = "tiresias", running_first = false })", 100);
  CHECK(jcts(results) == std::vector<double>{3000, 150, 390, 580});
  CHECK(preemptions(results) == std::vector<int>{0, 0, 0, 1});
}

TEST_CASE("tiresias and gittins, selection = greedy_by_count: a higher-placed running job that no longer fits "
          "is preempted while a lower one runs") {
  // Two nodes of 4 GPUs, consolidated placement, threshold 100 GPU-s,
  // 10-second rounds, no preemption cost. Jobs A (3 GPUs), C (2), E (1, 5 s),
  // D (1) arrive at 0; W (4 GPUs, 20 s) at 150.
  // t=0    A takes node 0; C node 1; E the last GPU of node 0 (best fit); D
  //        node 1. E ends at 5: 1 GPU free on each node.
  // t<=100 A, C and D cross 100 GPU-s: queue 2, in that order.
  // t=150  W enters queue 1: W, then A, C, D.
  //   greedy_by_count, down the queues from the 8 GPUs: W (4 left), A (1
  //        left), C skipped (needs 2), D (0 left). C is preempted; W takes its
  //        GPUs and the two free ones; D, after C, runs on.
  //   ranked (the default): W needs 4 of the 2 free GPUs and preempts from
  //        the lowest rank up: D (3 free, too few), then C; consolidated puts
  //        W on node 1 alone, whose GPUs D held too, so D is preempted as well
  //        and restarts at once on node 0's free GPU.
  // Either way W runs 150-170 (80 GPU-s: it stays in queue 1), and C
  // resumes at 170 with 850 s to go.
  // Gittins with one sample of 10^9 GPU-s gives every job the same index (0:
  // no job finishes within the quantum), so its queues go by arrival as
  // 2D-LAS's do here.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,3,1000\n0,2,1000\n0,1,5\n0,1,1000\n150,4,20\n");
  dir.write("dist.csv", "duration\n1000000000\n");
  auto run_with = [&](const std::string& allocation) {
    return simulate(dir, R"([cluster]
nodes = 2
gpus_per_node = 4

[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
round_seconds = 10
allocation = )" + allocation + R"(
placement = { plugin = "consolidated" }

[simulation]
completion = "exact"
preemption_overhead_seconds = 0

[output]
decisions = true
)");
  };
  for (const std::string& plugin :
       {std::string(R"(plugin = "tiresias")"), std::string(R"(plugin = "gittins", distribution = "dist.csv")")}) {
    CAPTURE(plugin);
    const std::string queues = plugin + ", queue_thresholds_gpu_seconds = [100]";
    const RunResults greedy = run_with("{ " + queues + R"(, selection = "greedy_by_count" })");
    CHECK(jcts(greedy) == std::vector<double>{1000, 1020, 5, 1000, 20});
    CHECK(preemptions(greedy) == std::vector<int>{0, 1, 0, 0, 0});
    CHECK(preempted_at(greedy, 1) == std::vector<double>{150});
    bool skipped = false;
    for (const DecisionRecord& d : greedy.decisions)
      if (d.job == 1 && d.time == 150 && d.code == "deny")
        skipped = d.reason == "skipped: needs 2 GPUs, 1 of the cluster's 8 left by count after the jobs ahead";
    CHECK(skipped);

    const RunResults ranked = run_with("{ " + queues + " }");
    CHECK(jcts(ranked) == std::vector<double>{1000, 1020, 5, 1000, 20});
    CHECK(preemptions(ranked) == std::vector<int>{0, 1, 0, 1, 0});
    CHECK(preempted_at(ranked, 3) == std::vector<double>{150});
  }
}

TEST_CASE("tiresias: the promote knob brings a starved job back to the top queue") {
  // Threshold 400 GPU-s, 100-second rounds. Job 0: 4 GPUs, 500 s. Jobs 1-4:
  // 1 GPU, 1000 s each, arriving at 50.
  const std::string trace = "0,4,500\n50,1,1000\n50,1,1000\n50,1,1000\n50,1,1000\n";

  SUBCASE("promote_knob = 1") {
    // t=0    job 0 runs.
    // t=100  job 0 has 400 GPU-s: queue 2. Jobs 1-4 (queue 1) preempt it.
    // t=200  job 0 has waited 100 s >= 1 x the 100 s it ran: promoted to
    //        queue 1 with its service, run and wait times reset. It waits
    //        there behind the running jobs 1-4; its wait does not count
    //        again until it has run.
    // t=500  jobs 1-4 reach 400 GPU-s: queue 2. Job 0 preempts them and runs.
    // t=600  job 0 has 400 GPU-s since its promotion: queue 2, but running
    //        first within it, it keeps its GPUs and ends at 900.  JCT 900
    // t=900  jobs 1-4 have waited 400 s >= 1 x 400 s run: promoted; they run
    //        their last 600 s and end at 1500.                    JCT 1450
    const RunResults results =
        run(trace, R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [400], promote_knob = 1 })", 100);
    CHECK(jcts(results) == std::vector<double>{900, 1450, 1450, 1450, 1450});
    CHECK(preempted_at(results, 0) == std::vector<double>{100});
    CHECK(preempted_at(results, 1) == std::vector<double>{500});
    CHECK(grants(results, 0) ==
          std::vector<std::string>{
              "0: queue 1 of 2: attained 0 GPU-s < 400",
              "100: queue 2 of 2: attained 400 GPU-s >= 400",
              "200: promoted to queue 1: waited 100 s >= 1 x 100 s run since arrival or last promotion",
              "300: queue 1 of 2: 0 GPU-s since promotion < 400",
              "600: queue 2 of 2: 400 GPU-s since promotion >= 400",
              "700: queue 2 of 2: 800 GPU-s since promotion >= 400",
              "800: queue 2 of 2: 1200 GPU-s since promotion >= 400",
          });
    const std::vector<std::string> job1 = grants(results, 1);
    CHECK(std::find(job1.begin(), job1.end(),
                    "900: promoted to queue 1: waited 400 s >= 1 x 400 s run since arrival or last promotion") !=
          job1.end());
  }
  SUBCASE("a promotion resets the wait as well as the run time") {
    // promote_knob = 2, and jobs 5-8 (1 GPU, 1000 s) arrive at 550.
    // t=100  job 0 (400 GPU-s, run 100 s) drops to queue 2, preempted by jobs 1-4.
    // t=300  it has waited 200 s >= 2 x 100 s: promoted, all counts zeroed.
    // t=500  jobs 1-4 drop to queue 2; job 0 runs again.
    // t=600  job 0 has 400 GPU-s since its promotion: queue 2, preempted by
    //        jobs 5-8. Run since promotion: 100 s; waited since: 0 s.
    // t=800  waited 200 s >= 2 x 100 s: promoted again. (Had the first
    //        promotion kept its 200 s of waiting, this would be at 700.)
    const RunResults results =
        run(trace + "550,1,1000\n550,1,1000\n550,1,1000\n550,1,1000\n",
            R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [400], promote_knob = 2 })", 100);
    std::vector<std::string> promotions;
    for (const std::string& grant : grants(results, 0))
      if (grant.find("promoted") != std::string::npos) promotions.push_back(grant);
    REQUIRE(promotions.size() >= 2);
    CHECK(std::vector<std::string>(promotions.begin(), promotions.begin() + 2) ==
          std::vector<std::string>{
              "300: promoted to queue 1: waited 200 s >= 2 x 100 s run since arrival or last promotion",
              "800: promoted to queue 1: waited 200 s >= 2 x 100 s run since arrival or last promotion",
          });
  }
  SUBCASE("promote_knob = 0 (off, the default)") {
    // Job 0 stays in queue 2 behind jobs 1-4, which keep their GPUs once
    // demoted too (running first within queue 2): they end at 1100
    // (JCT 1050), and job 0 runs its last 400 s from 1100 to 1500.
    const RunResults results = run(trace, R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [400] })", 100);
    CHECK(jcts(results) == std::vector<double>{1500, 1050, 1050, 1050, 1050});
  }
}

// --------------------------------------------------------------- gittins

TEST_CASE("gittins orders jobs by the Gittins index of their attained GPU-seconds") {
  // Distribution: 100, 3000, 3000, 3000, 100000 GPU-s (n = 5); delta = 1000.
  // With i samples <= the service, the index is taken at a = s_i - 1 with
  // j = samples <= a + delta, P = (j-i)/(n-i), E = (s_i+...+s_(j-1) + delta (n-j))/(n-i):
  //   service < 100:          i=0, a=99,   j=1: P = 1/5, E = (100 + 4 x 1000)/5 = 820
  //                           index = 0.2/820 = 243.9 per 10^6 GPU-s
  //   100 <= service < 3000:  i=1, a=2999, j=4: P = 3/4, E = (9000 + 1000)/4 = 2500
  //                           index = 0.75/2500 = 300 per 10^6
  //   3000 <= service:        i=4, a=99999 + 1000 passes the largest sample, so
  //                           (as in the simulator) j = n-1 = 4: P = 0, index 0
  // A job that has run a little is more likely to finish soon than a fresh
  // one, so Gittins keeps it; LAS would not.
  TempDir dir;
  dir.write("gpu-time.csv", "duration\n3000\n100\n100000\n3000\n3000\n");
  const std::string gittins = R"({ plugin = "gittins", distribution = "gpu-time.csv", delta = 1000,)"
                              R"( queue_thresholds_gpu_seconds = [1000000] })";

  SUBCASE("a job that has run outranks a fresh one") {
    // t=0    job 0 (4 GPUs, 250 s) starts: index 243.9.
    // t=100  job 0 has 400 GPU-s: index 300 > 243.9 for job 1 (arrived 10):
    //        job 0 keeps running and ends at 250.                 JCT 250
    // t=300  job 1 runs 300-400.                                  JCT 390
    const RunResults results = run("0,4,250\n10,4,100\n", gittins, 100, "", dir);
    CHECK(jcts(results) == std::vector<double>{250, 390});
    CHECK(grants(results, 0) == std::vector<std::string>{
                                    "0: queue 1 of 2: Gittins index 243.9 at 0 GPU-s; higher index runs first",
                                    "100: queue 1 of 2: Gittins index 300 at 400 GPU-s; higher index runs first",
                                    "200: queue 1 of 2: Gittins index 300 at 800 GPU-s; higher index runs first",
                                });
    CHECK(grants(results, 1).front() == "100: queue 1 of 2: Gittins index 243.9 at 0 GPU-s; higher index runs first");

    // LAS on the same trace lets job 1 (0 GPU-s) preempt job 0 at 100.
    const RunResults las = run("0,4,250\n10,4,100\n", R"({ plugin = "las" })", 100);
    CHECK(jcts(las) == std::vector<double>{350, 190});
  }
  SUBCASE("a job whose index falls below a waiting one's is preempted") {
    // Job 0 (4 GPUs, 1000 s) keeps index 300 up to 2800 GPU-s (t=700); at
    // t=800 it has 3200: index 0 < 243.9 of job 1 (arrived 10), which
    // preempts it and runs 800-900 (JCT 890). Job 0 resumes at 900 with 200 s
    // left: ends 1100 (JCT 1100).
    const RunResults results = run("0,4,1000\n10,4,100\n", gittins, 100, "", dir);
    CHECK(jcts(results) == std::vector<double>{1100, 890});
    CHECK(preempted_at(results, 0) == std::vector<double>{800});
    const std::vector<std::string> job0 = grants(results, 0);
    CHECK(std::find(job0.begin(), job0.end(),
                    "700: queue 1 of 2: Gittins index 300 at 2800 GPU-s; higher index runs first") != job0.end());
    CHECK(std::find(job0.begin(), job0.end(),
                    "800: queue 1 of 2: Gittins index 0 at 3200 GPU-s; higher index runs first") != job0.end());
  }
  SUBCASE("the test's own implementation of the simulator's formula agrees") {
    const std::vector<double> samples{100, 3000, 3000, 3000, 100000};
    CHECK(simulator_gittins_index(samples, 1000, 0) == doctest::Approx(0.2 / 820 * 1e6));
    CHECK(simulator_gittins_index(samples, 1000, 400) == doctest::Approx(300));
    CHECK(simulator_gittins_index(samples, 1000, 3200) == 0);
  }
}

TEST_CASE("gittins, simulator_rounding: indices within 10^-4 per 10^6 GPU-s tie, and the earlier submission wins") {
  // The distribution of the first gittins case with a quantum of 10^12 GPU-s,
  // so that every index is a few 10^-12: a+delta passes the largest sample,
  // so j = n-1 = 4.
  //   service < 100:         P = 4/5, E = (100 + 9000 + 10^12)/5: 4.0e-6 per 10^6
  //   100 <= service < 3000: P = 3/4, E = (9000 + 10^12)/4:       3.0e-6 per 10^6
  // Full precision: at t=100 job 0 (400 GPU-s) has the lower index, and the
  // fresh job 1 (arrived 10) preempts it: job 1 runs 100-200 (JCT 190), job 0
  // resumes at 200 with 150 s left (JCT 350). Rounded as the simulator does
  // (index x 10^6 to 4 decimals), both are 0: a tie, which the earlier
  // submission wins; job 0 runs on to 250, job 1 runs 300-400 (JCT 390).
  TempDir dir;
  dir.write("gpu-time.csv", "duration\n3000\n100\n100000\n3000\n3000\n");
  const std::string gittins = R"({ plugin = "gittins", distribution = "gpu-time.csv", delta = 1e12,)"
                              R"( queue_thresholds_gpu_seconds = [1000000])";
  const RunResults full = run("0,4,250\n10,4,100\n", gittins + " }", 100, "", dir);
  CHECK(jcts(full) == std::vector<double>{350, 190});
  CHECK(preempted_at(full, 0) == std::vector<double>{100});
  const RunResults rounded = run("0,4,250\n10,4,100\n", gittins + ", simulator_rounding = true }", 100, "", dir);
  CHECK(jcts(rounded) == std::vector<double>{250, 390});
  CHECK(preemptions(rounded) == std::vector<int>{0, 0});
  CHECK(grants(rounded, 0)[1] == "100: queue 1 of 2: Gittins index 0 at 400 GPU-s; higher index runs first");
}

TEST_CASE("gittins: service beyond the distribution's largest sample has index 0") {
  // Distribution 100, 200 GPU-s, delta 1000:
  //   service < 100: i=0, a=99, a + delta passes the largest sample: j = n-1 = 1,
  //                  P = 1/2, E = (100 + 1000 x 1)/2 = 550: index 909.1 per 10^6
  //   100 <= service < 200: i=1, j = 1: P = 0, index 0
  //   service >= 200: past every sample, index 0.
  // A 1-GPU job of 300 s passes through all three.
  TempDir dir;
  dir.write("gpu-time.csv", "duration\n100\n200\n");
  const RunResults results =
      run("0,1,300\n", R"({ plugin = "gittins", distribution = "gpu-time.csv", delta = 1000 })", 100, "", dir);
  CHECK(jcts(results) == std::vector<double>{300});
  CHECK(grants(results, 0) ==
        std::vector<std::string>{
            "0: queue 1 of 2: Gittins index 909.1 at 0 GPU-s; higher index runs first",
            "100: queue 1 of 2: Gittins index 0 at 100 GPU-s; higher index runs first",
            "200: queue 1 of 2: Gittins index 0, 200 GPU-s is past the largest sample (200) of the distribution",
        });
}

TEST_CASE("gittins on Tiresias's yarn-gput1000.csv gives the simulator's index") {
  const auto real = shared_data("tiresias/yarn-gput1000.csv");
  if (!real) {
    MESSAGE("skipped: ../shared/data/tiresias/yarn-gput1000.csv is absent");
    return;
  }
  const std::vector<double> samples = read_column(*real);
  REQUIRE(samples.size() == 1001);
  // A 1-GPU job of 4000 s crosses several samples; at each round the reason
  // must show the index the simulator's formula gives for its service, with
  // the default delta of 3250.
  TempDir dir;
  const RunResults results = run(
      "0,1,4000\n",
      "{ plugin = \"gittins\", distribution = \"" + real->string() + "\", queue_thresholds_gpu_seconds = [] }",
      1000, "", dir);
  CHECK(jcts(results) == std::vector<double>{4000});
  std::vector<std::string> expected;
  for (double service : {0.0, 1000.0, 2000.0, 3000.0}) {
    const double index = simulator_gittins_index(samples, 3250, service);
    CHECK(index > 0);
    expected.push_back(std::to_string(int(service)) + ": queue 1 of 1: Gittins index " + shown(index) + " at " +
                       shown(service) + " GPU-s; higher index runs first");
  }
  CHECK(grants(results, 0) == expected);
}

// ------------------------------------------------------------- arguments

TEST_CASE("tiresias and gittins arguments are checked, errors located in the config") {
  TempDir dir;
  auto validate = [&](const std::string& allocation) {
    dir.write("bad.toml", std::string(kValidateBase) + "allocation = " + allocation + "\n");
    return run_tessel({"validate", "bad.toml"}, dir.path());
  };
  // Line 9 is the allocation line; the column is that of the argument's value.
  auto result = validate(R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [3600, 1800] })");
  CHECK(result.code == 2);
  CHECK(result.err ==
        "bad.toml:9:68: argument 'queue_thresholds_gpu_seconds' of allocation plugin 'tiresias': "
        "thresholds must increase, found 1800 after 3600\n");

  result = validate(R"({ plugin = "gittins", distribution = "d.csv", queue_thresholds_gpu_seconds = [3600, 3600] })");
  CHECK(result.code == 2);
  CHECK(result.err ==
        "bad.toml:9:91: argument 'queue_thresholds_gpu_seconds' of allocation plugin 'gittins': "
        "thresholds must increase, found 3600 after 3600\n");

  result = validate(R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [0, 3600] })");
  CHECK(result.err.find("bad.toml:9:68: argument 'queue_thresholds_gpu_seconds' of allocation plugin 'tiresias': "
                        "thresholds must be positive, found 0\n") == 0);

  // The simulator's entry order puts running jobs first: it cannot go with running_first = false.
  result = validate(R"({ plugin = "tiresias", running_first = false, entry_order = true })");
  CHECK(result.code == 2);
  CHECK(result.err == "bad.toml:9:74: argument 'entry_order' of allocation plugin 'tiresias': "
                      "needs running_first = true: the simulator's queues put running jobs first\n");

  for (const std::string plugin : {"tiresias", "gittins"}) {
    CAPTURE(plugin);
    const std::string distribution = plugin == "gittins" ? R"(distribution = "d.csv", )" : "";
    result = validate("{ plugin = \"" + plugin + "\", " + distribution + "selection = \"greedy\" }");
    CHECK(result.code == 2);
    CHECK(result.err.find("argument 'selection' of allocation plugin '" + plugin + "'") != std::string::npos);
    CHECK(result.err.find("ranked, greedy_by_count") != std::string::npos);
  }

  result = validate(R"({ plugin = "tiresias", promote_knob = -1 })");
  CHECK(result.err == "bad.toml:9:52: argument 'promote_knob' of allocation plugin 'tiresias': "
                      "must be 0 (off) or positive, found -1\n");

  result = validate(R"({ plugin = "gittins" })");
  CHECK(result.code == 2);
  CHECK(result.err.find("needs argument 'distribution'") != std::string::npos);

  // Paths are relative to the config file, here in the working directory.
  result = validate(R"({ plugin = "gittins", distribution = "missing.csv" })");
  CHECK(result.code == 2);
  CHECK(result.err == "bad.toml:9:51: argument 'distribution' of allocation plugin 'gittins': "
                      "cannot open 'missing.csv'\n");

  dir.write("words.csv", "duration\n100\nabc\n");
  result = validate(R"({ plugin = "gittins", distribution = "words.csv" })");
  CHECK(result.err == "bad.toml:9:51: argument 'distribution' of allocation plugin 'gittins': "
                      "words.csv:3: duration 'abc' is not a number\n");

  dir.write("columns.csv", "job,gput\n1,100\n");
  result = validate(R"({ plugin = "gittins", distribution = "columns.csv" })");
  CHECK(result.err.find("has no 'duration' column in its header: job,gput") != std::string::npos);

  dir.write("empty.csv", "duration\n");
  result = validate(R"({ plugin = "gittins", distribution = "empty.csv" })");
  CHECK(result.err.find("holds no durations") != std::string::npos);

  dir.write("good.csv", "duration\n100\n");
  result = validate(R"({ plugin = "gittins", distribution = "good.csv", delta = 0 })");
  CHECK(result.err == "bad.toml:9:71: argument 'delta' of allocation plugin 'gittins': "
                      "must be a positive number of GPU-seconds\n");
  CHECK(validate(R"({ plugin = "gittins", distribution = "good.csv" })").code == 0);
  CHECK(validate(R"({ plugin = "tiresias", queue_thresholds_gpu_seconds = [400, 3600], promote_knob = 2 })").code == 0);
}

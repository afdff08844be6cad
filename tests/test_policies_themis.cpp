// The themis allocation plugin's partial-allocation auction, on hand-made
// traces whose valuations, proportional-fair allocation, partial-allocation
// fractions and leftovers are worked out by hand in the comments; the
// exact count knapsack it solves with; and its argument check.
//
// The workload model is `linear`: a job's work is its duration times its
// GPUs, and it progresses at one unit per GPU per second, so on g GPUs a job
// with W units left needs W / g seconds. Rounds (leases) are 100 s.
// Notation: T = T_shared = (now - arrival) + remaining seconds;
// v(g) = T_old / T(g); v(0) = T_old / (now - arrival + 100 + remaining at
// its current size).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <tessel/allocation.hpp>

#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

std::string themis_experiment(int gpus, const std::string& knob) {
  return "[cluster]\nnodes = 1\ngpus_per_node = " + std::to_string(gpus) + R"(
[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
round_seconds = 100
allocation = { plugin = "themis", fairness_knob = )" + knob + R"( }
placement = { plugin = "consolidated" }

[output]
decisions = true
)";
}

std::vector<double> jct_of(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(NAN) - job.arrival);
  return out;
}

// "code: reason" of the allocation decision about `job` at `time`, or "".
std::string decided(const RunResults& results, JobId job, double time) {
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.stage == PluginKind::allocation && d.time == time) return d.code + ": " + d.reason;
  return "";
}

}  // namespace

TEST_CASE("themis: two elastic bidders split the proportional-fair bundles, pay half, and a non-bidder runs on "
          "the leftovers") {
  // 4 GPUs, fairness_knob 0.5. At t=0: jobs 0, 1 elastic on [1, 4], asking for 1 GPU, 400 units
  // each; jobs 2, 3 rigid on 2 GPUs for 100 s (200 units).
  // rho at t=0 (N = 4, a fair share of 1 GPU): jobs 0, 1: T = 400, T_iso = 400: rho 1.
  //   Jobs 2, 3: T = 100, T_iso = 200 / (2 x 1/2) = 200: rho 0.5.
  // Bidders: floor(0.5 x 4) = 2, jobs 0 and 1.
  // Valuations: v(g) = 400 / (400 / g) = g for g = 1..4; v(0) = 400 / (100 + 400) = 0.8.
  // Proportional fair within 4 GPUs: (2, 2) gives 4, beating (3, 1) = 3 and (4, 0) = 3.2.
  // PA fraction of job 0: job 1's v with job 0 present, v_1(2) = 2, over job 1's best
  //   alone, v_1(4) = 4: c_0 = 0.5, so it keeps 0.5 x 2 = 1 GPU; job 1 likewise.
  // Leftovers: the 2 GPUs withheld; job 2 (rho 0.5, the earlier of 2 and 3) starts on them.
  // t=100  job 2 ends (JCT 100). N = 3: floor(1.5) = 1 bidder. N_avg of jobs 0, 1, 3 is 3.5, a
  //        fair share of 8/7 GPUs. Jobs 0, 1 (300 left on 1 GPU): T = 400, T_iso = 400, rho 1.
  //        Job 3: T = 200, T_iso = 200 / (2 x 4/7) = 175, rho 1.143: the lone bidder (c = 1)
  //        takes its 2 GPUs, which jobs 0 and 1 leave free; it ends at 200 (JCT 200).
  TempDir dir;
  dir.write("trace.csv",
            "arrival,gpus,duration,min_gpus,max_gpus\n0,1,400,1,4\n0,1,400,1,4\n0,2,100,2,2\n0,2,100,2,2\n");
  const RunResults results = simulate(dir, themis_experiment(4, "0.5"));
  CHECK(decided(results, 0, 0) ==
        "grant: bids at rho 1: the proportional-fair bundle is 2 GPUs; it keeps 1 (partial-allocation fraction 0.5)");
  CHECK(decided(results, 1, 0) ==
        "grant: bids at rho 1: the proportional-fair bundle is 2 GPUs; it keeps 1 (partial-allocation fraction 0.5)");
  CHECK(decided(results, 2, 0) == "grant: rho 0.5, not among the 2 worst-off that bid: runs on the auction's leftovers");
  CHECK(results.jobs[0].first_start == 0);
  CHECK(results.jobs[1].first_start == 0);
  CHECK(results.jobs[2].first_start == 0);
  CHECK(results.jobs[3].first_start == 100);
  CHECK(decided(results, 3, 100) ==
        "grant: bids at rho 1.143: the proportional-fair bundle is 2 GPUs; it keeps 2 (partial-allocation fraction 1)");
  CHECK(decided(results, 0, 100) ==
        "grant: rho 1, not among the 1 worst-off that bid: keeps its GPUs from the auction's leftovers unless a "
        "bidder needs them");
  const std::vector<double> jct = jct_of(results);
  CHECK(jct[2] == doctest::Approx(100));
  CHECK(jct[3] == doctest::Approx(200));
  for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
}

TEST_CASE("themis: a hidden payment larger than half a gang leaves the winner nothing; the leftovers go to the "
          "non-bidder first") {
  // 3 GPUs, fairness_knob 0.3. At t=0, all rigid: job 0 (A) 2 GPUs x 50 s, job 1 (B) 2 GPUs x 80 s,
  // job 2 (D) 3 GPUs x 100 s.
  // rho (N = 3, fair share 1 GPU): A: T = 50, T_iso = 100 / (2 x 1/2) = 100, rho 0.5; B: 80 / 160 =
  //   0.5; D: 100 / (300 / (3 x 1/3)) = 0.3333. Bidders: floor(0.7 x 3) = 2, A and B (tie: arrival).
  // Valuations: v(2) = 1; v_A(0) = 50 / 150 = 1/3, v_B(0) = 80 / 180 = 4/9.
  // Proportional fair within 3 GPUs (only one fits): A runs, 1 x 4/9 > 1/3 x 1.
  // PA fraction of A: v_B(0) = 4/9 over B's best alone, v_B(2) = 1: c_A = 0.4444, 0.889 of its 2
  //   GPUs, nearer 0 than 2: A keeps nothing.
  // Leftovers, all 3 GPUs: D (non-bidder) starts and ends at 100; A, then B, would run only on
  //   what D leaves: nothing.
  // t=100  N = 2, N_avg 2.5, fair share 1.2 GPUs. A: T = 150, T_iso = 100 / 1.2, rho 1.8;
  //        B: T = 180, T_iso = 160 / 1.2, rho 1.35. floor(0.7 x 2) = 1 bidder: A, alone (c = 1),
  //        runs 100-150 (JCT 150); B, a waiting non-bidder, finds 1 GPU free.
  // t=200  B alone bids, runs 200-280 (JCT 280).
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,2,50\n0,2,80\n0,3,100\n");
  const RunResults results = simulate(dir, themis_experiment(3, "0.3"));
  CHECK(decided(results, 0, 0) ==
        "grant: bids at rho 0.5: its bundle of 2 GPUs times its partial-allocation fraction 0.4444 rounds to "
        "none; runs only on GPUs no other job takes");
  CHECK(decided(results, 1, 0) ==
        "grant: bids at rho 0.5: the proportional-fair allocation gives it none of the 3 GPUs; runs only on GPUs "
        "no other job takes");
  CHECK(decided(results, 2, 0) ==
        "grant: rho 0.3333, not among the 2 worst-off that bid: runs on the auction's leftovers");
  CHECK(decided(results, 0, 100) ==
        "grant: bids at rho 1.8: the proportional-fair bundle is 2 GPUs; it keeps 2 (partial-allocation fraction 1)");
  CHECK(jct_of(results) == std::vector<double>{150, 280, 100});
}

namespace {

// Two GPUs. Jobs 0 and 1 (1 GPU, 1000 s) arrive at 0; job 2 (1 GPU, 100 s) and job 3 (1 GPU,
// 50 s) at 50. rho = T_shared / T_isolated, T_isolated = work / min(1, (C / N_avg) / gpus)
// with C = 2 GPUs and N_avg the job's average count of active jobs over its rounds.
//   t=0    jobs 0, 1: N = 2, share 1 GPU each: rho = 1000 / 1000 = 1 for both; both start.
//   t=100  N = 4.  Jobs 0, 1: N_avg (2 + 4) / 2 = 3, share 2/3: T_iso = 1500, T_sh = 100 + 900,
//                  rho 0.6667.  Job 2: N_avg 4, share 1/2: T_iso = 200, T_sh = 50 + 100, rho 0.75.
//                  Job 3: T_iso = 100, T_sh = 50 + 50, rho 1.
const char* kLeaseTrace = "arrival,gpus,duration\n0,1,1000\n0,1,1000\n50,1,100\n50,1,50\n";

}  // namespace

TEST_CASE("themis, fairness_knob = 0.8: the lone worst-off bidder takes a running job's GPU") {
  // Bidders: max(1, floor(0.2 x 4)) = 1, job 3 (rho 1): alone, c = 1, its 1 GPU. Then the
  // leftovers: running jobs 0, 1 (tie: by arrival), then waiting job 2.
  // t=100  job 3 needs a GPU: the core preempts the lowest-ranked running job, job 1. Job 3
  //        ends at 150. Job 2 (rho 0.75 > 0.6667) is not a bidder and waits.
  // t=200  N = 3. Job 0: N_avg 3, rho (200 + 800) / 1500 = 0.6667. Job 1: 900 left,
  //        rho (200 + 900) / 1500 = 0.7333. Job 2: N_avg 3.5, share 4/7: T_iso = 175,
  //        rho (150 + 100) / 175 = 1.429: it bids and takes the free GPU; ends at 300.
  // t=300  job 1 (rho 1200 / 1375 = 0.873, the worst) takes the free GPU: ends 300 + 900 = 1200.
  //        Job 0 ends at 1000.
  TempDir dir;
  dir.write("trace.csv", kLeaseTrace);
  const RunResults results = simulate(dir, themis_experiment(2, "0.8"));
  CHECK(jct_of(results) == std::vector<double>{1000, 1200, 250, 100});
  CHECK(results.jobs[1].preemptions == 1);
  CHECK(results.jobs[2].first_start == 200);
  CHECK(decided(results, 3, 100) ==
        "grant: bids at rho 1: the proportional-fair bundle is 1 GPUs; it keeps 1 (partial-allocation fraction 1)");
  CHECK(decided(results, 2, 100) ==
        "grant: rho 0.75, not among the 1 worst-off that bid: runs on the auction's leftovers");
  CHECK(decided(results, 0, 100) ==
        "grant: rho 0.6667, not among the 1 worst-off that bid: keeps its GPUs from the auction's leftovers "
        "unless a bidder needs them");
}

TEST_CASE("themis, fairness_knob = 0: four bidders; the short newcomers win and pay a tenth") {
  // t=100  all 4 bid for 2 GPUs. Valuations of waiting (g = 0), each T_old / (T_old + 100):
  //        jobs 0, 1 (running, T_old = 100 + 900 = 1000): 1000 / 1100 = 0.9091;
  //        job 2 (T_old = 50 + 100 = 150): 150 / 250 = 0.6; job 3 (T_old = 100): 0.5; v(1) = 1.
  //        Two run, and the product is that of the two that wait: jobs 0 and 1 waiting give
  //        0.8264, the most. So jobs 2 and 3 run.
  //        c_2 = (v_0(0) v_1(0) v_3(1)) / (the best of jobs 0, 1, 3 alone on 2 GPUs: one of 0, 1
  //        waits, 0.9091) = 0.9091; 0.9091 of 1 GPU rounds to 1. Job 3 likewise.
  //        Jobs 0 and 1 keep nothing and are listed last: both are preempted.
  //        Job 3 ends at 150 (JCT 100), job 2 at 200 (JCT 150).
  // t=200  jobs 0 and 1 restart with 900 s left each: both end at 1100.
  TempDir dir;
  dir.write("trace.csv", kLeaseTrace);
  const RunResults results = simulate(dir, themis_experiment(2, "0"));
  CHECK(jct_of(results) == std::vector<double>{1100, 1100, 150, 100});
  CHECK(results.jobs[0].preemptions == 1);
  CHECK(results.jobs[1].preemptions == 1);
  CHECK(decided(results, 2, 100) ==
        "grant: bids at rho 0.75: the proportional-fair bundle is 1 GPUs; it keeps 1 (partial-allocation fraction "
        "0.9091)");
  CHECK(decided(results, 0, 100) ==
        "grant: bids at rho 0.6667: the proportional-fair allocation gives it none of the 2 GPUs; runs only on GPUs "
        "no other job takes");
}

TEST_CASE("themis finishes every job at every fairness_knob, rigid and elastic") {
  std::string trace = "arrival,gpus,duration,min_gpus,max_gpus\n";
  const int sizes[] = {1, 2, 4, 1, 8, 2};
  for (int i = 0; i < 60; ++i) {
    const int gpus = sizes[i % 6];
    const bool elastic = i % 3 == 0;
    trace += std::to_string(i * 45) + "," + std::to_string(gpus) + "," + std::to_string(200 + (i * 7919) % 3000) +
             "," + std::to_string(elastic ? 1 : gpus) + "," + std::to_string(elastic ? 2 * gpus : gpus) + "\n";
  }
  TempDir dir;
  dir.write("trace.csv", trace);
  for (const char* knob : {"0", "0.5", "0.8", "1"}) {
    CAPTURE(knob);
    const std::string toml = "[cluster]\nnodes = 2\ngpus_per_node = 4\n[workload]\nkind = \"csv\"\npath = "
                             "\"trace.csv\"\n[scheduler]\nround_seconds = 300\nallocation = { plugin = \"themis\", "
                             "fairness_knob = " + std::string(knob) + " }\nplacement = { plugin = \"consolidated\" }\n";
    const RunResults results = simulate(dir, toml);
    REQUIRE(results.jobs.size() == 60);
    for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
  }
}

TEST_CASE("themis: fairness_knob outside [0, 1] is refused at the argument, exit 2; 1 is allowed") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n");
  for (const char* bad : {"1.5", "-0.1", "nan"}) {
    CAPTURE(bad);
    dir.write("bad.toml", themis_experiment(2, bad));
    const auto result = run_tessel({"validate", "bad.toml"}, dir.path());
    CHECK(result.code == 2);
    CHECK(result.err.find("argument 'fairness_knob' of allocation plugin 'themis': must be in [0, 1], got ") !=
          std::string::npos);
  }
  dir.write("one.toml", themis_experiment(2, "1"));
  CHECK(run_tessel({"validate", "one.toml"}, dir.path()).code == 0);
}

// ------------------------------------------------------------------ the knapsack

namespace {

struct Option {
  int gpus;
  double value;
};

// The best sum over items (one option each) within `budget`, by trying every combination.
double brute_force(const std::vector<std::vector<Option>>& items, int budget, std::size_t skip) {
  double best = -INFINITY;
  std::vector<std::size_t> index(items.size(), 0);
  while (true) {
    int used = 0;
    double sum = 0;
    for (std::size_t j = 0; j < items.size(); ++j)
      if (j != skip) used += items[j][index[j]].gpus, sum += items[j][index[j]].value;
    if (used <= budget) best = std::max(best, sum);
    std::size_t j = 0;
    while (j < items.size() && ++index[j] == items[j].size()) index[j++] = 0;
    if (j == items.size()) return best;
  }
}

}  // namespace

TEST_CASE("CountKnapsack finds the exact best, and the best without each item, as exhaustive search does") {
  // Small random instances: up to 5 items, sizes 0..4 GPUs, values of either sign.
  std::uint64_t seed = 12345;
  auto next = [&seed]() {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((seed >> 33) % 1000);
  };
  allocation::CountKnapsack knapsack;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<Option>> items(1 + next() % 5);
    for (auto& options : items) {
      options.push_back({0, (next() - 500) / 100.0});
      for (int g = 1 + next() % 2; g <= 4; g += 1 + next() % 2) options.push_back({g, (next() - 500) / 100.0});
    }
    const int budget = next() % 9;
    const auto options_of = [&](std::size_t j) -> const std::vector<Option>& { return items[j]; };
    const auto value_of = [](const Option& option) { return option.value; };
    const std::vector<std::size_t>& picked = knapsack.solve(items.size(), budget, options_of, value_of);
    int used = 0;
    double sum = 0;
    for (std::size_t j = 0; j < items.size(); ++j) used += items[j][picked[j]].gpus, sum += items[j][picked[j]].value;
    CHECK(used <= budget);
    CHECK(sum == doctest::Approx(knapsack.best()));
    CHECK(knapsack.best() == doctest::Approx(brute_force(items, budget, items.size())));
    const std::vector<double>& without = knapsack.best_without_each(options_of, value_of);
    for (std::size_t i = 0; i < items.size(); ++i) CHECK(without[i] == doctest::Approx(brute_force(items, budget, i)));
  }
}

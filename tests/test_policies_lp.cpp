// The LP-based policies: gavel's time shares on two GPU types computed by
// hand for each of its policies, its rounds, Synergy's CPU and memory
// allocation (proportional, greedy, TUNE, OPT) by hand, and synergy
// placement. Every case is a whole simulation of a small CSV trace, priced
// by a gavel-table or synergy-sensitivity file written here; what the
// policies decided is read from the decisions they record.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

std::vector<double> jcts(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(NAN) - job.arrival);
  return out;
}

// "time share 0.3824 on v100, 0.6176 on k80 (..." -> {v100: 0.3824, k80: 0.6176}.
std::map<std::string, double> time_shares(const std::string& reason) {
  std::map<std::string, double> shares;
  std::size_t at = reason.find("time share ");
  REQUIRE(at != std::string::npos);
  at += 11;
  const std::size_t end = reason.find(" (", at);
  while (at < end) {
    const std::size_t on = reason.find(" on ", at);
    const std::size_t next = std::min(reason.find(", ", on), end);
    shares[reason.substr(on + 4, next - on - 4)] = std::stod(reason.substr(at, on - at));
    at = next + 2;
  }
  return shares;
}

// The number after `label` in `text`.
double number_after(const std::string& text, const std::string& label) {
  const std::size_t at = text.find(label);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + label.size()));
}

}  // namespace

// ------------------------------------------------------------------ gavel

namespace {

// Alpha runs 6 steps/s on a V100 and 1 on a K80; Beta 4 and 2.
const char* kGavelTable = R"json({
  "v100": {"('Alpha', 1)": {"null": 6.0}, "('Beta', 1)": {"null": 4.0}},
  "k80":  {"('Alpha', 1)": {"null": 1.0}, "('Beta', 1)": {"null": 2.0}}
})json";

// One V100 and three K80s. Job 0 (Alpha, 1,500 s on a V100: 9,000 steps)
// arrives at 0; job 1 (Beta, 1,260 s: 5,040 steps) at 300.
//
// Until 300, job 0 is alone; every policy gives it all of the V100 (its
// fastest type), so at 300 it has done 1,800 steps and 7,200 remain. At
// 300 job 1 arrives and the LP is solved again. With one V100, both jobs'
// time fully used and the V100 full, X = (a, 1 - a) for job 0 and
// (1 - a, a) for job 1 (a: job 0's V100 share): job 0 runs at 1 + 5a
// steps/s and job 1 at 4 - 2a. That segment is every allocation no other
// beats for both jobs (the K80s are never short), so each policy picks a
// point on it.
const char* kTwoJobs = "arrival,gpus,duration,model\n0,1,1500,Alpha\n300,1,1260,Beta\n";

RunResults gavel_run(const TempDir& dir, const std::string& policy, const std::string& placement = "consolidated",
                     const std::string& groups_first = "v100", const std::string& trace = kTwoJobs) {
  dir.write("throughputs.json", kGavelTable);
  dir.write("trace.csv", trace);
  const std::string v100 = "[[cluster.groups]]\ncount = 1\ngpus_per_node = 1\ngpu_type = \"v100\"\n";
  const std::string k80 = "[[cluster.groups]]\ncount = 1\ngpus_per_node = 3\ngpu_type = \"k80\"\n";
  return simulate(dir, (groups_first == "v100" ? v100 + k80 : k80 + v100) + R"(
[workload]
kind = "csv"
path = "trace.csv"
model = { name = "gavel-table", path = "throughputs.json" }
reference_gpu_type = "v100"

[scheduler]
allocation = { plugin = "gavel", policy = ")" + policy + R"(" }
placement = { plugin = ")" + placement + R"(" }

[output]
decisions = true
)");
}

}  // namespace

TEST_CASE("gavel max_min_fairness: the time shares that equalise normalised throughput, by hand") {
  // prop_j, the throughput on an equal share (1/4 of the GPUs are V100s):
  // job 0: 6/4 + 1 * 3/4 = 2.25; job 1: 4/4 + 2 * 3/4 = 2.5. Max-min
  // equalises (1 + 5a) / 2.25 = (4 - 2a) / 2.5: a = 6.5 / 17.
  TempDir dir;
  const RunResults results = gavel_run(dir, "max_min_fairness");
  const double a = 6.5 / 17;
  const auto job0 = time_shares(reason_of(results, 0, 300, PluginKind::allocation));
  const auto job1 = time_shares(reason_of(results, 1, 300, PluginKind::allocation));
  CHECK(job0.at("v100") == doctest::Approx(a).epsilon(1e-3));
  CHECK(job0.at("k80") == doctest::Approx(1 - a).epsilon(1e-3));
  CHECK(job1.at("v100") == doctest::Approx(1 - a).epsilon(1e-3));
  CHECK(job1.at("k80") == doctest::Approx(a).epsilon(1e-3));
  CHECK(number_after(reason_of(results, 0, 300, PluginKind::allocation), "every job gets at least ") ==
        doctest::Approx((1 + 5 * a) / 2.25).epsilon(1e-3));
  // Alone, job 0 had all of the V100.
  CHECK(time_shares(reason_of(results, 0, 0, PluginKind::allocation)).at("v100") == 1);
}

TEST_CASE("gavel min_seconds_between_allocations: solves held back as in Gavel's simulator") {
  // kTwoJobs and job 2 (Beta, 20,000 steps) at 600. Solved at 0; job 1's
  // arrival at 300 is the first change after a solve at time 0: solved at
  // once. Job 2's at 600 waits until 300 + 1,920 = 2,220, so for the round
  // at 2,400; until then job 2 has no share. Without the throttle it has
  // one from 600.
  const std::string trace = std::string(kTwoJobs) + "600,1,5000,Beta\n";
  const auto run = [&](const std::string& extra) {
    TempDir dir;
    dir.write("throughputs.json", kGavelTable);
    dir.write("trace.csv", trace);
    return simulate(dir, R"([[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "v100"
[[cluster.groups]]
count = 1
gpus_per_node = 3
gpu_type = "k80"

[workload]
kind = "csv"
path = "trace.csv"
model = { name = "gavel-table", path = "throughputs.json" }
reference_gpu_type = "v100"

[scheduler]
allocation = { plugin = "gavel", policy = "max_min_fairness")" + extra + R"( }
placement = { plugin = "consolidated" }

[output]
decisions = true
)");
  };
  // The first decision with a time share for `job`, in the allocation stage.
  const auto first_share = [](const RunResults& results, JobId job) {
    for (const DecisionRecord& d : results.decisions)
      if (d.job == job && d.stage == PluginKind::allocation && d.reason.find("time share ") != std::string::npos &&
          d.reason.find("no time share yet") == std::string::npos)
        return d.time;
    return -1.0;
  };
  const RunResults throttled = run(", min_seconds_between_allocations = 1920");
  CHECK(first_share(throttled, 1) == 300);
  CHECK(reason_of(throttled, 2, 600, PluginKind::allocation).find("no time share yet (solved last at 300 s") !=
        std::string::npos);
  CHECK(first_share(throttled, 2) == 2400);
  const RunResults every_change = run("");
  CHECK(first_share(every_change, 2) == 600);
}

TEST_CASE("gavel finish_time_fairness: the shares that equalise finish-time ratios, by hand") {
  // Isolated shares: 1/2 of each type's GPUs per job, as time fractions
  // (0.5, 1.5), scaled to sum to 1: (0.25, 0.75). Job 0's isolated
  // throughput 6/4 + 3/4 = 2.25 (alone at 0 as well), job 1's 1 + 1.5 = 2.5.
  // At 300, job 0's 1,800 steps took 800 s at 2.25/s in isolation, so
  //   rho_0 = (300 + 7200 / (1 + 5a)) / (800 + 7200 / 2.25) = (300 + 7200 / y) / 4000,  y = 1 + 5a
  //   rho_1 = (0 + r / (4 - 2a)) / (r / 2.5) = 12.5 / (22 - 2y).
  // Equal when 6y^2 + 578y - 1584 = 0: y = (-578 + 610) / 12 = 8/3, a = 1/3, rho = 0.75.
  TempDir dir;
  const RunResults results = gavel_run(dir, "finish_time_fairness");
  const auto job0 = time_shares(reason_of(results, 0, 300, PluginKind::allocation));
  const auto job1 = time_shares(reason_of(results, 1, 300, PluginKind::allocation));
  CHECK(job0.at("v100") == doctest::Approx(1.0 / 3).epsilon(1e-3));
  CHECK(job0.at("k80") == doctest::Approx(2.0 / 3).epsilon(1e-3));
  CHECK(job1.at("v100") == doctest::Approx(2.0 / 3).epsilon(1e-3));
  CHECK(job1.at("k80") == doctest::Approx(1.0 / 3).epsilon(1e-3));
  CHECK(number_after(reason_of(results, 1, 300, PluginKind::allocation), "no job finishes later than ") ==
        doctest::Approx(0.75).epsilon(1e-3));
}

TEST_CASE("gavel min_total_duration: Gavel's search lands within 5% of the makespan computed by hand") {
  // Both jobs finish together at the least T: 7200 / (1 + 5a) = 5040 / (4 - 2a)
  // gives a = 0.6, both at T = 7200 / 4 = 1800 s. Gavel's search stops with
  // T within 5% above it, at an allocation that finishes both by T.
  TempDir dir;
  const RunResults results = gavel_run(dir, "min_total_duration");
  const std::string reason = reason_of(results, 0, 300, PluginKind::allocation);
  const double makespan = number_after(reason, "every job can finish within ");
  CHECK(makespan >= 1800 * (1 - 1e-3));  // the reason rounds to 4 digits
  CHECK(makespan <= 1800 * 1.05);
  const auto job0 = time_shares(reason);
  const auto job1 = time_shares(reason_of(results, 1, 300, PluginKind::allocation));
  CHECK(6 * job0.at("v100") + 1 * job0.at("k80") >= 7200 / makespan * (1 - 1e-3));
  CHECK(4 * job1.at("v100") + 2 * job1.at("k80") >= 5040 / makespan * (1 - 1e-3));
  CHECK(job0.at("v100") + job1.at("v100") <= 1 + 1e-3);
  // 5% of slack moves a by at most 0.07 (a in [0.556, 0.667] on the segment).
  CHECK(job0.at("v100") == doctest::Approx(0.6).epsilon(0.12));
}

TEST_CASE("gavel's grants pin the GPU type, and first_fit and consolidated honour it") {
  // K80s listed first: a placement ignoring the grant's type would put job 0
  // on a K80 (and the core would stop the run). Alone, job 0 runs its 9,000
  // steps at 6/s on the V100: done at 1,500 s.
  for (const char* placement : {"first_fit", "consolidated"}) {
    CAPTURE(placement);
    TempDir dir;
    const RunResults results =
        gavel_run(dir, "max_min_fairness", placement, "k80", "arrival,gpus,duration,model\n0,1,1500,Alpha\n");
    CHECK(jcts(results)[0] == doctest::Approx(1500));
    CHECK(reason_of(results, 0, 0, PluginKind::allocation).starts_with("runs on v100: "));
  }
}

TEST_CASE("gavel walks the GPU types fastest first, whatever the cluster's order") {
  // Job 1 needs 2 GPUs: only the K80s have them. Were the K80s (listed
  // first) walked first, their spare GPU would go to job 0, whose share is
  // all on the V100, leaving the V100 idle.
  TempDir dir;
  const RunResults results = gavel_run(dir, "max_min_fairness", "consolidated", "k80",
                                       "arrival,gpus,duration,model\n0,1,1500,Alpha\n0,2,100,Beta\n");
  const std::string job0 = reason_of(results, 0, 0, PluginKind::allocation);
  CHECK(job0.starts_with("runs on v100: "));
  CHECK(time_shares(job0) == std::map<std::string, double>{{"k80", 0}, {"v100", 1}});
  CHECK(reason_of(results, 1, 0, PluginKind::allocation).starts_with("runs on k80: time share 1 on k80"));
  CHECK(jcts(results)[0] == doctest::Approx(1500));
}

TEST_CASE("gavel rounds: each round runs the job furthest below its time share") {
  // One GPU; job 1 weighs 3 times job 0, so max-min gives it 3/4 of the
  // time (z = x_0 / 1 = x_1 / 3). Each round the job with the least
  // rounds received / share runs (counts start at half a round); a tie goes
  // to the larger share:
  //   round at    0: job 0 0.5/0.25 = 2, job 1 0.5/0.75 = 0.67 -> job 1
  //             300: 2 vs 1.5/0.75 = 2, tie                  -> job 1
  //             600: 2 vs 3.33                               -> job 0
  //             900: 1.5/0.25 = 6 vs 3.33                    -> job 1
  //            1200: 6 vs 4.67 -> job 1;  1500: 6 vs 6, tie -> job 1
  //            1800: 6 vs 7.33 -> job 0;  2100: 10 vs 7.33  -> job 1
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,priority\n0,1,100000,1\n0,1,100000,3\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 1

[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
allocation = { plugin = "gavel" }
placement = { plugin = "first_fit" }

[output]
decisions = true
)");
  const auto first = [](std::vector<double> times, std::size_t n) {
    times.resize(std::min(times.size(), n));
    return times;
  };
  CHECK(first(placed_at(results, 1), 3) == std::vector<double>{0, 900, 2100});
  CHECK(first(placed_at(results, 0), 2) == std::vector<double>{600, 1800});
  CHECK(time_shares(reason_of(results, 1, 0, PluginKind::allocation)).at("v100") == doctest::Approx(0.75));
}

TEST_CASE("gavel leaves out a job larger than every GPU type, and says why it waits") {
  // One V100 and one K80: job 0's two GPUs would have to mix types.
  TempDir dir;
  dir.write("throughputs.json", kGavelTable);
  dir.write("trace.csv", "arrival,gpus,duration,model\n0,2,100,Alpha\n0,1,100,Beta\n");
  const RunResults results = simulate(dir, R"([[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "v100"
[[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "k80"

[workload]
kind = "csv"
path = "trace.csv"
model = { name = "gavel-table", path = "throughputs.json" }

[scheduler]
allocation = { plugin = "gavel" }
placement = { plugin = "consolidated" }

[output]
decisions = true
)");
  CHECK(results.jobs[0].status == "queued");
  CHECK(reason_of(results, 0, 0, PluginKind::allocation) == "needs 2 GPUs of one type; no GPU type has more than 1 up");
  // Alone in the LP, job 1 gets the whole V100.
  CHECK(results.jobs[1].status == "finished");
  CHECK(time_shares(reason_of(results, 1, 0, PluginKind::allocation)).at("v100") == 1);
}

// ------------------------------------------------- GPU types in grants

namespace {

// One V100 and one K80, each a node of one GPU (V100 listed first: type 0).
std::string v100_and_k80(const std::string& rest) {
  return R"([[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "v100"
[[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "k80"
)" + rest;
}

}  // namespace

TEST_CASE("a running job granted another GPU type moves there") {
  // type_hopper grants type (round mod 2): the V100 in rounds at 0, 600, ...,
  // the K80 in rounds at 300, 900, ... Alpha's 9,000 steps: 1,800 on the
  // V100 (6/s) and 300 on the K80 (1/s) per pair of rounds, so 8,400 by
  // 2,400; the last 600 take 100 s on the V100: done at 2,500. (Kept on
  // the V100 it would be done at 1,500.)
  TempDir dir;
  dir.write("throughputs.json", kGavelTable);
  dir.write("trace.csv", "arrival,gpus,duration,model\n0,1,1500,Alpha\n");
  const std::string hopper = "{ plugin = \"type_hopper\", path = \"" + test_plugin("type_hopper").string() + "\" }";
  const RunResults results = simulate(dir, v100_and_k80(R"(
[workload]
kind = "csv"
path = "trace.csv"
model = { name = "gavel-table", path = "throughputs.json" }
reference_gpu_type = "v100"

[scheduler]
round_seconds = 300
allocation = )" + hopper + R"(
placement = { plugin = "first_fit" }
)"));
  CHECK(jcts(results)[0] == doctest::Approx(2500));
  CHECK(results.jobs[0].gpu_seconds == doctest::Approx(2500));
}

namespace {

// Alpha runs 6 steps/s on a V100 and 1 on a K80; Rec (like Gavel's
// Recommendation jobs) 1 on a V100 and 2 on a K80.
const char* kTypePreferences = R"json({
  "v100": {"('Alpha', 1)": {"null": 6.0}, "('Rec', 1)": {"null": 1.0}},
  "k80":  {"('Alpha', 1)": {"null": 1.0}, "('Rec', 1)": {"null": 2.0}}
})json";

RunResults fifo_typed(const TempDir& dir, const std::string& fifo, const std::string& trace,
                      const std::string& cluster, int seed = 1) {
  dir.write("throughputs.json", kTypePreferences);
  dir.write("trace.csv", trace);
  return simulate(dir, cluster + R"(
[workload]
kind = "csv"
path = "trace.csv"
model = { name = "gavel-table", path = "throughputs.json" }
reference_gpu_type = "v100"
seed = )" + std::to_string(seed) + R"(

[scheduler]
allocation = )" + fifo + R"(
placement = { plugin = "first_fit" }

[output]
decisions = true
)");
}

// The K80 listed first, so that first_fit alone prefers it.
std::string k80_and_v100() {
  return R"([[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "k80"
[[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "v100"
)";
}

}  // namespace

TEST_CASE("fifo gpu_type = fastest: each job on the type with room where it runs fastest, in arrival order") {
  // Durations are on a V100: job 0 Alpha 3,600 steps, job 1 Rec 600 steps,
  // job 2 Alpha 3,600 steps, all at 0.
  const std::string trace = "arrival,gpus,duration,model\n0,1,600,Alpha\n0,1,600,Rec\n0,1,600,Alpha\n";
  TempDir dir;
  // fastest: job 0 on the V100 (6 vs 1): 600 s; job 1 on the K80 (2 vs 1):
  // 300 s; job 2 finds no type with room and waits; at 300 only the K80 is
  // free: 3,600 s there, done at 3,900.
  const RunResults fastest = fifo_typed(dir, R"({ plugin = "fifo", gpu_type = "fastest" })", trace, k80_and_v100());
  CHECK(jcts(fastest) == std::vector<double>{600, 300, 3900});
  CHECK(reason_of(fastest, 1, 0, PluginKind::allocation) ==
        "served in arrival order on k80, the fastest GPU type with room for it");
  CHECK(reason_of(fastest, 2, 0, PluginKind::allocation) ==
        "needs 1 GPUs of one type; the most free on one type is 0");
  // any: first_fit puts job 0 on the K80 (3,600 s) and job 1 on the V100
  // (600 s); job 2 takes the V100 at 600 and runs 600 s there.
  const RunResults any = fifo_typed(dir, R"({ plugin = "fifo" })", trace, k80_and_v100());
  CHECK(jcts(any) == std::vector<double>{3600, 600, 1200});
}


TEST_CASE("fifo gpu_type = fastest-reassigned: every recompute assigns running jobs again, as Gavel's FIFO_Perf") {
  // One K80 and one V100; Alpha runs 6 steps/s on the V100, 1 on the K80.
  // Durations are on a V100: job 0 600 steps, job 1 1,200, job 2 3,600, all
  // at 0; rounds every 300 s.
  const std::string trace = "arrival,gpus,duration,model\n0,1,100,Alpha\n0,1,200,Alpha\n0,1,600,Alpha\n";
  TempDir dir;
  // At 0: job 0 on the V100, job 1 on the K80, job 2 finds no room. Job 0
  // ends at 100.
  // fastest: job 1 stays on the K80 (1,200 s); at 300 job 2 takes the V100: 900.
  const RunResults fastest = fifo_typed(dir, R"({ plugin = "fifo", gpu_type = "fastest" })", trace, k80_and_v100());
  CHECK(jcts(fastest) == std::vector<double>{100, 1200, 900});
  // fastest-reassigned: at 300 job 1 (300 steps done) moves to the V100 and
  // ends at 300 + 900 / 6 = 450; job 2 takes the K80. At 600 job 2 (300
  // steps done) moves to the V100: 600 + 3,300 / 6 = 1,150.
  const RunResults reassigned =
      fifo_typed(dir, R"({ plugin = "fifo", gpu_type = "fastest-reassigned" })", trace, k80_and_v100());
  const std::vector<double> expected{100, 450, 1150};
  CHECK(jcts(reassigned) == expected);
  CHECK(reason_of(reassigned, 1, 300, PluginKind::allocation) ==
        "served in arrival order on v100, the fastest GPU type with room for it, every active job assigned again in "
        "arrival order");
  CHECK(reason_of(reassigned, 2, 0, PluginKind::allocation) ==
        "needs 1 GPUs of one type; the most free on one type is 0");
}

TEST_CASE("fifo min_seconds_between_allocations: Gavel's throttle, the first change after time 0 at once") {
  const std::string trace = "arrival,gpus,duration,model\n0,1,100,Alpha\n0,1,200,Alpha\n0,1,600,Alpha\n";
  TempDir dir;
  // As above, but types are assigned again at most every 1,920 s. The
  // change at 100 (job 0 ends) is the first after the assignment at 0: at
  // once, in the round at 300, as above. Job 1 ends at 450; the next
  // assignment may come at 300 + 1,920 = 2,220, so in the round at 2,400:
  // until then job 2 stays on the K80 and the V100 idles. By 2,400 job 2
  // has done 2,100 steps; 1,500 more on the V100 take 250 s.
  const RunResults throttled = fifo_typed(
      dir, R"({ plugin = "fifo", gpu_type = "fastest-reassigned", min_seconds_between_allocations = 1920 })", trace,
      k80_and_v100());
  CHECK(jcts(throttled) == std::vector<double>{100, 450, 2650});
  // A throttle on FIFO that assigns no type is a contradiction.
  CHECK_THROWS_WITH(fifo_typed(dir, R"({ plugin = "fifo", min_seconds_between_allocations = 1920 })", trace,
                               k80_and_v100()),
                    doctest::Contains("min_seconds_between_allocations"));
}
TEST_CASE("fifo min_seconds_between_allocations with rounds at events: the held-back recompute comes when due") {
  const std::string trace = "arrival,gpus,duration,model\n0,1,100,Alpha\n0,1,200,Alpha\n0,1,600,Alpha\n";
  TempDir dir;
  // At 0: job 0 on the V100, job 1 on the K80. Job 0 ends at 100: the first
  // change after time 0, assigned at once: job 1 (100 steps done) moves to
  // the V100 and ends at 100 + 1,100 / 6 = 283.3; job 2 takes the K80. The
  // change at 283.3 is held back until 100 + 1,920 = 2,020, which the plan
  // asks to be revisited at (no event comes before): job 2 has done 1,920
  // steps, 1,680 more on the V100 take 280 s. Without the revisit it would
  // stay on the K80 to 100 + 3,600.
  const RunResults throttled = fifo_typed(
      dir, R"({ plugin = "fifo", gpu_type = "fastest-reassigned", min_seconds_between_allocations = 1920 })", trace,
      k80_and_v100() + "[simulation]\nrounds = \"events\"\n");
  const std::vector<double> got = jcts(throttled);
  REQUIRE(got.size() == 3);
  CHECK(got[0] == 100);
  CHECK(got[1] == doctest::Approx(100 + 1100.0 / 6));
  CHECK(got[2] == doctest::Approx(2300));
}
TEST_CASE("fifo gpu_type = random: a type drawn among those with room, never mixed, the queue held at a job none has room for") {
  // Two GPUs of each type, and the linear model: every job runs its
  // duration wherever it runs. Job 0 (1 GPU) draws a type; job 1 (2 GPUs)
  // then fits only on the other; job 2 (2 GPUs) fits on none and holds job
  // 3 (1 GPU) back although a GPU is free. At 300 jobs 0 and 1 end; job 2
  // draws a type, job 3 takes the other.
  const std::string trace = "arrival,gpus,duration\n0,1,300\n0,2,300\n0,2,300\n0,1,300\n";
  std::map<std::string, int> job0_on;
  for (int seed = 1; seed <= 12; ++seed) {
    CAPTURE(seed);
    TempDir dir;
    dir.write("trace.csv", trace);
    const RunResults results = simulate(dir, R"([[cluster.groups]]
count = 1
gpus_per_node = 2
gpu_type = "v100"
[[cluster.groups]]
count = 1
gpus_per_node = 2
gpu_type = "k80"

[workload]
kind = "csv"
path = "trace.csv"
seed = )" + std::to_string(seed) + R"(

[scheduler]
allocation = { plugin = "fifo", gpu_type = "random" }
placement = { plugin = "first_fit" }

[output]
decisions = true
)");
    const std::string job0 = reason_of(results, 0, 0, PluginKind::allocation);
    const std::string job1 = reason_of(results, 1, 0, PluginKind::allocation);
    const std::string type0 = job0.find(" on v100,") != std::string::npos ? "v100" : "k80";
    ++job0_on[type0];
    CHECK(job0.ends_with(", drawn at random among the GPU types with room for it"));
    CHECK(job1.find(type0 == "v100" ? " on k80," : " on v100,") != std::string::npos);
    CHECK(reason_of(results, 2, 0, PluginKind::allocation) == "needs 2 GPUs of one type; the most free on one type is 1");
    CHECK(reason_of(results, 3, 0, PluginKind::allocation) == "queued behind job 2, for which no GPU type has room");
    CHECK(results.jobs[2].first_start.value_or(-1) == 300);
    CHECK(results.jobs[3].first_start.value_or(-1) == 300);
  }
  // Both types come up over the seeds (each with probability 1/2 a seed).
  CHECK(job0_on["v100"] > 0);
  CHECK(job0_on["k80"] > 0);
}

// ------------------------------------------------------------------ synergy

namespace {

// Relative throughput per GPU at CPUs per GPU {1, 2, 3, 6, 9, 12}, the same
// at 62.5 and 250 GB per GPU (and, the model being flat beyond its grid, at
// any memory): `cpu` speeds up to 2x at 9 CPUs, `knee` stops at 3,
// `light` needs one CPU.
std::string sensitivity_csv() {
  std::string csv =
      "model,gpus,best_cpus,best_mem_gb,batch,iter_time_s,speedup_at_best,cpus,mem_gb,relative_throughput\n";
  const std::vector<double> cpus{1, 2, 3, 6, 9, 12};
  const std::map<std::string, std::vector<double>> profiles{
      {"cpu", {0.5, 0.8, 1.0, 1.5, 2.0, 2.0}}, {"knee", {0.5, 0.8, 1.0, 1.0, 1.0, 1.0}}, {"light", {1, 1, 1, 1, 1, 1}}};
  for (const auto& [model, relative] : profiles)
    for (std::size_t i = 0; i < cpus.size(); ++i)
      for (const char* mem : {"62.5", "250"})
        csv += model + ",1,3,62.5,32,0.5,1," + std::to_string(cpus[i]) + "," + mem + "," +
               std::to_string(relative[i]) + "\n";
  return csv;
}

RunResults synergy_run(const TempDir& dir, const std::string& cluster, const std::string& trace,
                       const std::string& allocation) {
  dir.write("sensitivity.csv", sensitivity_csv());
  dir.write("trace.csv", trace);
  return simulate(dir, "[cluster]\n" + cluster + R"(
[workload]
kind = "csv"
path = "trace.csv"
model = { name = "synergy-sensitivity", path = "sensitivity.csv" }

[scheduler]
allocation = )" + allocation + R"(
placement = { plugin = "synergy" }

[output]
decisions = true
)");
}

// One node: 4 GPUs, 12 CPUs, 250 GB, so the proportional share is 3 CPUs
// and 62.5 GB per GPU, where every profile runs at 1. Jobs 0 and 1 (`cpu`,
// 1 GPU, 900 s at the share) and job 2 (`light`, 2 GPUs, 600 s) arrive at 0.
const char* kSmallNode = "nodes = 1\ngpus_per_node = 4\ncpus_per_node = 12\nmem_gb_per_node = 250\n";
const char* kThreeJobs = "arrival,gpus,duration,model\n0,1,900,cpu\n0,1,900,cpu\n0,2,600,light\n";

}  // namespace

TEST_CASE("synergy proportional: every job at 3 CPUs per GPU runs at its trace speed") {
  TempDir dir;
  const RunResults results =
      synergy_run(dir, kSmallNode, kThreeJobs, R"({ plugin = "synergy", mode = "proportional" })");
  CHECK(jcts(results) == std::vector<double>{900, 900, 600});
  CHECK(reason_of(results, 2, 0, PluginKind::allocation) == "proportional share: 3 CPUs and 62.5 GB per GPU");
}

TEST_CASE("synergy greedy: best demands while they fit, the share after, waiting when neither fits") {
  // Best demands, probed on Synergy's grid: `cpu` 9 CPUs per GPU (2x; 12
  // is no faster), with the least memory probed, 20.83 GB; `light` 1 CPU.
  // t=0: job 0 gets 9 CPUs (done at 450); job 1's 9 do not fit in the 3
  //      left, the share (3) does; job 2 fits neither (no CPU left): waits.
  // t=600 (job 0 gone): job 1 gets 9 CPUs, 600 of 900 done, 300 at 2x: ends 750;
  //      job 2 takes 2 of the 3 CPUs left and ends at 1200.
  TempDir dir;
  const RunResults results = synergy_run(dir, kSmallNode, kThreeJobs, R"({ plugin = "synergy", mode = "greedy" })");
  CHECK(jcts(results) == std::vector<double>{450, 750, 1200});
  CHECK(reason_of(results, 0, 0, PluginKind::allocation) ==
        "best demand: 9 CPUs and 20.83 GB per GPU, 2 times the proportional share's throughput");
  CHECK(reason_of(results, 1, 0, PluginKind::allocation) ==
        "best demand (9 CPUs, 20.83 GB per GPU) does not fit; proportional share of 3 CPUs per GPU instead");
  CHECK(reason_of(results, 2, 0, PluginKind::allocation) ==
        "neither its best demand (1 CPUs, 20.83 GB per GPU) nor the proportional share (3 CPUs per GPU) fits this "
        "round");
}

TEST_CASE("synergy tune: an over-provisioned job gives CPUs back, down to its share and no lower") {
  // One node: 8 GPUs, 24 CPUs, 500 GB (share: 3 CPUs, 62.5 GB per GPU).
  // Job 0 (`cpu`, 1 GPU, 1000 s) arrives at 0 and gets its best, 9 CPUs: 2x.
  // Job 1 (`knee`, 6 GPUs, 600 s) arrives at 300. Its best demand is 3
  // CPUs per GPU (one node gives it at most 4): 18 CPUs, 15 free. It is
  // not above the share, so job 0, above it, shrinks to the share: 3 CPUs,
  // 21 free. Job 0 did 600 by 300 and runs its last 400 at 1x: ends 700.
  // Job 1 runs 300..900.
  const char* big_node = "nodes = 1\ngpus_per_node = 8\ncpus_per_node = 24\nmem_gb_per_node = 500\n";
  const char* trace = "arrival,gpus,duration,model\n0,1,1000,cpu\n300,6,600,knee\n";
  TempDir dir;
  const RunResults tune = synergy_run(dir, big_node, trace, R"({ plugin = "synergy", mode = "tune" })");
  CHECK(jcts(tune) == std::vector<double>{700, 600});
  CHECK(reason_of(tune, 0, 300, PluginKind::allocation) ==
        "shrunk to 3 CPUs and 20.83 GB per GPU, at most the proportional share, so that job 1 fits");
  CHECK(reason_of(tune, 1, 300, PluginKind::allocation) ==
        "fits at 3 CPUs and 20.83 GB per GPU once 1 over-provisioned job(s) gave back what they held above the "
        "proportional share");
  CHECK(tune.jobs[0].preemptions == 0);  // it kept its GPU

  // At the share all along, job 0 takes its 1000 s.
  const RunResults fair = synergy_run(dir, big_node, trace, R"({ plugin = "synergy", mode = "proportional" })");
  CHECK(jcts(fair) == std::vector<double>{1000, 600});
}

TEST_CASE("synergy tune on the small node: job 2 fits once job 0 is back at the share") {
  // As in the greedy case, job 0 takes 9 CPUs and job 1 the share; job 2's
  // best (2 CPUs) does not fit, so job 0 shrinks to 3 and every job runs at
  // 1x. Job 2 ends at 600; in that round job 0 gets its 9 CPUs back and
  // runs its last 300 at 2x: ends at 750.
  TempDir dir;
  const RunResults results = synergy_run(dir, kSmallNode, kThreeJobs, R"({ plugin = "synergy", mode = "tune" })");
  CHECK(jcts(results) == std::vector<double>{750, 900, 600});
  CHECK(reason_of(results, 0, 0, PluginKind::allocation) ==
        "shrunk to 3 CPUs and 20.83 GB per GPU, at most the proportional share, so that job 2 fits");
}

TEST_CASE("synergy opt: a lone job gets the demand the LP finds best") {
  // Alone on the small node, the LP puts job 0 at 9 CPUs per GPU (2x):
  // 900 s of work at the share take 450 s.
  TempDir dir;
  const RunResults results = synergy_run(dir, kSmallNode, "arrival,gpus,duration,model\n0,1,900,cpu\n",
                                         R"({ plugin = "synergy", mode = "opt" })");
  CHECK(jcts(results) == std::vector<double>{450});
  CHECK(reason_of(results, 0, 0, PluginKind::allocation).starts_with("Synergy-OPT LP: 9 CPUs and 20.83 GB per GPU"));
}

TEST_CASE("synergy rejects probe grids that do not increase") {
  TempDir dir;
  CHECK_THROWS_WITH(synergy_run(dir, kSmallNode, kThreeJobs,
                                R"({ plugin = "synergy", probe_cpus_per_gpu = [1, 3, 2] })"),
                    doctest::Contains("probe_cpus_per_gpu"));
}

TEST_CASE("synergy placement: the fullest node that has the CPUs and memory") {
  // Three nodes of 4 GPUs, 12 CPUs and 100 GB; FIFO grants what jobs ask.
  //   job 0: 1 GPU, 12 CPUs, 10 GB  -> n0 (all equal), n0 has no CPU left
  //   job 1: 2 GPUs, 2 CPUs, 90 GB  -> not n0 (no CPU); n1 (tie with n2)
  //   job 2: 1 GPU, 2 CPUs, 20 GB   -> not n0 (CPU), not n1 (10 GB left): n2
  //   job 3: 1 GPU, 2 CPUs, 5 GB    -> n1 (2 GPUs free) before n2 (3 free)
  TempDir dir;
  dir.write("trace.csv",
            "arrival,gpus,duration,cpus,mem_gb\n0,1,1000,12,10\n0,2,1000,2,90\n0,1,1000,2,20\n0,1,1000,2,5\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 3
gpus_per_node = 4
cpus_per_node = 12
mem_gb_per_node = 100

[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "synergy" }

[output]
decisions = true
)");
  const std::string rule =
      ", the node with the fewest free GPUs that has room for all its GPUs with their CPUs and memory";
  CHECK(reason_of(results, 0, 0, PluginKind::placement) == "on n0" + rule);
  CHECK(reason_of(results, 1, 0, PluginKind::placement) == "on n1" + rule);
  CHECK(reason_of(results, 2, 0, PluginKind::placement) == "on n2" + rule);
  CHECK(reason_of(results, 3, 0, PluginKind::placement) == "on n1" + rule);
}

TEST_CASE("synergy placement explains a job that no node has the CPUs for") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration,cpus,mem_gb\n0,2,100,30,10\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 2
gpus_per_node = 4
cpus_per_node = 12
mem_gb_per_node = 100

[workload]
kind = "csv"
path = "trace.csv"

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "synergy" }

[output]
decisions = true
)");
  CHECK(results.jobs[0].status == "queued");
  CHECK(reason_of(results, 0, 0, PluginKind::placement) ==
        "needs 2 GPUs with 15 CPUs and 5 GB each; 0 such GPUs are free");
}

TEST_CASE("synergy: the placement rule is an argument of both plugins, and an unknown rule is named") {
  TempDir dir;
  dir.write("sensitivity.csv", sensitivity_csv());
  dir.write("trace.csv", kThreeJobs);
  auto experiment = [&](const std::string& allocation_rule, const std::string& placement_rule) {
    dir.write("x.toml", std::string("[cluster]\n") + kSmallNode + R"(
[workload]
kind = "csv"
path = "trace.csv"
model = { name = "synergy-sensitivity", path = "sensitivity.csv" }

[scheduler]
allocation = { plugin = "synergy", mode = "tune", placement = ")" + allocation_rule + R"(" }
placement = { plugin = "synergy", rule = ")" + placement_rule + R"(" }
)");
    return run_tessel({"validate", "x.toml"}, dir.path());
  };
  CHECK(experiment("first_fit", "first_fit").code == 0);
  const auto wrong = experiment("nearest", "fullest_first");
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("argument 'placement' of allocation plugin 'synergy' unknown value 'nearest' (valid: fullest, "
                       "first_fit)") != std::string::npos);
  CHECK(wrong.err.find("argument 'rule' of placement plugin 'synergy' unknown value 'fullest_first' (valid: "
                       "fullest, first_fit)") != std::string::npos);
}

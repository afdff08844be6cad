// gavel's policies beyond max-min, finish time and makespan, each on a
// cluster small enough that its LP's optimum is worked out by hand (in the
// comments): max_min_fairness_water_filling (and _packed), whose second
// level is what plain max-min leaves unsaid, and the max_sum_throughput
// family (per GPU cost, with SLOs, with pairs). Then their arguments'
// errors.
#include <doctest/doctest.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"
#include "tessel/tessel.hpp"
#include "two_types.hpp"

using namespace tessel;

namespace {

// Steps/s per GPU alone, by profile ("0", "1", ...) and type (fast, slow).
constexpr double kAlone[3][2] = {{6.0, 2.0}, {4.0, 3.0}, {6.0, 2.0}};
// Beside another job: 0.75 of that on fast, for profiles 0 and 2 alike
// (0.75 + 0.75 > 1: better than taking turns); nothing else may share.
using test::profile;
using test::type_index;

class Model final : public ThroughputModel {
 public:
  std::string_view name() const override { return "hand"; }
  double rate(const JobSpec& job, const Shape& shape) const override {
    return shape.gpus * kAlone[profile(job)][type_index(shape)];
  }
  int max_colocated() const override { return 2; }
  double rate_colocated(const JobSpec& job, std::span<const JobSpec* const> others, const Shape& shape) const override {
    const bool shares = profile(job) != 1 && profile(*others.front()) != 1 && type_index(shape) == 0;
    return shares ? 0.75 * rate(job, shape) : 0.0;
  }
};

// `fast` and `slow` one-GPU nodes; jobs (profile, GPUs), each of `work`
// steps, arrived at 0.
struct World {
  ClusterState cluster;
  std::deque<JobState> storage;
  std::vector<JobState*> all;

  World(int fast, int slow, const std::vector<std::pair<int, int>>& jobs, double work = 36000) {
    cluster = test::two_type_cluster(fast, slow);
    for (const auto& [model, gpus] : jobs) {
      JobState& job = storage.emplace_back();
      job.spec.id = static_cast<JobId>(all.size());
      job.spec.model = std::to_string(model);
      job.spec.gpus = job.spec.min_gpus = job.spec.max_gpus = gpus;
      job.spec.total_work = work;
      job.status = JobStatus::queued;
      all.push_back(&job);
    }
  }
};

PluginArgs gavel(const std::string& policy) {
  PluginArgs args;
  args.set("policy", policy);
  args.set("min_seconds_between_allocations", 0.0);
  args.set("gpu_costs", NumberTable{});
  args.set("slo_factor", 0.0);
  return args;
}

// gavel's plan at time 0 for every job of `world`.
AllocationPlan plan_of(const PluginArgs& args, const World& world, const ThroughputModel& model = Model()) {
  return test::plan_at_zero("gavel", args, world.cluster, world.all, model);
}

std::string reason_of(const AllocationPlan& plan, JobId job) {
  for (const Grant& grant : plan.ranked)
    if (grant.job == job) return grant.reason.str();
  FAIL("job " << job << " is not in the plan");
  return {};
}

// ------------------------------------------------------------ water filling

// One fast GPU, two slow. Jobs 0 and 1: one GPU, 6 steps/s fast, 2 slow;
// job 2: two GPUs, so only the slow pair, 2 x 3 = 6 steps/s. Max-min's unit
// is throughput x GPUs / (throughput on an equal share: 1/3 of each GPU):
// jobs 0, 1: (6 f + 2 s) / (10/3); job 2: 6 s x 2 / 4 = 3 s.
// Jobs 0 and 1 share the fast GPU and have one unit of time each:
// l0 + l1 <= 0.3 (6 (f0 + f1) + 2 (2 - f0 - f1)) <= 2.4, so the first
// level is 1.2 (f = s = 1/2 each), and they are its bottleneck. The slow
// GPU they leave lets job 2 run half of the time: 1.5, the second level.
// Plain max-min stops at 1.2: any share of job 2 in [0.4, 0.5] is optimal.
TEST_CASE("max_min_fairness_water_filling: the bottleneck's level, then the rest raised to the second level") {
  const World world(1, 2, {{0, 1}, {0, 1}, {1, 2}});
  const AllocationPlan plan = plan_of(gavel("max_min_fairness_water_filling"), world);
  for (JobId job : {0, 1}) {
    CAPTURE(job);
    CHECK(reason_of(plan, job).find("time share 0.5 on fast, 0.5 on slow") != std::string::npos);
  }
  const std::string third = reason_of(plan, 2);
  CHECK(third.find("time share 0.5 on slow") != std::string::npos);
  CHECK(third.find("every job gets at least 1.2 times") != std::string::npos);
  CHECK(third.find("levels filled: 1.2, 1.5)") != std::string::npos);
  // max_min_fairness reaches the same first level, and says no more.
  const std::string plain = reason_of(plan_of(gavel("max_min_fairness"), world), 2);
  CHECK(plain.find("every job gets at least 1.2 times") != std::string::npos);
  CHECK(plain.find("levels filled") == std::string::npos);
}

// The same, jobs 0 and 1 (profiles 0 and 2, priced alike) may share the
// fast GPU, each at 0.75 x 6 = 4.5 steps/s. With f alone each and p side by
// side (f0 + f1 + p <= 1), l0 + l1 <= 0.3 (4 (f0 + f1) + 5 p + 4) <= 2.7:
// the first level is 1.35, both side by side all of their time, and job 2
// has both slow GPUs all of its time: 3.
TEST_CASE("max_min_fairness_water_filling_packed: pairs in the first level, the second level on the GPUs left") {
  const World world(1, 2, {{0, 1}, {2, 1}, {1, 2}});
  const AllocationPlan plan = plan_of(gavel("max_min_fairness_water_filling_packed"), world);
  const std::string third = reason_of(plan, 2);
  CHECK(third.find("time share 1 on slow") != std::string::npos);
  CHECK(third.find("levels filled: 1.35, 3)") != std::string::npos);
  // The pair is granted: one job shares the other's fast GPU.
  bool shared = false;
  for (const Grant& grant : plan.ranked) shared = shared || grant.share_with != kNoJob;
  CHECK(shared);
  // Without pairs, the first level is 1.2 again.
  CHECK(reason_of(plan_of(gavel("max_min_fairness_water_filling"), world), 2).find("levels filled: 1.2, 1.5)") !=
        std::string::npos);
}

// ------------------------------------------------------- max_sum_throughput

// One fast GPU, one slow. Job 0: 6 fast, 2 slow; job 1: 4 fast, 3 slow.
// The fast GPU is worth 2 more to job 0, the slow one 1 more to job 1:
// 6 + 3 = 9, job 0 all of its time on fast, job 1 on slow.
TEST_CASE("max_sum_throughput: each type to the job it speeds up most") {
  const AllocationPlan plan = plan_of(gavel("max_sum_throughput"), World(1, 1, {{0, 1}, {1, 1}}));
  CHECK(reason_of(plan, 0).find("time share 1 on fast, 0 on slow") != std::string::npos);
  CHECK(reason_of(plan, 1).find("time share 0 on fast, 1 on slow") != std::string::npos);
  CHECK(reason_of(plan, 0).find("the throughputs sum to 9)") != std::string::npos);
}

PluginArgs by_cost(const std::string& policy, double fast, double slow, double slo_factor = 0) {
  PluginArgs args = gavel(policy);
  args.set("gpu_costs", NumberTable{{"fast", fast}, {"slow", slow}});
  args.set("slo_factor", slo_factor);
  return args;
}

// One job, 6 steps/s fast, 2 slow; a fast GPU costs 4, a slow one 1:
// 1.5 steps per unit of cost fast, 2 slow. Alone it would take fast.
TEST_CASE("max_sum_throughput_normalized_by_cost: the cheaper steps win") {
  const World world(1, 1, {{0, 1}});
  const std::string plain = reason_of(plan_of(gavel("max_sum_throughput"), world), 0);
  CHECK(plain.find("time share 1 on fast, 0 on slow") != std::string::npos);
  const std::string costed = reason_of(plan_of(by_cost("max_sum_throughput_normalized_by_cost", 4, 1), world), 0);
  CHECK(costed.find("time share 0 on fast, 1 on slow") != std::string::npos);
  CHECK(costed.find("the throughputs per unit of GPU cost sum to 2)") != std::string::npos);
}

// The same job, 36,000 steps, with an SLO factor of 2: its deadline is
// 2 x 36000 / 6 = 12,000 s, so it needs 3 steps/s: 6 f + 2 (1 - f) >= 3,
// f >= 1/4; cost per step favours slow, so f = 1/4: 1.5/4 + 2 x 3/4 = 1.875.
// A factor of 0.5 asks for 12 steps/s, beyond any X: the SLO is dropped.
TEST_CASE("max_sum_throughput_normalized_by_cost_SLOs: as cheap as the deadline allows, or dropped") {
  const World world(1, 1, {{0, 1}});
  const std::string met = reason_of(plan_of(by_cost("max_sum_throughput_normalized_by_cost_SLOs", 4, 1, 2), world), 0);
  CHECK(met.find("time share 0.25 on fast, 0.75 on slow") != std::string::npos);
  CHECK(met.find("sum to 1.875; the 1 deadlines ahead all met)") != std::string::npos);
  const std::string missed =
      reason_of(plan_of(by_cost("max_sum_throughput_normalized_by_cost_SLOs", 4, 1, 0.5), world), 0);
  CHECK(missed.find("time share 0 on fast, 1 on slow") != std::string::npos);
  CHECK(missed.find("cannot all be met: ignored") != std::string::npos);
}

// Two jobs of 6 steps/s on the one fast GPU (no slow GPU): taking turns
// sums to 6; side by side, 4.5 + 4.5 = 9, all of the time.
TEST_CASE("max_sum_throughput_normalized_by_cost_packed_SLOs: a pair's two throughputs both count") {
  const World world(1, 0, {{0, 1}, {2, 1}});
  PluginArgs args = gavel("max_sum_throughput_normalized_by_cost_packed_SLOs");
  args.set("gpu_costs", NumberTable{{"fast", 1.0}});
  args.set("slo_factor", 10.0);
  const AllocationPlan plan = plan_of(args, world);
  CHECK(reason_of(plan, 0).find("sum to 9; the 2 deadlines ahead all met)") != std::string::npos);
  bool shared = false;
  for (const Grant& grant : plan.ranked) shared = shared || grant.share_with != kNoJob;
  CHECK(shared);
  PluginArgs alone = gavel("max_sum_throughput_normalized_by_cost_SLOs");
  alone.set("gpu_costs", NumberTable{{"fast", 1.0}});
  alone.set("slo_factor", 10.0);
  CHECK(reason_of(plan_of(alone, world), 0).find("sum to 6;") != std::string::npos);
}

// ------------------------------------------------------------------ errors

TEST_CASE("gavel refuses costs or SLO factors the policy cannot use or lacks") {
  const World world(1, 1, {{0, 1}});
  CHECK_THROWS_WITH_AS(plan_of(gavel("max_sum_throughput_normalized_by_cost"), world),
                       doctest::Contains("needs each GPU type's cost"), ArgumentError);
  CHECK_THROWS_WITH_AS(plan_of(by_cost("max_sum_throughput", 4, 1), world),
                       doctest::Contains("applies only to the _normalized_by_cost policies, not 'max_sum_throughput'"),
                       ArgumentError);
  CHECK_THROWS_WITH_AS(plan_of(by_cost("max_sum_throughput_normalized_by_cost", 4, 0), world),
                       doctest::Contains("the cost of 'slow' must be positive, found 0"), ArgumentError);
  CHECK_THROWS_WITH_AS(plan_of(by_cost("max_sum_throughput_normalized_by_cost_SLOs", 4, 1), world),
                       doctest::Contains("needs a positive slo_factor, found 0"), ArgumentError);
  CHECK_THROWS_WITH_AS(plan_of(by_cost("max_sum_throughput_normalized_by_cost", 4, 1, 2), world),
                       doctest::Contains("applies only to the _SLOs policies"), ArgumentError);
  PluginArgs missing = gavel("max_sum_throughput_normalized_by_cost");
  missing.set("gpu_costs", NumberTable{{"fast", 4.0}});
  CHECK_THROWS_WITH_AS(plan_of(missing, world),
                       doctest::Contains("has no cost for GPU type 'slow' (the cluster's types: fast, slow)"),
                       ArgumentError);
  PluginArgs unknown = by_cost("max_sum_throughput_normalized_by_cost", 4, 1);
  unknown.set("gpu_costs", NumberTable{{"fast", 4.0}, {"slow", 1.0}, {"v100", 2.0}});
  CHECK_THROWS_WITH_AS(plan_of(unknown, world), doctest::Contains("names GPU type 'v100', which the cluster lacks"),
                       ArgumentError);
  // The pair policies need the model's co-location rates, as the others.
  class Alone final : public ThroughputModel {
   public:
    std::string_view name() const override { return "alone"; }
    double rate(const JobSpec&, const Shape& shape) const override { return shape.gpus; }
  };
  CHECK_THROWS_WITH_AS(plan_of(gavel("max_min_fairness_water_filling_packed"), world, Alone()),
                       doctest::Contains("throughput model 'alone' has no co-location throughputs"), ArgumentError);
}


// ------------------------------------------------------------ on the command line

// One V100 and two jobs of a gavel-table that lacks Beta's pairs.
std::string run_config(const std::string& allocation) {
  return R"([[cluster.groups]]
count = 1
gpus_per_node = 1
gpu_type = "v100"

[workload]
kind = "csv"
path = "trace.csv"
reference_gpu_type = "v100"
model = { name = "gavel-table", path = "throughputs.json" }

[scheduler]
round_seconds = 300
allocation = )" + allocation + R"(
placement = { plugin = "consolidated" }

[output]
database = "e.db"
)";
}

TEST_CASE("the new packed policies stop at a missing co-location pair, and at costs without every type: exit 2") {
  test::TempDir dir;
  dir.write("throughputs.json", R"json({
  "v100": {
    "('Alpha', 1)": {"null": 6.0, "('Alpha', 1)": [3.0, 3.0]},
    "('Beta', 1)": {"null": 4.0}
  }
})json");
  dir.write("trace.csv", "arrival,gpus,duration,model\n0,1,400,Alpha\n0,1,675,Beta\n");
  for (const std::string allocation :
       {R"({ plugin = "gavel", policy = "max_min_fairness_water_filling_packed" })",
        R"({ plugin = "gavel", policy = "max_sum_throughput_normalized_by_cost_packed_SLOs", gpu_costs = { v100 = 2.48 }, slo_factor = 2 })"}) {
    CAPTURE(allocation);
    dir.write("e.toml", run_config(allocation));
    const test::CommandResult run = test::run_tessel({"run", "e.toml"}, dir.path());
    CHECK(run.code == 2);
    CHECK(run.err.find("throughputs.json: no co-location throughput for 'Alpha' beside 'Beta' on 1 v100 GPU") !=
          std::string::npos);
  }
  // An unknown policy is refused from the declared choices, before any run:
  // `validate` catches it too.
  dir.write("e.toml", run_config(R"({ plugin = "gavel", policy = "max_sum_throughput_packed" })"));
  for (const char* command : {"validate", "run"}) {
    CAPTURE(command);
    const test::CommandResult refused = test::run_tessel({command, "e.toml"}, dir.path());
    CHECK(refused.code == 2);
    CHECK(refused.err.find("'max_sum_throughput_packed'") != std::string::npos);
    CHECK(refused.err.find("max_min_fairness_water_filling_packed") != std::string::npos);
  }
  dir.write("e.toml", run_config(R"({ plugin = "gavel", policy = "max_sum_throughput_normalized_by_cost", gpu_costs = { k80 = 0.9 } })"));
  const test::CommandResult run = test::run_tessel({"run", "e.toml"}, dir.path());
  CHECK(run.code == 2);
  CHECK(run.err.find("argument 'gpu_costs' of allocation plugin 'gavel' names GPU type 'k80', which the cluster "
                     "lacks (its types: v100)") !=
        std::string::npos);
}

}  // namespace

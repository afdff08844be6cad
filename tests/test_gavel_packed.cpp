// gavel's `_packed` policies by classes of jobs (plugins/allocation/
// gavel_pairs.hpp): the splits of a class pair's time into job pairs, the
// class LP against Gavel's LP over every pair (written here, independently,
// on small random cases: the same optimum, and the split meets every row
// of Gavel's LP), and the plugin itself against that LP: max_min_fairness_
// packed's level and min_total_duration_packed's makespan, which Gavel's
// search reaches over T. Then Gavel's fifo_packed (`fifo`'s
// packing_threshold) on hand-worked queues.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../plugins/allocation/gavel_pairs.hpp"
#include "plugins/registry.hpp"
#include "support.hpp"
#include "two_types.hpp"
#include "tessel/tessel.hpp"

using namespace tessel;
using tessel_plugins::JobPairShares;
using tessel_plugins::PairClasses;
using tessel_plugins::PairColumns;

namespace {

// ------------------------------------------------------------ the splits

TEST_CASE("facing arcs split a class's time into pairs: symmetric, no job with itself, each job's total kept") {
  for (const std::vector<double>& d : std::vector<std::vector<double>>{
           {0.5, 0.2, 0.3}, {0.4, 0.4}, {0.1, 0.6, 0.2, 0.2, 0.1}, {0.25, 0.25, 0.25, 0.25}, {0.3, 0.0, 0.3}}) {
    CAPTURE(d.size());
    std::map<std::pair<std::size_t, std::size_t>, double> pair;
    PairColumns::facing_arcs(d, [&](std::size_t i, std::size_t k, double time) {
      CHECK(i != k);
      pair[{std::min(i, k), std::max(i, k)}] += time;
    });
    std::vector<double> total(d.size(), 0.0);
    for (const auto& [jobs, time] : pair) {
      total[jobs.first] += time;
      total[jobs.second] += time;
    }
    for (std::size_t i = 0; i < d.size(); ++i) CHECK(total[i] == doctest::Approx(d[i]).epsilon(1e-12));
    CHECK(pair.size() <= 2 * d.size());
  }
  // {0.4, 0.4}: the two jobs side by side all of their 0.4.
  std::map<std::pair<std::size_t, std::size_t>, double> two;
  PairColumns::facing_arcs({0.4, 0.4}, [&](std::size_t i, std::size_t k, double time) { two[{std::min(i, k), std::max(i, k)}] += time; });
  REQUIRE(two.size() == 1);
  CHECK(two.begin()->second == doctest::Approx(0.4));
}

TEST_CASE("the north-west corner fills a transportation problem with at most |A| + |B| - 1 pairs") {
  const std::vector<double> supply{0.5, 0.25, 0.25}, demand{0.3, 0.3, 0.1, 0.3};
  std::vector<double> given(3, 0.0), taken(4, 0.0);
  int pairs = 0;
  PairColumns::north_west_corner(supply, demand, [&](std::size_t i, std::size_t k, double amount) {
    CHECK(amount > 0);
    given[i] += amount;
    taken[k] += amount;
    ++pairs;
  });
  for (std::size_t i = 0; i < 3; ++i) CHECK(given[i] == doctest::Approx(supply[i]));
  for (std::size_t k = 0; k < 4; ++k) CHECK(taken[k] == doctest::Approx(demand[k]));
  CHECK(pairs <= 3 + 4 - 1);
}

// ------------------------------------------------- class LP against all pairs

// Jobs of one GPU each in classes, on types with `capacity` GPUs; a job of
// class c runs alone at single[c][t], beside one of class e at
// pair[c][e][t] (0: the two cannot share there). Each job needs `remaining`.
struct Case {
  std::vector<int> capacity;
  std::vector<std::size_t> class_of;
  std::vector<std::vector<double>> single;
  std::vector<std::vector<std::vector<double>>> pair;
  std::vector<double> remaining;

  std::size_t jobs() const { return class_of.size(); }
  std::size_t types() const { return capacity.size(); }
  bool shares(std::size_t j, std::size_t k, std::size_t t) const {
    return pair[class_of[j]][class_of[k]][t] > 0 && pair[class_of[k]][class_of[j]][t] > 0;
  }
};

Case random_case(unsigned seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](double low, double high) { return std::uniform_real_distribution<double>(low, high)(rng); };
  auto count = [&](int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng); };
  Case c;
  c.capacity.resize(count(1, 3));
  for (int& gpus : c.capacity) gpus = count(1, 4);
  const std::size_t classes = count(1, 4);
  for (std::size_t a = 0; a < classes; ++a) {
    const int members = count(1, 4);
    for (int m = 0; m < members; ++m) c.class_of.push_back(a);
    std::vector<double> rate(c.types());
    for (double& r : rate) r = uniform(1, 10);
    c.single.push_back(rate);
  }
  c.pair.assign(classes, std::vector<std::vector<double>>(classes, std::vector<double>(c.types(), 0.0)));
  for (std::size_t a = 0; a < classes; ++a)
    for (std::size_t b = 0; b < classes; ++b)
      for (std::size_t t = 0; t < c.types(); ++t)
        if (uniform(0, 1) < 0.8) c.pair[a][b][t] = c.single[a][t] * uniform(0.3, 0.95);
  for (std::size_t a = 0; a < classes; ++a)  // a pair runs where both have a rate
    for (std::size_t b = 0; b < classes; ++b)
      for (std::size_t t = 0; t < c.types(); ++t)
        if (c.pair[b][a][t] == 0) c.pair[a][b][t] = 0;
  for (std::size_t j = 0; j < c.jobs(); ++j) c.remaining.push_back(uniform(1, 100));
  return c;
}

// The rows both programs share: type t's GPUs, job j's time and its
// throughput less remaining[j] times the level s (maximised).
struct Rows {
  std::vector<int> type, time, target;
  std::vector<std::vector<int>> single;  // [job][type]
  int level;
};

Rows common_rows(lp::LinearProgram& program, const Case& c) {
  Rows rows;
  for (int gpus : c.capacity) rows.type.push_back(program.add_row(lp::Bounds::at_most(gpus)));
  rows.level = program.add_column(lp::Bounds::at_least(0), 1);
  for (std::size_t j = 0; j < c.jobs(); ++j) {
    rows.time.push_back(program.add_row(lp::Bounds::at_most(1)));
    rows.target.push_back(program.add_row(lp::Bounds::at_least(0)));
    program.add_term(rows.target[j], rows.level, -c.remaining[j]);
    rows.single.emplace_back();
    for (std::size_t t = 0; t < c.types(); ++t) {
      const int x = program.add_column(lp::Bounds::between(0, 1));
      rows.single[j].push_back(x);
      program.add_term(rows.time[j], x, 1);
      program.add_term(rows.type[t], x, 1);
      program.add_term(rows.target[j], x, c.single[c.class_of[j]][t]);
    }
  }
  return rows;
}

// Gavel's PolicyWithPacking: a column per pair of jobs and type.
double all_pairs_level(const Case& c) {
  lp::LinearProgram program("all pairs", lp::Direction::maximize);
  const Rows rows = common_rows(program, c);
  for (std::size_t j = 0; j < c.jobs(); ++j)
    for (std::size_t k = j + 1; k < c.jobs(); ++k)
      for (std::size_t t = 0; t < c.types(); ++t) {
        if (!c.shares(j, k, t)) continue;
        const int x = program.add_column(lp::Bounds::between(0, 1));
        program.add_term(rows.type[t], x, 1);
        program.add_term(rows.time[j], x, 1);
        program.add_term(rows.time[k], x, 1);
        program.add_term(rows.target[j], x, c.pair[c.class_of[j]][c.class_of[k]][t]);
        program.add_term(rows.target[k], x, c.pair[c.class_of[k]][c.class_of[j]][t]);
      }
  REQUIRE(program.solve() == lp::Outcome::optimal);
  return program.value(rows.level);
}

PairClasses classes_of(const Case& c) {
  PairClasses classes;
  for (std::size_t j = 0; j < c.jobs(); ++j) {
    if (classes.members.size() <= c.class_of[j]) classes.members.resize(c.class_of[j] + 1);
    classes.members[c.class_of[j]].push_back(j);
  }
  for (std::size_t a = 0; a < classes.members.size(); ++a)
    for (std::size_t b = a; b < classes.members.size(); ++b)
      classes.pairings.push_back({a, b, 1, c.pair[a][b], c.pair[b][a]});
  return classes;
}

struct ClassSolution {
  double level;
  std::vector<std::vector<double>> single;
  std::vector<JobPairShares> pairs;
};

ClassSolution class_level(const Case& c) {
  lp::LinearProgram program("by classes", lp::Direction::maximize);
  const Rows rows = common_rows(program, c);
  const PairClasses classes = classes_of(c);
  const PairColumns columns(program, classes, rows.time, rows.target, rows.type,
                            std::vector<double>(c.jobs(), 1.0));
  REQUIRE(program.solve() == lp::Outcome::optimal);
  ClassSolution solution{program.value(rows.level), {}, columns.shares(program, 1e-12)};
  for (const std::vector<int>& columns_of_job : rows.single) {
    solution.single.emplace_back();
    for (int x : columns_of_job) solution.single.back().push_back(program.value(x));
  }
  return solution;
}

TEST_CASE("the LP by classes reaches the optimum of Gavel's LP over every pair, and its split meets every row of it") {
  for (unsigned seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    const Case c = random_case(seed);
    const double full = all_pairs_level(c);
    const ClassSolution by_class = class_level(c);
    CHECK(by_class.level == doctest::Approx(full).epsilon(1e-7));
    // The split, as X of Gavel's LP: each job's time, each type's GPUs, and
    // each job's throughput at the level found.
    std::vector<double> time(c.jobs(), 0.0), throughput(c.jobs(), 0.0), gpus(c.types(), 0.0);
    for (std::size_t j = 0; j < c.jobs(); ++j)
      for (std::size_t t = 0; t < c.types(); ++t) {
        time[j] += by_class.single[j][t];
        gpus[t] += by_class.single[j][t];
        throughput[j] += by_class.single[j][t] * c.single[c.class_of[j]][t];
      }
    for (const JobPairShares& pair : by_class.pairs) {
      REQUIRE(pair.first < pair.second);
      for (std::size_t t = 0; t < c.types(); ++t) {
        if (pair.share[t] == 0) continue;
        CHECK(c.shares(pair.first, pair.second, t));
        time[pair.first] += pair.share[t];
        time[pair.second] += pair.share[t];
        gpus[t] += pair.share[t];
        throughput[pair.first] += pair.share[t] * c.pair[c.class_of[pair.first]][c.class_of[pair.second]][t];
        throughput[pair.second] += pair.share[t] * c.pair[c.class_of[pair.second]][c.class_of[pair.first]][t];
      }
    }
    for (std::size_t j = 0; j < c.jobs(); ++j) {
      CHECK(time[j] <= 1 + 1e-7);
      CHECK(throughput[j] >= c.remaining[j] * by_class.level * (1 - 1e-7));
    }
    for (std::size_t t = 0; t < c.types(); ++t) CHECK(gpus[t] <= c.capacity[t] + 1e-7);
  }
}

// --------------------------------------------------- the plugin against it

// Profile "0".."3": steps/s alone by type, and beside each other profile a
// fraction of that (some pairs no better than taking turns).
constexpr double kSpeed[4][2] = {{6.0, 2.0}, {4.0, 3.0}, {2.0, 1.5}, {5.0, 1.0}};
constexpr double kBeside[4][4] = {{0.7, 0.6, 0.4, 0.5}, {0.8, 0.55, 0.45, 0.3}, {0.9, 0.75, 0.6, 0.35}, {0.6, 0.5, 0.55, 0.4}};

using test::profile;
using test::type_index;

class PairedModel final : public ThroughputModel {
 public:
  std::string_view name() const override { return "paired"; }
  double rate(const JobSpec& job, const Shape& shape) const override {
    return shape.gpus * kSpeed[profile(job)][type_index(shape)];
  }
  int max_colocated() const override { return 2; }
  double rate_colocated(const JobSpec& job, std::span<const JobSpec* const> others, const Shape& shape) const override {
    return rate(job, shape) * kBeside[profile(job)][profile(*others.front())];
  }
};

struct World {
  ClusterState cluster;
  std::deque<JobState> storage;
  std::vector<JobState*> all;
  Case c;  // the same jobs, for the LP written here

  World(int fast, int slow, const std::vector<std::pair<int, double>>& jobs) {
    cluster = test::two_type_cluster(fast, slow);
    c.capacity = {fast, slow};
    for (std::size_t a = 0; a < 4; ++a) {
      c.single.push_back({kSpeed[a][0], kSpeed[a][1]});
      c.pair.emplace_back();
      for (std::size_t b = 0; b < 4; ++b) c.pair[a].push_back({kSpeed[a][0] * kBeside[a][b], kSpeed[a][1] * kBeside[a][b]});
    }
    for (const auto& [model, work] : jobs) {
      JobState& job = storage.emplace_back();
      job.spec.id = static_cast<JobId>(all.size());
      job.spec.model = std::to_string(model);
      job.spec.total_work = work;
      job.status = JobStatus::queued;
      all.push_back(&job);
      c.class_of.push_back(model);
      c.remaining.push_back(work);
    }
  }
};

// An allocation plugin's plan at time 0 for every job of `world`, with
// `args` (all of them).
AllocationPlan plan_of(const std::string& plugin_name, const PluginArgs& args, const World& world,
                       const ThroughputModel& model = PairedModel()) {
  return test::plan_at_zero(plugin_name, args, world.cluster, world.all, model);
}

// gavel's plan at time 0, and the level its reasons state after `words`.
double stated_level(const std::string& policy, const World& world, const std::string& words, AllocationPlan* plan_out) {
  PluginArgs args;
  args.set("policy", policy);
  args.set("min_seconds_between_allocations", 0.0);
  args.set("gpu_costs", NumberTable{});
  args.set("slo_factor", 0.0);
  AllocationPlan plan = plan_of("gavel", args, world);
  double level = -1;
  for (const Grant& grant : plan.ranked) {
    const std::string text = grant.reason.str();
    const std::size_t at = text.find(words);
    if (at != std::string::npos) level = std::stod(text.substr(at + words.size()));
  }
  if (plan_out != nullptr) *plan_out = std::move(plan);
  return level;
}

const std::vector<std::pair<int, double>> kJobs = {{0, 9000}, {0, 4000}, {0, 6000}, {1, 3000}, {1, 8000},
                                                  {2, 2000}, {2, 5000}, {2, 7000}, {3, 1000}, {3, 6000}};

TEST_CASE("gavel min_total_duration_packed: Gavel's search over T on the LP over every pair") {
  World world(2, 2, kJobs);
  AllocationPlan plan;
  const double stated = stated_level("min_total_duration_packed", world, "every job can finish within ", &plan);
  // Gavel's search (min_total_duration.py), each step's feasibility read
  // off the LP over every pair written here: T is feasible when 1/T is
  // at most its highest level.
  const double highest = all_pairs_level(world.c);
  double shortest = 100, longest = 1e6;
  while (1.05 * shortest < longest) {
    const double seconds = (shortest + longest) / 2;
    (1 / seconds <= highest ? longest : shortest) = seconds;
  }
  REQUIRE(1 / longest <= highest);  // found within [100 s, 10^6 s]
  CHECK(stated == doctest::Approx(longest).epsilon(1e-3));  // as printed, to 4 digits
  // Pairs do run: some grant shares its GPUs with another job.
  CHECK(std::any_of(plan.ranked.begin(), plan.ranked.end(), [](const Grant& grant) { return grant.share_with != kNoJob; }));
}

TEST_CASE("gavel max_min_fairness_packed: the level of the LP over every pair") {
  World world(2, 3, kJobs);
  const double stated = stated_level("max_min_fairness_packed", world, "every job gets at least ", nullptr);
  // Gavel's objective with every pair: each job's throughput over its
  // throughput on an equal share of every type (2/5 of its time on the
  // fast GPUs, 3/5 on the slow), at least the level z for every job.
  Case normalised = world.c;
  const double total = 5;
  for (std::size_t j = 0; j < normalised.jobs(); ++j) {
    const std::size_t a = normalised.class_of[j];
    const double equal_share = (kSpeed[a][0] * 2 + kSpeed[a][1] * 3) / total;
    normalised.remaining[j] = equal_share;  // throughput >= z * equal share
  }
  CHECK(stated == doctest::Approx(all_pairs_level(normalised)).epsilon(1e-3));
}

// ------------------------------------------------------------ fifo_packed

PluginArgs fifo_packed(double threshold, bool backfill = false, const std::string& gpu_type = "fastest-reassigned") {
  PluginArgs args;
  args.set("backfill", backfill);
  args.set("gpu_type", gpu_type);
  args.set("min_seconds_between_allocations", 0.0);
  args.set("packing_threshold", threshold);
  return args;
}

const Grant& grant_of(const AllocationPlan& plan, JobId job) {
  for (const Grant& grant : plan.ranked)
    if (grant.job == job) return grant;
  FAIL("job " << job << " is not in the plan");
  return plan.ranked.front();
}

TEST_CASE("fifo packing_threshold: the queue left after FIFO_Perf shares the best partner's GPUs, in order") {
  // One fast and one slow GPU. FIFO_Perf: job 0 (profile 0: 6 fast, 2 slow)
  // to fast, job 1 (profile 2) to the slow GPU left; no type has room for
  // job 2, nor free GPUs, so the queue is jobs 2, 3, 4.
  // Job 2 (profile 0) beside job 0 on fast: 0.7 + 0.7 = 1.4; beside job 1
  // on slow: 0.4 + 0.9 = 1.3. Threshold 1.2: job 0, the most.
  // Job 3 (profile 1) beside job 1, the only one not sharing: 0.45 + 0.75 =
  // 1.2, not above: packing ends, job 4 is not tried.
  const World world(1, 1, {{0, 100}, {2, 100}, {0, 100}, {1, 100}, {0, 100}});
  const AllocationPlan plan = plan_of("fifo", fifo_packed(1.2), world);
  CHECK(grant_of(plan, 0).resources.gpu_type == 0);
  CHECK(grant_of(plan, 1).resources.gpu_type == 1);
  const Grant& two = grant_of(plan, 2);
  CHECK(two.share_with == 0);
  CHECK(two.resources.gpus == 1);
  CHECK(two.resources.gpu_type == 0);
  CHECK(two.reason.str().find("shares the GPUs of job 0 on fast: beside each other they run at 1.4 times") !=
        std::string::npos);
  CHECK(grant_of(plan, 3).resources.gpus == 0);
  CHECK(grant_of(plan, 4).resources.gpus == 0);
  // Gavel's threshold, 1.5: no pair is good enough.
  const AllocationPlan strict = plan_of("fifo", fifo_packed(1.5), world);
  for (const Grant& grant : strict.ranked) CHECK(grant.share_with == kNoJob);
  // 0: FIFO_Perf alone.
  for (const Grant& grant : plan_of("fifo", fifo_packed(0), world).ranked) CHECK(grant.share_with == kNoJob);
}

TEST_CASE("fifo packing_threshold: the job that stopped FIFO while a type had free GPUs is left out, as in Gavel") {
  // Job 1 needs 2 GPUs, and the slow GPU is free: Gavel pops it, stops,
  // and packs from job 2 on, which shares job 0's fast GPU (1.4 > 1.2)
  // though the slow GPU is free.
  World world(1, 1, {{0, 100}, {1, 100}, {0, 100}});
  world.storage[1].spec.gpus = world.storage[1].spec.min_gpus = world.storage[1].spec.max_gpus = 2;
  const AllocationPlan plan = plan_of("fifo", fifo_packed(1.2), world);
  CHECK(grant_of(plan, 1).resources.gpus == 0);
  CHECK(grant_of(plan, 1).share_with == kNoJob);
  CHECK(grant_of(plan, 2).share_with == 0);
}

TEST_CASE("fifo packing_threshold: refused with another gpu_type, with backfill, below 0, or without pair rates") {
  const World world(1, 1, {{0, 100}});
  CHECK_THROWS_WITH_AS(plan_of("fifo", fifo_packed(1.5, false, "fastest"), world),
                       doctest::Contains("applies only with gpu_type = \"fastest-reassigned\""), ArgumentError);
  CHECK_THROWS_WITH_AS(plan_of("fifo", fifo_packed(1.5, true), world), doctest::Contains("cannot go with backfill"),
                       ArgumentError);
  CHECK_THROWS_WITH_AS(plan_of("fifo", fifo_packed(-1), world), doctest::Contains("must be 0 (off) or positive"),
                       ArgumentError);
  class Alone final : public ThroughputModel {  // no co-location throughputs
   public:
    std::string_view name() const override { return "alone"; }
    double rate(const JobSpec&, const Shape& shape) const override { return shape.gpus; }
  };
  CHECK_THROWS_WITH_AS(plan_of("fifo", fifo_packed(1.5), world, Alone()),
                       doctest::Contains("throughput model 'alone' has no co-location throughputs"), ArgumentError);
}

}  // namespace

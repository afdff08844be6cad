// Gandiva as Tiresias's simulator models it (`gandiva` with
// `rules = "tiresias_simulator"`, plugins/allocation/gandiva_node_sets.hpp):
// node sets per GPU count, placement by load below capacity, the classes'
// growth and shrinking, rotation each minute, pending jobs retried when a set
// is released. Each case is worked out by hand from the simulator's rules.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "../plugins/allocation/gandiva_node_sets.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;
using tessel_plugins::GandivaNodeSets;

namespace {

using Ids = std::vector<GandivaNodeSets::Id>;

std::vector<GandivaNodeSets::Active> jobs(const Ids& ids, int gpus) {
  std::vector<GandivaNodeSets::Active> out;
  for (auto id : ids) out.push_back({id, gpus});
  return out;
}

std::vector<std::size_t> sizes(const std::vector<GandivaNodeSets::Set>& sets) {
  std::vector<std::size_t> out;
  for (const auto& set : sets) out.push_back(set.jobs.size());
  return out;
}

std::string experiment(const std::string& arguments, int nodes = 1, int gpus_per_node = 1) {
  return "[[cluster.groups]]\ncount = " + std::to_string(nodes) + "\ngpus_per_node = " + std::to_string(gpus_per_node) +
         R"(

[workload]
kind = "csv"
path = "trace.csv"
model = "linear"

[scheduler]
round_seconds = 10
allocation = { plugin = "gandiva", )" +
         arguments + R"( }
placement = { plugin = "consolidated" }

[simulation]
preemption_overhead_seconds = 0

[output]
database = "e.db"
)";
}

RunResults run(const std::string& trace, const std::string& arguments, int nodes = 1, int gpus_per_node = 1) {
  TempDir dir;
  dir.write("trace.csv", trace);
  return simulate(dir, experiment(arguments, nodes, gpus_per_node));
}

}  // namespace

TEST_CASE("tiresias_simulator gandiva: a set takes jobs while load + 1 is below capacity, then time-slices") {
  // One 8-GPU node, nine 1-GPU jobs. Job 0 opens a set (capacity 8); jobs
  // 1-6 join it (load 7); job 7 finds 7 + 1 not below 8 and no free node, so
  // it time-slices onto the set, and so does job 8. Eight run; job 8 waits.
  GandivaNodeSets sets(1, 8);
  const auto nine = jobs({0, 1, 2, 3, 4, 5, 6, 7, 8}, 1);
  CHECK(sets.round(0, nine) == Ids{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(sets.free_nodes() == 0);
  REQUIRE(sets.classes().at(1).size() == 1);
  CHECK(sets.classes().at(1).front().load == 9);
  // No rotation within the minute...
  CHECK(sets.round(10, nine) == Ids{0, 1, 2, 3, 4, 5, 6, 7});
  // ...and at the minute the eight running go to the back: job 8 runs.
  CHECK(sets.round(60, nine) == Ids{8, 0, 1, 2, 3, 4, 5, 6});
  // Job 0 is done: the next rotation moves the running ones (job 0 with
  // them) before it leaves.
  const auto eight = jobs({1, 2, 3, 4, 5, 6, 7, 8}, 1);
  CHECK(sets.round(120, eight) == Ids{7, 8, 1, 2, 3, 4, 5, 6});
}

TEST_CASE("tiresias_simulator gandiva: 4-GPU jobs open a set each, then the class shrinks to its share") {
  // Two 8-GPU nodes. A 4-GPU set holds 2 jobs, but a second job joins only
  // if 1 + 1 < 2: so job 1 opens a set on the other node. The class then
  // asks for 8 GPUs (2 jobs x 4) and holds 16: it gives back
  // ceil(8 / 4) = 2 sets, at most all but one: job 0's set goes, its job
  // joins job 1's, and both run there.
  GandivaNodeSets sets(2, 8);
  CHECK(sets.round(0, jobs({0, 1}, 4)) == Ids{1, 0});
  REQUIRE(sets.classes().at(4).size() == 1);
  CHECK(sets.classes().at(4).front().nodes == 1);
  CHECK(sets.classes().at(4).front().capacity == 2);
  CHECK(sets.free_nodes() == 1);
}

TEST_CASE("tiresias_simulator gandiva: the 1-GPU class overshoots, shrinks, and leaves new sets empty") {
  // Three 8-GPU nodes, nine 1-GPU jobs. Jobs 0-6 fill set A; job 7 opens
  // set B (A's load + 1 is not below 8); job 8 joins B, the lighter. The
  // class asks for 9 GPUs and holds 16: 7 GPUs too many, 7 one-node sets,
  // at most all but one: B goes, jobs 7 and 8 join A (nine jobs, eight run).
  GandivaNodeSets sets(3, 8);
  const auto nine = jobs({0, 1, 2, 3, 4, 5, 6, 7, 8}, 1);
  CHECK(sets.round(0, nine) == Ids{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(sizes(sets.classes().at(1)) == std::vector<std::size_t>{9});
  CHECK(sets.free_nodes() == 2);
  // Next round it holds 8 and asks for 9: one more set, opened from the
  // free nodes; its last attempt succeeded on a one-node set, so the
  // simulator does not deal the jobs again (its reused loop variable) and
  // the new set stays empty.
  CHECK(sets.round(10, nine) == Ids{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(sizes(sets.classes().at(1)) == std::vector<std::size_t>{9, 0});
  CHECK(sets.free_nodes() == 1);
  // The round after, the empty set is released, and the class grows again.
  CHECK(sets.round(20, nine) == Ids{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(sizes(sets.classes().at(1)) == std::vector<std::size_t>{9, 0});
  CHECK(sets.free_nodes() == 1);
}

TEST_CASE("tiresias_simulator gandiva: a class with no set and no free node waits for a set to be released") {
  // One 8-GPU node. Job 0 (8 GPUs) opens a set on it; job 1 (2 GPUs) has no
  // 2-GPU set and no free node: it is pending. When job 0 leaves its set is
  // released, and job 1 opens one.
  GandivaNodeSets sets(1, 8);
  const std::vector<GandivaNodeSets::Active> both{{0, 8}, {1, 2}};
  CHECK(sets.round(0, both) == Ids{0});
  CHECK(sets.pending() == 1);
  CHECK(sets.round(10, both) == Ids{0});
  CHECK(sets.round(20, {{1, 2}}) == Ids{1});
  CHECK(sets.pending() == 0);
  REQUIRE(sets.classes().at(2).size() == 1);
  CHECK(sets.classes().at(2).front().capacity == 4);
}

TEST_CASE("tiresias_simulator gandiva: pending jobs retried in order skip the one after each started") {
  // One 8-GPU node held by job 0 (8 GPUs); jobs 1, 2, 3 (4, 4 and 2 GPUs)
  // are pending. Job 0 leaves: job 1 opens a 4-GPU set on the node; job 2,
  // the next, is skipped (the simulator removes job 1 from the list it is
  // walking); job 3 finds no 2-GPU set and no free node. Only job 1 runs,
  // though job 2 would have fitted beside it.
  GandivaNodeSets sets(1, 8);
  const std::vector<GandivaNodeSets::Active> all{{0, 8}, {1, 4}, {2, 4}, {3, 2}};
  CHECK(sets.round(0, all) == Ids{0});
  CHECK(sets.pending() == 3);
  CHECK(sets.round(10, {{1, 4}, {2, 4}, {3, 2}}) == Ids{1});
  CHECK(sets.pending() == 2);
}

TEST_CASE("tiresias_simulator gandiva in a simulation: two jobs on one GPU take turns each minute") {
  // One GPU, two 1-GPU jobs of 100 s at time 0. Job 0 opens the set
  // (capacity 1); job 1 time-slices onto it. Job 0 runs [0, 60), job 1
  // [60, 120), job 0 [120, 160) and is done, job 1 [160, 200).
  const RunResults results = run("arrival,gpus,duration\n0,1,100\n0,1,100\n",
                                 R"(packing = false, rules = "tiresias_simulator")");
  const std::vector<double> finish = finish_times(results);
  REQUIRE(finish.size() == 2);
  CHECK(finish[0] == doctest::Approx(160));
  CHECK(finish[1] == doctest::Approx(200));
}

TEST_CASE("tiresias_simulator gandiva refuses Gavel's packing and throttle, and unknown rules") {
  const char* trace = "arrival,gpus,duration\n0,1,100\n";
  CHECK_THROWS_WITH(run(trace, R"(rules = "tiresias_simulator")"),
                    doctest::Contains("must be false with rules = \"tiresias_simulator\""));
  CHECK_THROWS_WITH(run(trace, R"(packing = false, rules = "tiresias_simulator", min_seconds_between_allocations = 60)"),
                    doctest::Contains("must be 0 with rules = \"tiresias_simulator\""));
  CHECK_THROWS_WITH(run(trace, R"(packing = false, rules = "tiresias")"), doctest::Contains("tiresias_simulator"));
  // Node sets are whole nodes of one size.
  TempDir dir;
  dir.write("trace.csv", trace);
  std::string mixed = experiment(R"(packing = false, rules = "tiresias_simulator")");
  mixed.insert(mixed.find("\n\n[workload]"), "\n\n[[cluster.groups]]\ncount = 1\ngpus_per_node = 4");
  CHECK_THROWS_WITH(simulate(dir, mixed), doctest::Contains("needs nodes of one GPU count"));
}

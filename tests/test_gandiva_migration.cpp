// Gandiva's migration for defragmentation (Xiao et al., OSDI'18): `gandiva`
// time-slicing with `consolidated` placement and `migrate = true`. A job
// that one node could hold, that free but scattered GPUs would slow down, is
// not spread: lower-ranked jobs move off a node for it, each move a
// preemption and a re-placement charged the checkpoint/restore overhead.
// Where spreading costs the job nothing, nothing moves. Each case is a whole
// simulation worked out by hand.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// Two nodes of four GPUs. Jobs 0, 1 and 2 (two GPUs each) arrive at 0: best
// fit puts 0 and 1 on node 0 and 2 on node 1. Job 1 ends at 100, leaving two
// free GPUs on each node. Job 3 (four GPUs) arrives at 600.
const char* kFragmenting = "arrival,gpus,duration\n0,2,10000\n0,2,100\n0,2,10000\n600,4,10000\n";

std::string experiment(const std::string& model, const std::string& placement) {
  return R"([[cluster.groups]]
count = 2
gpus_per_node = 4

[workload]
kind = "csv"
path = "trace.csv"
model = )" + model +
         R"(

[scheduler]
round_seconds = 300
allocation = { plugin = "gandiva", packing = false }
placement = )" + placement +
         R"(

[simulation]
preemption_overhead_seconds = 30

[output]
database = "e.db"
decisions = true
)";
}

// Across nodes a job runs at half its rate.
const char* kPenalty = R"({ name = "placement-penalty", across_nodes = 0.5 })";

RunResults run(const std::string& model, const std::string& placement) {
  TempDir dir;
  dir.write("trace.csv", kFragmenting);
  return simulate(dir, experiment(model, placement));
}

}  // namespace

TEST_CASE("gandiva migration: a job moves off a node so that a waiting four-GPU job gets it whole") {
  // The jobs fit (8 GPUs asked, 8 up), so every job is granted each round.
  // Shares at 600: 8 GPUs / 3 jobs / GPUs asked, scaled to at most 1: jobs 0
  // and 2 get 1, job 3 2/3; each new allocation restarts the rounds at 0.5.
  // At 600 jobs 0 and 2 rank first (1 / 0.5 against 0.667 / 0.5); job 3
  // would run at half its rate spread over both nodes, so it waits, and no
  // job ranks below it to move. At 900 jobs 0 and 2 have had a round more
  // (1 / 1.5) and job 3 ranks first: the core frees job 2, ranked last,
  // which empties node 1; job 3 takes it, and job 2 is placed again on the
  // two GPUs job 1 left on node 0: job 2 migrated.
  const RunResults results = run(kPenalty, R"({ plugin = "consolidated", migrate = true })");
  CHECK(placed_at(results, 3) == std::vector<double>{900});
  CHECK(placed_at(results, 2) == std::vector<double>{0, 900});
  CHECK(placed_at(results, 0) == std::vector<double>{0});
  CHECK(results.jobs[2].preemptions == 1);
  CHECK(results.jobs[0].preemptions == 0);
  const std::string reason = reason_of(results, 3, 600, PluginKind::placement);
  CAPTURE(reason);
  CHECK(reason.find("free GPUs scattered: spread over 2 nodes it would run at 0.5 of its rate on one node") !=
        std::string::npos);
  // Job 3 runs 10,000 s on one node from 900. Job 2 ran 900 s, then pays
  // the 30-s checkpoint/restore of its move and runs its 9,100 s left:
  // 900 + 30 + 9,100. Job 0 never moves.
  const std::vector<double> finish = finish_times(results);
  CHECK(finish[3] == doctest::Approx(10900));
  CHECK(finish[2] == doctest::Approx(10030));
  CHECK(finish[0] == doctest::Approx(10000));
}

TEST_CASE("gandiva migration: without it the four-GPU job is spread at once and runs at half its rate") {
  // The same trace without `migrate`: at 600 job 3 takes the two free GPUs
  // of each node and runs its 10,000 s at half speed: 600 + 20,000. Nothing
  // moves.
  const RunResults results = run(kPenalty, R"({ plugin = "consolidated" })");
  CHECK(placed_at(results, 3) == std::vector<double>{600});
  CHECK(placed_at(results, 2) == std::vector<double>{0});
  CHECK(results.jobs[2].preemptions == 0);
  CHECK(finish_times(results)[3] == doctest::Approx(20600));
}

TEST_CASE("gandiva migration is not worth it where spreading costs the job nothing") {
  // Under the linear model a job runs as fast spread as on one node: moving
  // job 2 would only cost it the 30-s restore. With `migrate` job 3 is
  // spread at 600, as without it, and every job finishes after its
  // duration.
  const RunResults results = run(R"({ name = "linear" })", R"({ plugin = "consolidated", migrate = true })");
  CHECK(placed_at(results, 3) == std::vector<double>{600});
  CHECK(placed_at(results, 2) == std::vector<double>{0});
  CHECK(results.jobs[2].preemptions == 0);
  const std::vector<double> finish = finish_times(results);
  CHECK(finish[3] == doctest::Approx(10600));
  CHECK(finish[2] == doctest::Approx(10000));
}

TEST_CASE("consolidated's migrate spreads a job no node could hold, and refuses a non-boolean") {
  // An eight-GPU job on nodes of four cannot be consolidated by any move:
  // it is spread at once. Two nodes are its packed shape, the one its
  // trace duration was measured on, so it runs its 1,000 s.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,8,1000\n");
  const RunResults results = simulate(dir, experiment(kPenalty, R"({ plugin = "consolidated", migrate = true })"));
  CHECK(placed_at(results, 0) == std::vector<double>{0});
  CHECK(finish_times(results)[0] == doctest::Approx(1000));

  dir.write("e.toml", experiment(kPenalty, R"({ plugin = "consolidated", migrate = "yes" })"));
  const CommandResult refused = run_tessel({"run", "e.toml"}, dir.path());
  CHECK(refused.code == 2);
  CHECK(refused.err.find("migrate") != std::string::npos);
}

// Incremental plans (issue 17): a plan that keeps every running job without
// listing it (AllocationPlan::keep_running) and ranks view.waiting(), the
// queue the core keeps, so that a round costs what the queue costs. Checked
// by hand on a small trace, against the same plan without it, and, for FIFO,
// against the plan with every running job listed (what the decision log
// makes the core build). And the index of nodes by free GPUs that placement
// reads instead of a pass over every node.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "results/store.hpp"
#include "support.hpp"
#include "tessel/cluster.hpp"
#include "tessel/rng.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// One node of 4 GPUs; a round at every event.
std::string queue_only(bool keep) {
  return R"([cluster]
nodes = 1
gpus_per_node = 4

[workload]
kind = "csv"
path = "trace.csv"

[simulation]
rounds = "events"

[scheduler]
allocation = { plugin = "queue_only", path = ")" +
         test_plugin("queue_only").string() + "\", keep = " + (keep ? "true" : "false") + R"( }
placement = { plugin = "first_fit" }
)";
}

const char* kTrace =
    "arrival,gpus,duration\n"
    "0,4,1000\n"   // job 0: the whole node
    "100,2,500\n"  // job 1
    "200,2,300\n";  // job 2

// support's busy experiment, with the decision log or without.
std::string busy(const std::string& allocation, bool decisions) {
  return busy_experiment(allocation, std::string("[output]\ndecisions = ") + (decisions ? "true" : "false") + "\n");
}

}  // namespace

TEST_CASE("an incremental plan keeps its running jobs, ranked first, as if it listed them") {
  // t=0     job 0 starts on the whole node.
  // t=100   job 1 waits: job 0 is kept.     t=200  job 2 waits too.
  // t=1000  job 0 ends (JCT 1000); newest first: job 2 and job 1 start.
  // t=1300  job 2 ends (JCT 1100).          t=1500 job 1 ends (JCT 1400).
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults kept = simulate(dir, queue_only(true));
  CHECK(finish_times(kept) == std::vector<double>{1000, 1500, 1300});
  for (const JobRecord& job : kept.jobs) CHECK(job.preemptions == 0);

  // The same plan without keep_running leaves job 0 unranked: job 1 takes
  // its GPUs at t=100.
  const RunResults unkept = simulate(dir, queue_only(false));
  CHECK(unkept.jobs[0].preemptions >= 1);
  CHECK(unkept.jobs[1].first_start == 100);
}

TEST_CASE("view.waiting() is the queue through preemptions and node failures") {
  // queue_only throws when view.waiting() differs from the waiting jobs of
  // view.active(); in both settings jobs wait again (crashes; with keep =
  // false, preemptions too).
  TempDir dir;
  for (const bool keep : {true, false}) {
    CAPTURE(keep);
    const std::string plugin =
        "{ plugin = \"queue_only\", path = \"" + test_plugin("queue_only").string() + "\", keep = " +
        (keep ? "true" : "false") + " }";
    const RunResults results = simulate(dir, busy(plugin, false));
    int restarts = 0, finished = 0;
    for (const JobRecord& job : results.jobs) {
      restarts += job.preemptions + job.attempts - 1;
      finished += job.status == "finished";
    }
    CHECK(restarts > 0);
    CHECK(finished == 300);
  }
}

TEST_CASE("FIFO's incremental plan decides as its plan with every running job listed") {
  // With the decision log on, the core lists the kept jobs (their "grant"
  // decisions are recorded); off, it never visits them. Same runs.
  TempDir dir;
  for (const std::string fifo : {R"({ plugin = "fifo" })", R"({ plugin = "fifo", backfill = true })"}) {
    CAPTURE(fifo);
    const RunResults fast = simulate(dir, busy(fifo, false));
    const RunResults listed = simulate(dir, busy(fifo, true));
    REQUIRE(fast.jobs.size() == listed.jobs.size());
    int restarts = 0;
    for (std::size_t i = 0; i < fast.jobs.size(); ++i) {
      CAPTURE(i);
      CHECK(fast.jobs[i].first_start == listed.jobs[i].first_start);
      CHECK(fast.jobs[i].finish == listed.jobs[i].finish);
      CHECK(fast.jobs[i].preemptions == listed.jobs[i].preemptions);
      CHECK(fast.jobs[i].gpu_seconds == listed.jobs[i].gpu_seconds);
      CHECK(fast.jobs[i].attempts == listed.jobs[i].attempts);
      restarts += fast.jobs[i].attempts - 1;
    }
    CHECK(restarts > 0);  // crashed jobs waited again
    bool kept_granted = false;
    for (const DecisionRecord& d : listed.decisions)
      kept_granted |= d.code == "grant" && d.reason == "running; FIFO never preempts";
    CHECK(kept_granted);
  }
}

TEST_CASE("tightest_node is the node a pass over fits_on picks, through assigns, releases and nodes going down") {
  // Nodes of 2, 4 and 8 GPUs; jobs of 1 to 8 whole GPUs come and go at random.
  std::vector<NodeSpec> specs;
  for (int i = 0; i < 70; ++i)
    specs.push_back({.name = "n" + std::to_string(i), .gpus = i % 3 == 0 ? 8 : i % 3 == 1 ? 4 : 2});
  ClusterState cluster(specs);
  auto scan = [&](int gpus) -> std::optional<NodeId> {
    const Resources want{gpus, 1000, 0, 0};
    std::optional<NodeId> best;
    for (const Node& node : cluster.nodes()) {
      const int fits = cluster.fits_on(node.id, want);
      if (fits >= gpus && (!best || fits < cluster.fits_on(*best, want))) best = node.id;
    }
    return best;
  };
  Rng rng(7);
  std::vector<std::pair<JobId, Allocation>> running;
  for (int step = 0; step < 3000; ++step) {
    const int gpus = 1 + static_cast<int>(rng.below(8));
    CAPTURE(step);
    CAPTURE(gpus);
    REQUIRE(cluster.tightest_node(gpus) == scan(gpus));
    if (rng.below(10) == 0) {  // a node goes down or comes back
      const NodeId node = static_cast<NodeId>(rng.below(specs.size()));
      bool busy = false;
      for (const Gpu& gpu : cluster.gpus_of(node)) busy |= !gpu.jobs.empty();
      if (!busy) cluster.set_up(node, !cluster.node(node).up);
    } else if (const std::optional<NodeId> node = cluster.tightest_node(gpus); node && rng.below(3) != 0) {
      Allocation allocation;
      std::vector<GpuId> chosen;
      cluster.take(*node, Resources{gpus, 1000, 0, 0}, gpus, chosen);
      allocation.gpus = chosen;
      cluster.assign(static_cast<JobId>(step), allocation);
      running.emplace_back(static_cast<JobId>(step), allocation);
    } else if (!running.empty()) {
      const std::size_t i = rng.below(running.size());
      cluster.release(running[i].first, running[i].second);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  CHECK(cluster.tightest_node(9) == std::nullopt);  // no node has 9 GPUs
}

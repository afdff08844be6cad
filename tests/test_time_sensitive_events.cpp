// Time-sensitive policies (tiresias, gittins, las) with rounds at events:
// the rounds a plan asks for (AllocationPlan::revisit_at) make the run the
// same as one with one-second rounds wherever every decision falls on a
// whole second.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// One node of 4 GPUs, the linear model (a job of duration d on g GPUs runs d
// seconds), rounds at events or every second.
RunResults run(const std::string& trace, const std::string& allocation, bool events) {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n" + trace);
  dir.write("sizes.csv", "duration\n100\n400\n2000\n4000\n");
  return simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 1
allocation = )" + allocation + R"(
placement = { plugin = "first_fit" }
[simulation]
completion = "exact"
preemption_overhead_seconds = 0
)" + (events ? "rounds = \"events\"\n" : ""));
}

std::vector<double> finishes(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(NAN));
  return out;
}

}  // namespace

TEST_CASE("greedy_by_count at events: a job started at a round crosses its queue's threshold with no other event") {
  // Both jobs ask for the whole node and arrive at 0; one queue limit at
  // 400 GPU-s. Job 0 starts at 0, so the plan of that round saw it waiting:
  // its crossing, at 100 s, comes from the selection, not from a running job.
  // At 100 job 1 (queue 1) preempts it; job 1 crosses at 200 and, running,
  // keeps its place in queue 2 until it ends at 1100; job 0 then runs its
  // last 900 s. Without the round at 100, job 0 would run to 1000 unopposed.
  const std::string trace = "0,4,1000\n0,4,1000\n";
  const std::string queues = "queue_thresholds_gpu_seconds = [400], promote_knob = 0, selection = \"greedy_by_count\"";
  const RunResults events = run(trace, "{ plugin = \"tiresias\", " + queues + " }", true);
  CHECK(finishes(events) == std::vector<double>{2000, 1100});
  CHECK(finishes(run(trace, "{ plugin = \"tiresias\", " + queues + " }", false)) == finishes(events));
  // In entry order, job 1, demoted while running at 200, queues behind job 0,
  // which waits in queue 2 already: job 0 runs from 200 to its end at 1100.
  const std::string entry_order = "{ plugin = \"tiresias\", entry_order = true, " + queues + " }";
  const RunResults entered = run(trace, entry_order, true);
  CHECK(finishes(entered) == std::vector<double>{1100, 2000});
  CHECK(finishes(run(trace, entry_order, false)) == finishes(entered));
  // 2D-Gittins the same way: at 100 job 0 is in queue 2 and job 1 preempts
  // it; at 200 both are in queue 2 at the same index and job 0, the earlier,
  // runs to 1100. (One-second rounds re-read the index each second, which
  // rounds at events do only at rounds, so the two runs differ here.)
  const RunResults gittins =
      run(trace, "{ plugin = \"gittins\", distribution = \"sizes.csv\", delta = 3250, " + queues + " }", true);
  CHECK(finishes(gittins) == std::vector<double>{1100, 2000});
  CHECK(gittins.jobs[0].preemptions == 1);
}

TEST_CASE("greedy_by_count at events: a job the selection stops becomes due for promotion with no other event") {
  // Knob 1: a waiting job in a lower queue returns to queue 1 once it has
  // waited as long as it ran. Job 0 (4 GPUs) crosses 400 GPU-s at 100 and
  // job 1 (4 GPUs, arrived at 50) preempts it; from then on the two take
  // turns, each stopped job becoming due for promotion at a moment no event
  // marks, which only the selection's revisit time brings a round to. Every
  // moment falls on a whole second, so one-second rounds agree.
  const std::string trace = "0,4,1000\n50,4,1000\n";
  const std::string allocation =
      "{ plugin = \"tiresias\", queue_thresholds_gpu_seconds = [400], promote_knob = 1, "
      "selection = \"greedy_by_count\" }";
  const RunResults events = run(trace, allocation, true);
  const RunResults clock = run(trace, allocation, false);
  CHECK(finishes(events) == std::vector<double>{1900, 2000});
  CHECK(finishes(events) == finishes(clock));
  CHECK(events.jobs[0].preemptions == clock.jobs[0].preemptions);
  CHECK(events.jobs[1].preemptions == clock.jobs[1].preemptions);
}

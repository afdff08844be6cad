// Time-sensitive policies (tiresias, gittins, las) with rounds at events:
// the rounds a plan asks for (AllocationPlan::revisit_at) make the run the
// same as one with one-second rounds wherever every decision falls on a
// whole second.
#include <doctest/doctest.h>

#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
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

}  // namespace

TEST_CASE("las's provisional plan lists the waiting jobs; its whole plan also the running jobs they outrank") {
  PluginRegistry registry;
  SlotRegistry slots;
  StageConfig stage;
  stage.kind = PluginKind::allocation;
  stage.plugin = "las";
  Diagnostics diagnostics;
  const PluginEntry& entry = registry.find(PluginKind::allocation, "las");
  const PluginArgs args = check_arguments(stage, entry, {}, diagnostics);
  REQUIRE(diagnostics.empty());
  PluginPtr<Plugin> plugin = PluginRegistry::create(entry, PluginContext(args, 1, slots));
  auto* las = dynamic_cast<AllocationPolicy*>(plugin.get());
  REQUIRE(las != nullptr);

  ClusterState cluster(std::vector<NodeSpec>{{"n0", "v100", 4, 32, 256, 0}});
  std::deque<JobState> jobs;
  std::vector<JobState*> all, waiting;
  // Jobs 0 and 1 run (attained 500 and 3000 GPU-s), job 2 waits (1000).
  for (const double attained : {500.0, 3000.0, 1000.0}) {
    JobState& job = jobs.emplace_back();
    job.spec.id = static_cast<JobId>(all.size());
    job.spec.gpus = job.spec.min_gpus = job.spec.max_gpus = 1;
    job.attained_service = attained;
    job.status = JobStatus::queued;
    all.push_back(&job);
  }
  for (JobId id : {0u, 1u}) {
    all[id]->status = JobStatus::running;
    all[id]->allocation = Allocation{{static_cast<GpuId>(id)}, 1000, 0, 0};
    cluster.assign(id, all[id]->allocation);
  }
  waiting.push_back(all[2]);
  const SchedulerSettings settings;
  const FlatRate model;
  const SchedulerView view(settings, cluster, model, all, {}, all, waiting, 10);
  // Provisional: the waiting job alone; the running ones are kept while it
  // fits on free GPUs.
  const AllocationPlan provisional = las->allocate(view);
  CHECK(provisional.provisional);
  REQUIRE(provisional.keep_running.has_value());
  REQUIRE(provisional.ranked.size() == 1);
  CHECK(provisional.ranked[0].job == 2);
  // Whole: job 0 ranks ahead of the waiting job 2, which cannot preempt it:
  // kept. Job 2 outranks job 1, which it may preempt: both listed, in LAS order.
  const AllocationPlan plan = las->allocate_whole(view);
  CHECK_FALSE(plan.provisional);
  REQUIRE(plan.keep_running.has_value());
  CHECK(plan.keep_running->kind() == "attained {~} GPU-s; the least attained service runs first");
  REQUIRE(plan.ranked.size() == 2);
  CHECK(plan.ranked[0].job == 2);
  CHECK(plan.ranked[0].reason.str() == "attained 1000 GPU-s; the least attained service runs first");
  CHECK(plan.ranked[0].reason.kind() == plan.keep_running->kind());  // the log records nothing new for kept jobs
  CHECK(plan.ranked[1].job == 1);
  // With nobody waiting, the plan lists nothing.
  for (const bool whole : {false, true}) {
    const SchedulerView idle_view(settings, cluster, model, all, {}, all, {}, 20);
    const AllocationPlan idle = whole ? las->allocate_whole(idle_view) : las->allocate(idle_view);
    CHECK(idle.keep_running.has_value());
    CHECK(idle.ranked.empty());
  }
}

TEST_CASE("las decides the same with the decision log on, where the core asks for its whole plan every round") {
  TempDir dir;
  const std::string las = R"({ plugin = "las" })";
  const RunResults fast = simulate(dir, busy_experiment(las));  // provisional plans, the whole one when needed
  const RunResults listed = simulate(dir, busy_experiment(las, "[output]\ndecisions = true\n"));
  CHECK(check_same_jobs(fast, listed) > 0);  // and jobs were preempted
  // Kept jobs had their grant recorded when they started: nothing new, and
  // never the kept reason's text without its number.
  for (const DecisionRecord& d : listed.decisions) CHECK(d.reason.find("{~}") == std::string::npos);
}

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
  CHECK(finish_times(events) == std::vector<double>{2000, 1100});
  CHECK(finish_times(run(trace, "{ plugin = \"tiresias\", " + queues + " }", false)) == finish_times(events));
  // In entry order, job 1, demoted while running at 200, queues behind job 0,
  // which waits in queue 2 already: job 0 runs from 200 to its end at 1100.
  const std::string entry_order = "{ plugin = \"tiresias\", entry_order = true, " + queues + " }";
  const RunResults entered = run(trace, entry_order, true);
  CHECK(finish_times(entered) == std::vector<double>{1100, 2000});
  CHECK(finish_times(run(trace, entry_order, false)) == finish_times(entered));
  // 2D-Gittins the same way: at 100 job 0 is in queue 2 and job 1 preempts
  // it; at 200 both are in queue 2 at the same index and job 0, the earlier,
  // runs to 1100. (One-second rounds re-read the index each second, which
  // rounds at events do only at rounds, so the two runs differ here.)
  const RunResults gittins =
      run(trace, "{ plugin = \"gittins\", distribution = \"sizes.csv\", delta = 3250, " + queues + " }", true);
  CHECK(finish_times(gittins) == std::vector<double>{1100, 2000});
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
  CHECK(finish_times(events) == std::vector<double>{1900, 2000});
  CHECK(finish_times(events) == finish_times(clock));
  CHECK(events.jobs[0].preemptions == clock.jobs[0].preemptions);
  CHECK(events.jobs[1].preemptions == clock.jobs[1].preemptions);
}

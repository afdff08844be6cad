// Provisional plans (issue 17): a plan that lists the queue alone stands
// while the queue fits on free GPUs; where a listed job would preempt, the
// core asks the policy for its whole plan and places the rest of the round
// by it. Checked by hand on LAS, job for job against the whole plan every
// round, and on whole plans that disagree with the provisional one.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

std::string las_on_two_gpus(bool decisions) {
  return std::string(R"([cluster]
nodes = 1
gpus_per_node = 2
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 300
allocation = { plugin = "las" }
placement = { plugin = "first_fit" }
[simulation]
completion = "exact"
preemption_overhead_seconds = 0
[output]
decisions = )") + (decisions ? "true" : "false") + "\n";
}

std::string provisional_queue(const std::string& mode) {
  return "{ plugin = \"provisional_queue\", path = \"" + test_plugin("provisional_queue").string() +
         "\", mode = \"" + mode + "\" }";
}

}  // namespace

TEST_CASE("las preempts through its whole plan only in the round a waiting job does not fit on free GPUs") {
  // Two GPUs. Jobs 0 and 1 start at 0; job 2 arrives at 600 with no service
  // and finds no free GPU: its provisional plan (the queue) stops, and the
  // whole plan ranks job 2, then job 0 and job 1 (600 GPU-s each, the
  // earlier arrival first): job 2 preempts job 1, the last. It ends at 900;
  // job 1 (600 GPU-s) starts again on the GPU it frees, preempting nobody,
  // though job 0 has more service: it ends at 900 + 900 = 1800, job 0 at
  // 1500.
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,1500\n0,1,1500\n600,1,300\n");
  const RunResults results = simulate(dir, las_on_two_gpus(false));
  CHECK(finish_times(results) == std::vector<double>{1500, 1800, 900});
  CHECK(results.jobs[0].preemptions == 0);
  CHECK(results.jobs[1].preemptions == 1);
  CHECK(results.jobs[2].first_start == 600);
  // The decision log makes the core ask for the whole plan every round: the
  // same run.
  check_same_jobs(results, simulate(dir, las_on_two_gpus(true)));
}

TEST_CASE("a provisional plan decides as its whole plan would every round, job for job") {
  // provisional_queue's whole plan is queue_only's with keep = false: the
  // queue newest first, the running jobs unranked and so the first victims.
  TempDir dir;
  const RunResults provisional = simulate(dir, busy_experiment(provisional_queue("agree")));
  const RunResults whole = simulate(
      dir, busy_experiment("{ plugin = \"queue_only\", path = \"" + test_plugin("queue_only").string() + "\", keep = false }"));
  CHECK(check_same_jobs(provisional, whole) > 0);  // and jobs were preempted
}

TEST_CASE("a whole plan that disagrees with the provisional one breaks the contract") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"whole_provisional",
       "allocation plugin 'provisional_queue' broke its contract: returned a provisional plan from allocate_whole, "
       "which a policy with provisional plans overrides to give the whole one"},
      {"no_override", "made a provisional plan without overriding AllocationPolicy::allocate_whole"},
      {"no_keep",
       "allocation plugin 'provisional_queue' broke its contract: returned a provisional plan that keeps no running "
       "job (keep_running unset)"},
      {"ahead", "GPUs in its whole plan, and does not list it in its provisional plan"},
      {"deny_listed", "other resources in its whole plan than in its provisional plan"},
      {"regrant_kept", "holds in its whole plan, and keeps it in its provisional plan"},
      {"after", "in its whole plan, and after it in its provisional plan"},
      {"started_last", "in its whole plan, and before it in its provisional plan"},
      {"leave_out", "out of its whole plan, and ranks it in its provisional plan"},
      {"resize_kept", "as it is in its whole plan, and changes what it holds in its provisional plan"},
  };
  for (const auto& [mode, message] : cases) {
    CAPTURE(mode);
    std::string error;
    try {
      simulate(dir, busy_experiment(provisional_queue(mode)));
    } catch (const std::exception& e) {
      error = e.what();
    }
    CAPTURE(error);
    CHECK(error.find(message) != std::string::npos);
  }
}

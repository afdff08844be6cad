// Fixes found reviewing the merges since cbb9365, one test case each; each
// fails without its fix. The Slurm executor's runs against a real Slurm are
// in tests/python/test_serve_slurm.py.
#include <doctest/doctest.h>

#include <chrono>

#include "common/program.hpp"
#include "slurm_executor.hpp"
#include "support.hpp"

using namespace tessel;
using tessel::test::TempDir;

TEST_CASE("run_command kills a program that runs past its time limit") {
  // The Slurm executor's commands run on one worker: an sbatch or scontrol
  // that hangs (a controller that does not answer) held every later order,
  // and the daemon's exit, behind it.
  TempDir dir;
  const auto started = std::chrono::steady_clock::now();
  const CommandResult hung = run_command({"sleep", "30"}, dir.path(), 0.3);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(took < 10);
  CHECK(hung.status == -1);
  CHECK(hung.err.find("sleep did not answer within 0.3 s: killed") != std::string::npos);
  // Within the limit, the program's own status and output; no limit: as before.
  const CommandResult quick = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, dir.path(), 10);
  CHECK(quick.status == 3);
  CHECK(quick.out == "out\n");
  CHECK(quick.err == "err\n");
  CHECK(run_command({"true"}, dir.path()).status == 0);
  // Its output files are gone, killed or not.
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("a Slurm job ends only in one of Slurm's end states") {
  using cluster::slurm_job_ended;
  for (const char* ended :
       {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
        "OUT_OF_MEMORY"})
    CHECK_MESSAGE(slurm_job_ended(ended), ended);
  // States whose processes may still run, or run again: the executor took
  // these (all but the first row) for ended and reported the ranks' exits,
  // so the daemon handed on GPUs the job still held.
  for (const char* running :
       {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING",
        "STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "RESV_DEL_HOLD", "POWER_UP_NODE",
        "UPDATE_DB", "LAUNCH_FAILED", "SOME_FUTURE_STATE"})
    CHECK_MESSAGE(!slurm_job_ended(running), running);
}

TEST_CASE("sbatch --parsable's answer is read by one function, for sweeps and the Slurm executor") {
  CHECK(parsable_job_id("412\n") == "412");
  CHECK(parsable_job_id("412;tessel\n") == "412");
  CHECK_FALSE(parsable_job_id("").has_value());
  CHECK_FALSE(parsable_job_id("sbatch: error: Batch job submission failed\n").has_value());
  CHECK_FALSE(parsable_job_id(";tessel").has_value());
}

// The Slurm executor's reading of Slurm's answers: `scontrol show ... -o`
// lines and a node's Gres=. The executor's runs against a real Slurm
// (launch, preemption, an outside scancel, a restart) are in
// tests/python/test_serve_slurm.py, which skips cleanly without one.
#include <doctest/doctest.h>

#include "slurm_executor.hpp"

using namespace tessel::cluster;

TEST_CASE("scontrol's one-line records are read field by field") {
  auto fields = scontrol_fields(
      "JobId=412 JobName=tessel-410def0cr1-l7 UserId=root(0) JobState=CANCELLED Reason=None ExitCode=0:15 "
      "Comment=j3;vm=0,1;vm2=2 NodeList=vm");
  CHECK(fields["JobId"] == "412");
  CHECK(fields["JobName"] == "tessel-410def0cr1-l7");
  CHECK(fields["JobState"] == "CANCELLED");
  CHECK(fields["ExitCode"] == "0:15");
  CHECK(fields["Comment"] == "j3;vm=0,1;vm2=2");
  CHECK(fields["UserId"] == "root(0)");
  // Fields are split at spaces (tessel's names and comments have none); a word without '=' is none.
  fields = scontrol_fields("Command=/bin/env A=b  stray OverSubscribe=OK");
  CHECK(fields["Command"] == "/bin/env");
  CHECK(fields["A"] == "b");
  CHECK(fields["OverSubscribe"] == "OK");
  CHECK_FALSE(fields.contains("stray"));
  CHECK(scontrol_fields("No jobs in the system").empty());
}

TEST_CASE("a node's GPUs come from its Gres, typed or not") {
  using Gpus = std::optional<std::pair<int, std::string>>;
  CHECK(gres_gpus("gpu:4") == Gpus{{4, "gpu"}});
  CHECK(gres_gpus("gpu:v100:8(S:0-1)") == Gpus{{8, "v100"}});
  CHECK(gres_gpus("shard:8,gpu:a100:2") == Gpus{{2, "a100"}});
  CHECK(gres_gpus("gpu:4(S:0)") == Gpus{{4, "gpu"}});
  // No GPU: none, none counted, another kind of GRES, nonsense.
  CHECK_FALSE(gres_gpus("(null)"));
  CHECK_FALSE(gres_gpus(""));
  CHECK_FALSE(gres_gpus("gpu:0"));
  CHECK_FALSE(gres_gpus("mps:100"));
  CHECK_FALSE(gres_gpus("gpu:many"));
  CHECK_FALSE(gres_gpus("gpu:a:b:4"));
}

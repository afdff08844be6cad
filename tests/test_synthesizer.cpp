// The synthesizer: what-if simulations through the lab choose the policy.
#include <doctest/doctest.h>

#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// One node of 4 GPUs. A long 4-GPU job arrives first, then eight short
// 1-GPU jobs: SRTF lets the short ones pass, FIFO makes them wait.
const char* kTrace =
    "arrival,gpus,duration\n"
    "0,4,20000\n"
    "100,1,300\n100,1,300\n100,1,300\n100,1,300\n"
    "200,1,600\n200,1,600\n200,1,600\n200,1,600\n";

std::string experiment(const std::string& allocation, const std::string& admission = "{ plugin = \"accept_all\" }") {
  return R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "csv"
path = "trace.csv"
[scheduler]
round_seconds = 100
admission = )" + admission + R"(
allocation = )" + allocation + R"(
placement = { plugin = "first_fit" }
[output]
decisions = true
)";
}

std::vector<double> finishes(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(-1));
  return out;
}

}  // namespace

TEST_CASE("the synthesizer picks the candidate its forecasts favour, and runs exactly like it") {
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const RunResults srtf = simulate(dir, experiment(R"({ plugin = "srtf" })"));
  const RunResults fifo = simulate(dir, experiment(R"({ plugin = "fifo" })"));
  REQUIRE(finishes(srtf) != finishes(fifo));

  // SRTF first: whenever the forecasts tie, the synthesizer keeps it.
  const RunResults chosen = simulate(dir, experiment(R"({ plugin = "synthesizer", every_rounds = 1, horizon_seconds = 100000, )"
                                              R"(candidates = ["accept_all + srtf", "accept_all + fifo"] })"));
  CHECK(finishes(chosen) == finishes(srtf));
  // The delegate's reasons are what users see.
  bool srtf_reason = false;
  for (const DecisionRecord& d : chosen.decisions)
    srtf_reason = srtf_reason || (d.plugin == "synthesizer" && d.code == "grant" &&
                                  d.reason.find("remaining") != std::string::npos);
  CHECK(srtf_reason);

  // Listed second, SRTF still wins on its forecast.
  const RunResults reordered = simulate(dir, experiment(R"({ plugin = "synthesizer", every_rounds = 1, horizon_seconds = 100000, )"
                                              R"(candidates = ["accept_all + fifo", "accept_all + srtf"] })"));
  double mean_reordered = 0, mean_fifo = 0;
  for (std::size_t i = 0; i < reordered.jobs.size(); ++i) {
    mean_reordered += *reordered.jobs[i].finish - reordered.jobs[i].arrival;
    mean_fifo += *fifo.jobs[i].finish - fifo.jobs[i].arrival;
  }
  CHECK(mean_reordered < mean_fifo);
}

TEST_CASE("the synthesizer switches admission too") {
  // The run starts with an admission that rejects every job beyond one
  // waiting. Candidate 1 keeps it; its forecast counts the rejected jobs'
  // time to the horizon's end, far beyond when accept_all would finish them:
  // the synthesizer switches to accept_all before the short jobs arrive, and
  // nobody is rejected.
  TempDir dir;
  dir.write("trace.csv", kTrace);
  const std::string strict = R"({ plugin = "max_queue", max_waiting = 1 })";
  const RunResults alone = simulate(dir, experiment(R"({ plugin = "fifo" })", strict));
  std::size_t rejected = 0;
  for (const JobRecord& job : alone.jobs) rejected += job.status == "rejected";
  REQUIRE(rejected > 0);

  const RunResults results = simulate(dir, experiment(R"({ plugin = "synthesizer", every_rounds = 1, )"
                                                      R"(horizon_seconds = 100000, candidates = )"
                                                      R"(["max_queue { max_waiting = 1 } + fifo", "accept_all + fifo"] })",
                                                      strict));
  for (const JobRecord& job : results.jobs) CHECK(job.status == "finished");
  bool admitted_by_accept_all = false;
  for (const DecisionRecord& d : results.decisions)
    admitted_by_accept_all = admitted_by_accept_all || (d.code == "admit" && d.plugin == "accept_all");
  CHECK(admitted_by_accept_all);
}

TEST_CASE("a candidate the lab cannot create is the user's error") {
  TempDir dir;
  dir.write("trace.csv", kTrace);
  dir.write("bad.toml", experiment(R"({ plugin = "synthesizer", candidates = ["accept_all + lass"] })"));
  const auto result = run_tessel({"run", "bad.toml", "-q"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.starts_with("policy 'lass': unknown allocation plugin 'lass' (valid: "));
  CHECK(run_tessel({"validate", "bad.toml"}, dir.path()).code == 0);  // caught only when it runs

  dir.write("worse.toml", experiment(R"({ plugin = "synthesizer", candidates = ["fifo"] })"));
  const auto worse = run_tessel({"validate", "worse.toml"}, dir.path());
  CHECK(worse.code == 2);
  CHECK(worse.err.find("argument 'candidates' of allocation plugin 'synthesizer': 'fifo' is not \"admission + "
                       "allocation\"") != std::string::npos);
}

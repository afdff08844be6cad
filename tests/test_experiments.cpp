// Every experiment in experiments/ runs, reduced, in CI: the same files the
// READMEs tell users to run, with --set overrides that make them small.
// Full runs are not tests; their figures are in each experiment's README.
#include <doctest/doctest.h>

#include "results/sqlite.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

struct Experiment {
  const char* file;                     // under experiments/
  std::vector<std::string> smoke;       // --set overrides for a quick run
  std::vector<std::string> needs_data;  // files under ../shared/data it reads
  bool jobs_end = true;                 // false: jobs never leave; some must hold GPUs at the end
};

const Experiment kExperiments[] = {
    {"quickstart.toml", {"workload.jobs=60"}, {}},
    // Three policies at 2 and 9 jobs/h, 120 jobs of which the middle 40 count.
    {"blox-fig6-7/blox-fig6-7.toml",
     {"workload.jobs=120", "workload.track=[40,80]", "sweep.seeds=[1]", R"(sweep."workload.jobs_per_hour"=[2,9])",
      R"(sweep."scheduler.allocation.plugin"=["fifo","las","optimus"])"},
     {}},
    {"blox-fig12-13/fig12.toml",
     {"workload.jobs=120", "workload.track=[40,80]", "sweep.seeds=[1]",
      R"(sweep."scheduler.admission"=[{ plugin = "accept_all" }, { plugin = "load_based", factor = 1.2 }])"},
     {}},
    // The bursty trace ships with the experiment; the first 300 jobs of one.
    {"blox-fig12-13/fig13.toml",
     {"workload.max_jobs=300", "workload.track=[100,200]", R"(sweep."workload.path"=["bursty-8jph-seed1.csv"])",
      R"(sweep."scheduler.admission"=[{ plugin = "accept_all" }, { plugin = "load_based", factor = 1.2 }])"},
     {}},
    {"tiresias/tiresias.toml",
     {"workload.max_jobs=20"},
     {"tiresias/60_job.csv", "tiresias/n32g4.csv", "tiresias/yarn-gput1000.csv"}},
    {"philly-replay/philly-replay.toml", {"workload.max_jobs=2000"}, {"pollux/philly.csv"}},
    // 30 jobs at time 0, one seed: FIFO, FIFO fastest-type and Gavel; then FIFO as Gavel's code ran it.
    {"gavel-makespan/gavel-makespan.toml",
     {R"(sweep."workload.jobs"=[30])", "sweep.seeds=[1]"},
     {"gavel/simulation_throughputs.json"}},
    {"gavel-makespan/fifo-as-run.toml",
     {R"(sweep."workload.jobs"=[30])", "sweep.seeds=[1]"},
     {"gavel/simulation_throughputs.json"}},
    // 300 jobs at 8 jobs/h, the middle 100 tracked: both GPU mixes, four policies.
    {"synergy/synergy.toml",
     {"workload.jobs=300", "workload.track=[100,200]", R"(sweep."workload.jobs_per_hour"=[8])", "sweep.seeds=[1]"},
     {"synergy/model_sensitivity.csv"}},
    // The nine static pairs and the synthesizers, 200 jobs at 8 jobs/h, one seed.
    {"blox-synthesizer/poisson.toml",
     {"workload.jobs=200", "workload.track=[50,150]", R"(sweep."workload.jobs_per_hour"=[8])", "sweep.seeds=[1]"},
     {}},
    {"blox-synthesizer/bursty.toml",
     {"workload.max_jobs=300", "workload.track=[100,200]",
      R"(sweep."workload.path"=["../blox-fig12-13/bursty-8jph-seed1.csv"])"},
     {}},
    {"blox-synthesizer/forecast-rules.toml", {"workload.jobs=200", "workload.track=[50,150]", "sweep.seeds=[1]"}, {}},
    // One workload at load 1.0, the three policies.
    {"pollux-jobload/pollux-jobload.toml",
     {R"(sweep."workload.path"=["../../../shared/data/pollux/workloads/workload-1.csv"])",
      R"(sweep."workload.arrival_rate_scale"=[1.0])"},
     {"pollux/workloads/workload-1.csv"}},
    {"tenplex/tenplex.toml", {"sweep.seeds=[1]"}, {}},
    {"tenplex/fig9.toml", {}, {}},
    // Every policy, one seed, the pods resampled down to a quarter of the GPUs.
    {"fgd/fgd.toml",
     {"sweep.seeds=[42]", "workload.gpu_demand_ratio=0.25"},
     {"alibaba-openb/openb_pod_list_default.csv", "alibaba-openb/openb_node_list_gpu_node.csv"},
     false},
};

}  // namespace

TEST_CASE("every experiment runs, reduced") {
  for (const Experiment& experiment : kExperiments) {
    CAPTURE(experiment.file);
    bool data_present = true;
    for (const std::string& file : experiment.needs_data) data_present = data_present && shared_data(file).has_value();
    if (!data_present) {
      MESSAGE("skipped " << experiment.file << ": ../shared/data is not there");
      continue;
    }
    TempDir dir;
    std::vector<std::string> args{"run", (source_root() / "experiments" / experiment.file).string(), "--db",
                                  "smoke.db", "-q", "-j", "2"};
    for (const std::string& override_text : experiment.smoke) {
      args.push_back("--set");
      args.push_back(override_text);
    }
    const auto result = run_tessel(args, dir.path());
    REQUIRE_MESSAGE(result.code == 0, result.err);
    const fs::path db = dir.path() / "smoke.db";
    CHECK(count(db, "SELECT count(*) FROM runs") > 0);
    CHECK(count(db, "SELECT count(*) FROM runs WHERE status != 'complete'") == 0);
    if (experiment.jobs_end)
      CHECK(count(db, "SELECT count(*) FROM jobs WHERE status = 'finished'") > 0);
    else
      CHECK(count(db, "SELECT count(*) FROM jobs WHERE held_gpus > 0") > 0);
  }
}

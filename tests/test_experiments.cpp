// Every experiment in experiments/ runs, reduced, in CI: the same files the
// READMEs tell users to run, with --set overrides that make them small.
// Full runs are not tests; their figures are in each experiment's README.
//
// The reduced runs' figures are golden: tests/golden/experiments.csv pins
// them, so a change that moves a reproduction fails here. When a move is
// intended, rerun with TESSEL_UPDATE_GOLDEN=1 (it rewrites the file) and say
// why in the commit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

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
    // Three policies at 2 and 9 jobs/h, jobs 40..79 tracked, giving up 100 h after the last of them arrived.
    {"blox-fig6-7/blox-fig6-7.toml",
     {"workload.track=[40,80]", "workload.give_up_hours=100", "sweep.seeds=[1]",
      R"(sweep."workload.jobs_per_hour"=[2,9])", R"(sweep."scheduler.allocation.plugin"=["fifo","las","optimus"])"},
     {}},
    {"blox-fig12-13/fig12.toml",
     {"workload.track=[40,80]", "workload.give_up_hours=100", "sweep.seeds=[1]",
      R"(sweep."scheduler.admission"=[{ plugin = "accept_all" }, { plugin = "load_based", factor = 1.2 }])"},
     {}},
    // The bursty stream, jobs 100..199 tracked, giving up 100 h after the last of them arrived.
    {"blox-fig12-13/fig13.toml",
     {"workload.track=[100,200]", "workload.give_up_hours=100", "sweep.seeds=[1]",
      R"(sweep."scheduler.admission"=[{ plugin = "accept_all" }, { plugin = "load_based", factor = 1.2 }])"},
     {}},
    {"tiresias/tiresias.toml",
     {"workload.max_jobs=20"},
     {"tiresias/60_job.csv", "tiresias/n32g4.csv", "tiresias/yarn-gput1000.csv"}},
    // The 480 jobs on 60 GPUs, whole: eight runs of a few seconds in all.
    {"tiresias/testbed.toml", {}, {"pollux/philly.csv", "tiresias/yarn-gput1000.csv"}},
    // The first 2,000 Philly jobs at 5x on 8 of the 256 nodes, so that they queue; all six policies.
    {"tiresias/production.toml",
     {"workload.max_jobs=2000", "cluster.nodes=8", R"(sweep."workload.arrival_rate_scale"=[5])"},
     {"pollux/philly.csv", "tiresias/yarn-gput1000.csv"}},
    {"philly-replay/philly-replay.toml", {"workload.max_jobs=2000"}, {"pollux/philly.csv"}},
    // 30 jobs at time 0, one seed: FIFO, FIFO fastest-type and Gavel; then FIFO as Gavel's code ran it.
    {"gavel-makespan/gavel-makespan.toml",
     {R"(sweep."workload.jobs"=[30])", "sweep.seeds=[1]"},
     {"gavel/simulation_throughputs.json"}},
    {"gavel-makespan/fifo-as-run.toml",
     {R"(sweep."workload.jobs"=[30])", "sweep.seeds=[1]"},
     {"gavel/simulation_throughputs.json"}},
    // Gavel with and without space sharing: 50 jobs at time 0 on one node of 4 GPUs of each type, full
    // enough that pairs run; one seed.
    {"gavel-makespan/gavel-ss.toml",
     {R"(cluster={ groups = [{ count = 1, gpus_per_node = 4, gpu_type = "v100" }, { count = 1, gpus_per_node = 4, gpu_type = "p100" }, { count = 1, gpus_per_node = 4, gpu_type = "k80" }] })",
      R"(sweep."workload.jobs"=[50])", "sweep.seeds=[1]"},
     {"gavel/simulation_throughputs.json"}},
    // Gavel's FIFO_Perf rule by rule: 30 jobs at time 0, one seed.
    {"gavel-makespan/fifo-perf-100.toml", {"workload.jobs=30", "sweep.seeds=[1]"}, {"gavel/simulation_throughputs.json"}},
    // 300 jobs at 8 jobs/h, the middle 100 tracked: both GPU mixes, four policies.
    {"synergy/synergy.toml",
     {"workload.jobs=300", "workload.track=[100,200]", R"(sweep."workload.jobs_per_hour"=[8])", "sweep.seeds=[1]"},
     {"synergy/model_sensitivity.csv"}},
    // The ae-readme point under Synergy's simulator rules: 300 jobs at 9 jobs/h, the middle 100 tracked.
    {"synergy/artifact.toml",
     {"workload.jobs=300", "workload.track=[100,200]", "sweep.seeds=[1]"},
     {"synergy/model_sensitivity.csv"}},
    // The same rules on Synergy's own jobs for its seed 42: 300 jobs, the middle 100 tracked.
    {"synergy/artifact-jobs.toml", {"workload.jobs=300", "workload.track=[100,200]"}, {"synergy/model_sensitivity.csv"}},
    // Fig. 8's set-up on those jobs and rules, FIFO, LAS and SRTF each proportional and TUNE: 300 jobs at
    // 9 jobs/h, the middle 100 tracked.
    {"synergy/fig8.toml",
     {"workload.jobs=300", "workload.track=[100,200]", R"(sweep."workload.jobs_per_hour"=[9])"},
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
    {"tenplex/fig9-plot.toml", {}, {}},
    // Every policy, one seed, the pods resampled down to a quarter of the GPUs.
    {"fgd/fgd.toml",
     {"sweep.seeds=[42]", "workload.gpu_demand_ratio=0.25"},
     {"alibaba-openb/openb_pod_list_default.csv", "alibaba-openb/openb_node_list_gpu_node.csv"},
     false},
};

const fs::path kGolden = source_root() / "tests" / "golden" / "experiments.csv";

// `report --format csv` of a run database, as golden rows keyed by the
// experiment, label and axes (run ids follow the order runs finish in).
std::map<std::string, std::string> golden_rows(const std::string& experiment, const fs::path& dir) {
  const auto report = run_tessel({"report", "smoke.db", "--format", "csv"}, dir);
  REQUIRE_MESSAGE(report.code == 0, report.err);
  std::istringstream lines(report.out);
  std::string header, line;
  std::getline(lines, header);
  // run,label[,axes],status,figures...: a run without a sweep has no axes.
  const bool has_axes = header.starts_with("run,label,axes,status,");
  REQUIRE((has_axes || header.starts_with("run,label,status,")));
  const std::size_t first_figure = has_axes ? 4 : 3;
  std::map<std::string, std::string> rows;
  while (std::getline(lines, line)) {
    // Label and axes may be quoted.
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) {
        fields.push_back(field);
        field.clear();
      } else {
        field += c;
      }
    }
    fields.push_back(field);
    std::string figures;
    for (std::size_t i = first_figure; i < fields.size(); ++i) figures += (i > first_figure ? "," : "") + fields[i];
    const std::string key = experiment + "," + fields[1] + "," + (has_axes ? fields[2] : "");
    CHECK_MESSAGE(!rows.contains(key), "two runs share the golden key " << key);
    rows[key] = figures;
  }
  return rows;
}

// Whether two rows of figures agree to the last digit `report` prints: a
// value may differ by one unit there, so that a last-bit difference in the
// floating point (another compiler, another libm) cannot flip a rounding.
bool same_figures(const std::string& measured, const std::string& pinned) {
  std::istringstream a(measured), b(pinned);
  std::string x, y;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, x, ','));
    const bool more_b = static_cast<bool>(std::getline(b, y, ','));
    if (more_a != more_b) return false;
    if (!more_a) return true;
    if (x.empty() || y.empty()) {  // a figure over no jobs has no value
      if (x != y) return false;
      continue;
    }
    const std::size_t point = y.find('.');
    const double unit = point == std::string::npos ? 1 : std::pow(10.0, -static_cast<double>(y.size() - point - 1));
    if (std::abs(std::stod(x) - std::stod(y)) > 1.5 * unit) return false;
  }
}

std::map<std::string, std::string> read_golden() {
  std::map<std::string, std::string> rows;
  std::ifstream in(kGolden);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    // The key has three fields, which may hold quoted commas; the figures none.
    const std::size_t split = line.find_last_of(';');
    if (split != std::string::npos) rows[line.substr(0, split)] = line.substr(split + 1);
  }
  return rows;
}

}  // namespace

TEST_CASE("every experiment runs, reduced, and its figures are the golden ones") {
  const char* update_variable = std::getenv("TESSEL_UPDATE_GOLDEN");
  const bool update = update_variable != nullptr && std::string(update_variable) == "1";
  const std::map<std::string, std::string> golden = read_golden();
  REQUIRE_MESSAGE((update || !golden.empty()), "no golden figures in " << kGolden.string());
  std::map<std::string, std::string> measured;
  for (const Experiment& experiment : kExperiments) {
    const std::string file = experiment.file;
    CAPTURE(file);
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
    const std::map<std::string, std::string> rows = golden_rows(experiment.file, dir.path());
    for (auto& [key, figures] : rows) {
      measured[key] = figures;
      const auto pinned = golden.find(key);
      if (pinned == golden.end()) {
        if (!update) FAIL_CHECK("no golden figures for " << key);
        continue;
      }
      CAPTURE(key);
      CHECK_MESSAGE(same_figures(figures, pinned->second),
                    "figures moved; if intended, rerun with TESSEL_UPDATE_GOLDEN=1 and say why in the commit");
    }
    // A pinned row the run no longer gives (a sweep point dropped) is a move too.
    if (!update)
      for (const auto& [key, figures] : golden)
        if (key.starts_with(std::string(experiment.file) + ",") && !rows.contains(key))
          FAIL_CHECK("the golden row " << key << " is no longer produced");
  }
  if (update) {
    // Keep the rows of experiments whose data is absent here.
    std::map<std::string, std::string> rows = golden;
    for (const auto& [key, figures] : measured) rows[key] = figures;
    std::ofstream out(kGolden);
    out << "experiment,label,axes;figures as `report --format csv` prints them, from jobs on\n";
    for (const auto& [key, figures] : rows) out << key << ';' << figures << '\n';
    MESSAGE("wrote " << rows.size() << " golden rows to " << kGolden.string());
  }
}

// Reading experiments: every problem is reported, located, at once.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"

using namespace tessel;

namespace {

const char* kGood = R"(
[cluster]
nodes = 2
gpus_per_node = 4

[workload]
kind = "synthetic"
jobs = 10

[scheduler]
allocation = { plugin = "fifo", backfill = true }
placement = { plugin = "first_fit" }
)";

std::vector<std::string> problems(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    load_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(text, "x.toml", overrides)));
  } catch (const ConfigError& e) {
    std::vector<std::string> lines;
    for (const auto& d : e.diagnostics()) lines.push_back(d.str());
    return lines;
  }
  return {};
}

}  // namespace

TEST_CASE("a good experiment reads into typed settings") {
  const auto config = read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(kGood, "x.toml")));
  CHECK(config.cluster.nodes.size() == 2);
  CHECK(config.cluster.nodes[1].gpus == 4);
  CHECK(config.scheduler.settings.round_seconds == 300);
  CHECK(config.scheduler.stage(PluginKind::admission).plugin == "accept_all");
  CHECK(config.scheduler.stage(PluginKind::allocation).plugin == "fifo");
  CHECK(config.scheduler.stage(PluginKind::allocation).args.get("backfill")->value_or(false) == true);
  CHECK(config.scheduler.stage(PluginKind::elasticity).plugin == "none");
  CHECK(config.workload.kind == "synthetic");
  CHECK_FALSE(config.simulation.completion_at_round_end);
  CHECK(config.output.database == "results.db");
}

TEST_CASE("every problem is reported with file, line and column") {
  const auto found = problems(R"([cluster]
nodes = "two"
gpus_per_node = -4
colour = "red"

[workload]
kind = "synthetic"
jobs = 0

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }

[simulation]
completion = "sometimes"

[outptu]
database = "x.db"
)");
  REQUIRE(found.size() == 6);
  CHECK(found[0] == "x.toml:2:9: 'nodes' in [cluster] must be an integer, got a string");
  CHECK(found[1] == "x.toml:3:17: 'gpus_per_node' in [cluster] must be in 1..1024, got -4");
  CHECK(found[2] ==
        "x.toml:4:1: unknown key 'colour' in [cluster] (valid: cpus_per_node, events, gpu_mem_gb, gpu_type, gpus_per_node, "
        "mem_gb_per_node, nodes, nodes_per_rack)");
  CHECK(found[3] == "x.toml:15:14: unknown completion 'sometimes' in [simulation] (valid: exact, round, exact-held)");
  CHECK(found[4] ==
        "x.toml:17:2: unknown key 'outptu' at the top level (valid: cluster, failures, output, scheduler, serve, "
        "simulation, sweep, workload)");
  // The kind's own keys are checked after the file is read, into the same report.
  CHECK(found[5] == "x.toml:8:8: 'jobs' in [workload] must be in 1..100000000, got 0");
}

TEST_CASE("[simulation] rounds: on a clock or at events; events have no round ends for completions") {
  const std::string base = R"([cluster]
nodes = 1
gpus_per_node = 4

[workload]
kind = "synthetic"

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }

[simulation]
)";
  auto read = [&](const std::string& simulation) {
    return read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(base + simulation, "x.toml")));
  };
  CHECK_FALSE(read("").simulation.event_rounds);
  CHECK(read("rounds = \"events\"\n").simulation.event_rounds);
  std::vector<std::string> found = problems(base + "rounds = \"hourly\"\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "x.toml:13:10: unknown rounds 'hourly' in [simulation] (valid: clock, events)");
  found = problems(base + "rounds = \"events\"\ncompletion = \"round\"\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "x.toml:14:14: 'completion = \"round\"' needs rounds on a clock; with 'rounds = \"events\"' use "
                    "'completion = \"exact\"'");
}

TEST_CASE("missing sections and keys are named") {
  const auto found = problems("[cluster]\nnodes = 2\n");
  REQUIRE(found.size() == 4);
  CHECK(found[0] == "x.toml:1:1: [cluster] is missing required key 'gpus_per_node'");
  CHECK(found[1] == "x.toml: missing [workload] with required key 'kind'");
  CHECK(found[2] == "x.toml: [scheduler] needs 'allocation = { plugin = \"...\" }'");
  CHECK(found[3] == "x.toml: [scheduler] needs 'placement = { plugin = \"...\" }'");
}

TEST_CASE("a syntax error stops at its position") {
  const auto found = problems("[cluster\nnodes = 2\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0].starts_with("x.toml:1:9: "));
}

TEST_CASE("--set overrides any key, and its errors point at the override") {
  const auto config = read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(
      kGood, "x.toml",
      {"workload.seed=7", "scheduler.allocation.plugin=las", "output.label=run one", "workload.track=[2,5]"})));
  CHECK(config.workload.seed == 7);
  CHECK(config.scheduler.stage(PluginKind::allocation).plugin == "las");
  CHECK(config.output.label == "run one");
  REQUIRE(config.workload.track.has_value());
  CHECK(config.workload.track->first == 2);

  const auto found = problems(kGood, {"cluster.nodes=-1", "cluster.gpus_per_node.x=1", "noequals"});
  REQUIRE(found.size() == 2);
  CHECK(found[0] == "--set cluster.gpus_per_node.x=1: 'gpus_per_node' is an integer, not a table");
  CHECK(found[1] == "--set noequals: expected key=value, e.g. --set workload.seed=7");
  const auto range = problems(kGood, {"cluster.nodes=-1"});
  REQUIRE(range.size() == 1);
  CHECK(range[0] == "--set cluster.nodes=-1: 'nodes' in [cluster] must be in 1..1000000, got -1");
}

// Each was once resolved silently: an empty segment skipped, the last of
// two --set kept, and a table the --set alone names blamed on the file.
TEST_CASE("--set refuses empty key segments and a key given twice, and owns the tables it adds") {
  const auto found = problems(kGood, {"cluster..nodes=3", "workload.seed=5", "workload.seed=7",
                                      "scheduler.allocation={ plugin = \"las\" }", "scheduler.allocation.plugin=fifo"});
  REQUIRE(found.size() == 3);
  CHECK(found[0] == "--set cluster..nodes=3: empty key segment");
  CHECK(found[1] == "--set workload.seed=7: sets what --set workload.seed=5 sets: give each key once");
  CHECK(found[2] == "--set scheduler.allocation.plugin=fifo: sets what --set scheduler.allocation={ plugin = \"las\" } "
                    "sets: give each key once");
  const auto unknown = problems(kGood, {"nosuch.key=1"});
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0].starts_with("--set nosuch.key=1: unknown key 'nosuch' at the top level (valid: "));
}

TEST_CASE("an elastic range whose maximum is below its minimum is refused") {
  const auto found = problems(kGood, {"workload.elastic_min_gpus=9", "workload.elastic_max_gpus=2"});
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "--set workload.elastic_max_gpus=2: 'elastic_max_gpus' (2) in [workload] is below "
                    "'elastic_min_gpus' (9)");
}

TEST_CASE("the synthetic workload checks its own keys") {
  const auto found = problems(std::string(kGood) + "", {"workload.gpu_weights=[1,1]", "workload.short_log10_minutes=[3,1]"});
  REQUIRE(found.size() == 2);
  CHECK(found[0] == "--set workload.gpu_weights=[1,1]: 'gpu_weights' in [workload] needs one positive-summing "
                    "weight per entry of 'gpu_counts' (4)");
  CHECK(found[1] == "--set workload.short_log10_minutes=[3,1]: 'short_log10_minutes' in [workload] must be "
                    "[low, high] with low <= high");
}

TEST_CASE("unknown workload kinds and models list the valid ones") {
  const auto found = problems(kGood, {"workload.kind=philly", "workload.model=exponential"});
  REQUIRE(found.size() == 2);
  CHECK(found[0] == "--set workload.kind=philly: unknown kind 'philly' in [workload] (valid: synthetic, csv, "
                    "pollux-csv, pollux-workload, gavel-trace, tiresias-csv, openb, philly-json, synergy)");
  CHECK(found[1] == "--set workload.model=exponential: unknown throughput model 'exponential' (valid: linear, amdahl, "
                    "gavel-table, placement-penalty, pollux-apps, synergy-sensitivity, parallel-3d)");
}

// An empty name is a name the user wrote, not a problem already reported:
// it once went unchecked, and building the workload dereferenced no model.
TEST_CASE("an empty workload kind or model name is unknown") {
  const auto found = problems(kGood, {"workload.kind=\"\"", "workload.model={ name = \"\" }"});
  REQUIRE(found.size() == 2);
  CHECK(found[0].starts_with("--set workload.kind=\"\": unknown kind '' in [workload] (valid: synthetic, "));
  CHECK(found[1].starts_with("--set workload.model={ name = \"\" }: unknown throughput model '' (valid: linear, "));
}

TEST_CASE("reading builds nothing: a kind's keys and a model are checked by the loader") {
  const std::string text = R"([cluster]
nodes = 1
gpus_per_node = 4

[workload]
kind = "csv"
path = "missing.csv"
model = { name = "gavel-table", path = "missing.json" }
colour = "red"

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
  // Plain settings: no model file opened, the kind's keys left for workloads/.
  const auto config = read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(text, "x.toml")));
  CHECK(config.workload.kind == "csv");
  CHECK(config.workload.model.name == "gavel-table");
  REQUIRE(config.workload.options.table != nullptr);
  CHECK(config.workload.options.table->contains("path"));

  // The loader has them checked, located; the trace itself is read only when a run starts.
  const auto found = problems(text);
  REQUIRE(found.size() == 2);
  CHECK(found[0].starts_with("x.toml:8:40: cannot read Gavel throughputs '"));
  CHECK(found[0].ends_with("missing.json': cannot open: No such file or directory"));
  CHECK(found[1].starts_with("x.toml:9:1: unknown key 'colour' in [workload] (valid: "));
  CHECK(found[1].find(" path,") != std::string::npos);  // the kind's key
  CHECK(found[1].find(" seed,") != std::string::npos);  // one config read
}

TEST_CASE("the rooms include one another one way: config <- models <- workloads") {
  // What each room must not include: the rooms that build on it.
  const std::map<std::string, std::vector<std::string>> must_not_include = {
      {"common", {"config", "models", "workloads"}},
      {"config", {"models", "workloads"}},
      {"models", {"workloads"}},
  };
  const std::regex include(R"(^\s*#\s*include\s*["<](\w+)/)");
  for (const auto& [room, later] : must_not_include) {
    std::size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(test::source_root() / "core" / "src" / room)) {
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      std::smatch match;
      for (int number = 1; std::getline(in, line); ++number)
        if (std::regex_search(line, match, include) &&
            std::find(later.begin(), later.end(), match[1].str()) != later.end())
          FAIL_CHECK(entry.path().string() << ":" << number << ": " << line);
    }
    CHECK_MESSAGE(files > 0, "no files in core/src/" << room);
  }
}

TEST_CASE("Synergy's simulator rules: unknown values and contradictory settings are named") {
  // Each override lands at the end of the section; the messages name the key.
  const auto unknown = problems(std::string(kGood) + "\n[simulation]\nprogress = \"steps\"\n",
                                {"scheduler.left_out=\"drop\""});
  REQUIRE(unknown.size() == 2);
  CHECK(unknown[0] == "--set scheduler.left_out=\"drop\": unknown left_out 'drop' in [scheduler] (valid: keep, stop)");
  CHECK(unknown[1] ==
        "x.toml:15:12: unknown progress 'steps' in [simulation] (valid: continuous, whole_iterations)");

  const auto contradictory = problems(std::string(kGood) + "\n[simulation]\nprogress = \"whole_iterations\"\n",
                                      {"scheduler.placement_each_round=\"every_round\""});
  REQUIRE(contradictory.size() == 2);
  CHECK(contradictory[0] ==
        "--set scheduler.placement_each_round=\"every_round\": 'placement_each_round = \"every_round\"' in "
        "[scheduler] needs 'left_out = \"stop\"': a job the plan leaves out holds nothing once every job gives "
        "up its place");
  CHECK(contradictory[1] ==
        "x.toml:15:12: 'progress = \"whole_iterations\"' in [simulation] needs 'completion = \"round\"'");

  const auto config = read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(
      std::string(kGood) + "\n[simulation]\ncompletion = \"round\"\nprogress = \"whole_iterations\"\n", "x.toml",
      {"scheduler.left_out=\"stop\"", "scheduler.placement_each_round=\"every_round\""})));
  CHECK(config.simulation.whole_iterations);
  CHECK(config.scheduler.rules.stop_left_out);
  CHECK(config.scheduler.rules.place_every_round);
  const auto defaults = read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(kGood, "x.toml")));
  CHECK_FALSE(defaults.simulation.whole_iterations);
  CHECK_FALSE(defaults.scheduler.rules.stop_left_out);
  CHECK_FALSE(defaults.scheduler.rules.place_every_round);
}

TEST_CASE("tessel serve refuses the simulated round's rules, named") {
  tessel::test::TempDir dir;
  const std::filesystem::path file = dir.write("serve.toml", "[scheduler]\nleft_out = \"stop\"\nplacement_each_round = \"every_round\"\n"
                                                "allocation = { plugin = \"fifo\" }\nplacement = { plugin = \"first_fit\" }\n");
  std::vector<std::string> found;
  try {
    load_served_experiment(file);
  } catch (const ConfigError& e) {
    for (const auto& d : e.diagnostics()) found.push_back(d.str());
  }
  REQUIRE(found.size() == 2);
  CHECK(found[0] == file.string() + ":2:12: 'left_out = \"stop\"' in [scheduler] applies to simulations; tessel serve "
                                    "keeps running jobs until a ranked job needs their GPUs");
  CHECK(found[1] == file.string() + ":3:24: 'placement_each_round = \"every_round\"' in [scheduler] applies to "
                                    "simulations; tessel serve keeps running jobs where they are");
  dir.write("plain.toml", "[scheduler]\nleft_out = \"keep\"\nallocation = { plugin = \"fifo\" }\n"
                          "placement = { plugin = \"first_fit\" }\n");
  CHECK_NOTHROW(load_served_experiment(dir.path() / "plain.toml"));
}

TEST_CASE("[serve] frame_timeout_seconds and max_buffered_mib: defaults, values, and their bounds") {
  auto read = [&](const std::string& serve) {
    return read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(std::string(kGood) + "[serve]\n" + serve, "x.toml")));
  };
  CHECK(read("").serve.frame_timeout_seconds == 10);
  CHECK(read("").serve.max_buffered_mib == 256);
  CHECK(read("frame_timeout_seconds = 1.5\n").serve.frame_timeout_seconds == 1.5);
  CHECK(read("max_buffered_mib = 64\n").serve.max_buffered_mib == 64);
  std::vector<std::string> found = problems(std::string(kGood) + "[serve]\nframe_timeout_seconds = 0\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0].find("'frame_timeout_seconds' in [serve]") != std::string::npos);
  // Below one largest frame (16 MiB) a legal frame could never arrive.
  found = problems(std::string(kGood) + "[serve]\nmax_buffered_mib = 8\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0].find("'max_buffered_mib' in [serve] must be in 16..") != std::string::npos);
}

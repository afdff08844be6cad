// Plugin arguments that name GPU types (declared with kClusterGpuTypes) are
// checked by the core against the cluster before any plugin exists, so that
// `tessel validate` refuses a type the cluster lacks, as `run` does before
// anything runs.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "support.hpp"

using namespace tessel;

namespace {

// A plugin entry declaring one argument of each kind that can name types.
PluginEntry typed_entry() {
  PluginEntry entry;
  entry.info.kind = PluginKind::allocation;
  std::snprintf(entry.info.name, sizeof entry.info.name, "typed");
  for (auto [name, type, fallback] : {std::tuple{"one", ArgType::string, "\"v100\""},
                                      std::tuple{"many", ArgType::string_list, "[]"},
                                      std::tuple{"costs", ArgType::number_table, "{}"}})
    entry.arguments.push_back(ArgDeclaration{name, type, fallback, "a GPU type", kClusterGpuTypes});
  return entry;
}

std::vector<std::string> errors_of(const std::string& stage_text, const std::vector<std::string>* types) {
  const StageConfig stage = parse_stage(PluginKind::allocation, stage_text);
  Diagnostics diagnostics;
  check_arguments(stage, typed_entry(), "", diagnostics, types);
  std::vector<std::string> out;
  for (const Diagnostic& d : diagnostics.items()) out.push_back(d.message);
  return out;
}

}  // namespace

TEST_CASE("a string, each string of a list and each key of a table declared as GPU types must be the cluster's") {
  const std::vector<std::string> types = {"v100", "k80"};
  CHECK(errors_of(R"(typed { one = "k80", many = ["v100", "k80"], costs = { v100 = 2, k80 = 1 } })", &types).empty());

  const std::string lacks = "which the cluster lacks (its types: v100, k80)";
  for (const auto& [text, named] :
       {std::pair{R"(typed { one = "p100" })", "argument 'one' of allocation plugin 'typed' names GPU type 'p100', "},
        std::pair{R"(typed { many = ["k80", "a100"] })",
                  "argument 'many' of allocation plugin 'typed' names GPU type 'a100', "},
        std::pair{R"(typed { costs = { v100 = 2, t4 = 1 } })",
                  "argument 'costs' of allocation plugin 'typed' names GPU type 't4', "}}) {
    CAPTURE(text);
    const std::vector<std::string> errors = errors_of(text, &types);
    REQUIRE(errors.size() == 1);
    CHECK(errors.front() == std::string(named) + lacks);
  }
  // A default is checked as a written value is: the cluster lacks "v100".
  const std::vector<std::string> other = {"k80"};
  const std::vector<std::string> errors = errors_of("typed", &other);
  REQUIRE(errors.size() == 1);
  CHECK(errors.front().find("names GPU type 'v100'") != std::string::npos);
  // Without a cluster yet (real nodes, before agents join) nothing is refused.
  CHECK(errors_of(R"(typed { one = "p100", costs = { t4 = 1 } })", nullptr).empty());
}

namespace {

// v100 nodes, then what `events` adds; gavel's gpu_costs names v100 and k80.
std::string gavel_costs_experiment(const std::string& events) {
  return R"([cluster]
nodes = 2
gpus_per_node = 4
gpu_type = "v100"
)" + events + R"(
[workload]
kind = "synthetic"
jobs = 5
seed = 1

[scheduler]
allocation = { plugin = "gavel", policy = "max_sum_throughput_normalized_by_cost", gpu_costs = { v100 = 2.48, k80 = 0.9 } }
placement = { plugin = "consolidated" }

[output]
database = "out/results.db"
)";
}

}  // namespace

TEST_CASE("gavel's gpu_costs naming a type the cluster lacks: validate and run refuse it, exit 2, before running") {
  test::TempDir dir;
  dir.write("e.toml", gavel_costs_experiment(""));
  for (const char* command : {"validate", "run"}) {
    CAPTURE(command);
    const test::CommandResult result = test::run_tessel({command, "e.toml"}, dir.path());
    CHECK(result.code == 2);
    CHECK(result.err.find("e.toml:12:96: argument 'gpu_costs' of allocation plugin 'gavel' names GPU type 'k80', "
                          "which the cluster lacks (its types: v100)") != std::string::npos);
  }
}

// A type that only a [[cluster.events]] node brings is the cluster's too:
// the run will need its cost when the node arrives, so validate accepts it.
TEST_CASE("gavel's gpu_costs may name a GPU type a cluster event adds later") {
  test::TempDir dir;
  dir.write("e.toml", gavel_costs_experiment(R"(
[[cluster.events]]
at_seconds = 100
add = { count = 1, gpus_per_node = 4, gpu_type = "k80" }
)"));
  const test::CommandResult result = test::run_tessel({"validate", "e.toml"}, dir.path());
  CHECK_MESSAGE(result.code == 0, result.err);
}

// A generated workload larger than the process can hold is refused, named,
// before any job is made; without the check the trace reserves the whole
// count at once and the run dies of std::bad_alloc (exit 1). The limit is
// the shell's address-space limit, so the figure does not depend on the
// machine's memory.
TEST_CASE("a synergy or synthetic job count beyond the memory the process may use: exit 2, 'jobs' named") {
  test::TempDir dir;
  for (const char* kind : {"synergy", "synthetic"}) {
    CAPTURE(kind);
    for (const char* jobs : {"20000000", "50"}) {
      CAPTURE(jobs);
      dir.write("e.toml", std::string(R"([cluster]
nodes = 2
gpus_per_node = 4

[workload]
kind = ")") + kind + R"("
jobs = )" + jobs + R"(
seed = 1

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }

[output]
database = "out/results.db"
)");
      // 4 GiB of address space: 20M jobs' specs need about 8.
      const test::CommandResult result = test::run_command(
          {"/bin/bash", "-c", "ulimit -v 4194304 && exec \"$0\" validate e.toml", test::tessel_exe().string()},
          dir.path());
      if (std::string(jobs) == "50") {
        CHECK_MESSAGE(result.code == 0, result.err);  // the limit leaves room for a run of a normal size
        continue;
      }
      CHECK(result.code == 2);
      CHECK(result.err.starts_with("e.toml:7:"));
      CHECK(result.err.find("'jobs' in [workload]: 20,000,000 jobs need ") != std::string::npos);
      CHECK(result.err.find("GiB this process may use") != std::string::npos);
    }
  }
}

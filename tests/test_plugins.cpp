// Finding, checking and running plugins.
#include <doctest/doctest.h>

#include <algorithm>
#include <span>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

LoadError load_error_of(const std::string& library) {
  try {
    PluginRegistry::inspect(test_plugin(library).string());
  } catch (const PluginLoadError& e) {
    return e.code();
  }
  FAIL("expected " << library << " to be refused");
  return LoadError::not_found;
}

}  // namespace

TEST_CASE("the built-in plugins are found, each with its identity") {
  PluginRegistry registry;
  const auto& plugins = registry.plugins();
  std::vector<std::string> found;
  for (const PluginEntry& p : plugins) {
    CAPTURE(p.path);
    CHECK(p.info->abi_version == kAbiVersion);
    CHECK(std::string_view(p.info->version).size() > 0);
    CHECK(std::string_view(p.info->description).size() > 10);
    found.push_back(std::string(to_string(p.info->kind)) + "/" + p.info->name);
  }
  for (const char* expected : {"admission/accept_all", "allocation/fifo", "allocation/srtf", "allocation/sjf",
                               "allocation/las", "allocation/tiresias", "allocation/gittins", "placement/first_fit",
                               "placement/consolidated", "elasticity/none", "elasticity/tenplex", "elasticity/dp_only"})
    CHECK(std::find(found.begin(), found.end(), expected) != found.end());
  CHECK(registry.rejected().empty());
}

TEST_CASE("broken plugins are refused with a typed error before their code runs") {
  CHECK(load_error_of("wrong_abi") == LoadError::abi_mismatch);  // its factory would abort()
  CHECK(load_error_of("missing_factory") == LoadError::missing_factory);
  CHECK(load_error_of("not_a_plugin") == LoadError::not_a_plugin);
  CHECK_THROWS_WITH_AS(PluginRegistry::inspect("/etc/hostname"),
                       "/etc/hostname: not a tessel plugin: not a readable shared library", PluginLoadError);

  try {
    PluginRegistry::inspect(test_plugin("wrong_abi").string());
  } catch (const PluginLoadError& e) {
    CHECK(std::string(e.what()).ends_with(
        ": plugin ABI mismatch: built for plugin ABI " + std::to_string(kAbiVersion + 1) +
        ", this tessel uses ABI " + std::to_string(kAbiVersion) + "; rebuild it against this tessel"));
  }
}

TEST_CASE("a failing factory is reported, against the argument it blames") {
  PluginRegistry registry;
  const PluginEntry& entry = registry.open(test_plugin("throwing_factory").string(), PluginKind::allocation);
  SlotRegistry slots;
  PluginArgs args;
  args.set("threshold", 1.0);
  CHECK_THROWS_WITH_AS(PluginRegistry::create(entry, PluginContext(args, 0, slots)),
                       (test_plugin("throwing_factory").string() +
                        ": plugin factory failed: allocation plugin 'throwing_factory': cannot start: no license")
                           .c_str(),
                       PluginLoadError);
  args.set("threshold", 2.0);
  try {
    PluginRegistry::create(entry, PluginContext(args, 0, slots));
    FAIL("expected ArgumentError");
  } catch (const ArgumentError& e) {
    CHECK(e.argument() == "threshold");
    CHECK(std::string(e.what()) == "must be negative");
  }
}

TEST_CASE("a broken plugin named in a config gives a located user error") {
  TempDir dir;
  const std::string base = R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 5
[scheduler]
placement = { plugin = "first_fit" }
)";
  dir.write("abi.toml", base + "allocation = { plugin = \"x\", path = \"" + test_plugin("wrong_abi").string() + "\" }\n");
  auto result = run_tessel({"validate", "abi.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.starts_with("abi.toml:9:25: " + test_plugin("wrong_abi").string() + ": plugin ABI mismatch"));

  dir.write("arg.toml", base + "allocation = { plugin = \"x\", threshold = 3, path = \"" +
                            test_plugin("throwing_factory").string() + "\" }\n");
  result = run_tessel({"validate", "arg.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err ==
        "arg.toml:9:42: argument 'threshold' of allocation plugin 'throwing_factory': must be negative\n");

  dir.write("kind.toml", base + "allocation = { plugin = \"x\", path = \"" +
                             (build_root() / "plugins/placement/first_fit.so").string() + "\" }\n");
  result = run_tessel({"validate", "kind.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.find("plugin of the wrong kind: 'first_fit' is a placement plugin, not an allocation plugin") !=
        std::string::npos);
}

TEST_CASE("TESSEL_PLUGIN_PATH adds plugins; `tessel plugins` describes every one") {
  const fs::path plugin_dir = test_plugin("newest_first").parent_path();
  const auto result = run_tessel({"plugins", "--kind", "allocation"}, fs::current_path(),
                                 {"TESSEL_PLUGIN_PATH=" + plugin_dir.string()});
  CHECK(result.code == 0);
  CHECK(result.out.find("newest_first") != std::string::npos);
  CHECK(result.out.find("test policy: newest job first, preemptive") != std::string::npos);
  CHECK(result.out.find("first_fit") == std::string::npos);
  // The broken libraries in that directory are reported, not loaded.
  CHECK(result.err.find("wrong_abi.so: plugin ABI mismatch") != std::string::npos);
  CHECK(result.err.find("not_a_plugin") == std::string::npos);

  const auto all = run_tessel({"plugins", "-v"});
  CHECK(all.code == 0);
  for (const char* name : {"accept_all", "fifo", "first_fit", "consolidated", "none", "backfill (boolean, default false)"})
    CHECK(all.out.find(name) != std::string::npos);
}

namespace {

// Arguments a plugin needs to run the quickstart workload (those without
// defaults); data files go to `scratch`.
toml::table zoo_arguments(std::string_view plugin, PluginKind kind, const TempDir& scratch) {
  if (plugin == "python") {  // a Python policy of each stage, through the bridge
    const fs::path root = source_root();
    switch (kind) {
      case PluginKind::admission:
        return toml::table{{"module", (root / "tests/python/policies/admission.py").string()}, {"class", "AtMost"}};
      case PluginKind::allocation:
        return toml::table{{"module", (root / "examples/python/policies/las.py").string()}, {"class", "Las"}};
      case PluginKind::placement:
        return toml::table{{"module", (root / "examples/python/policies/tightest_fit.py").string()},
                           {"class", "TightestFit"}};
      case PluginKind::elasticity:
        return toml::table{{"module", (root / "tests/python/policies/elasticity.py").string()},
                           {"class", "GrowWhenFree"}};
    }
  }
  if (plugin == "gittins") {
    // GPU-seconds spread over the synthetic jobs' sizes (30 min to 17 h on 1-8 GPUs).
    const fs::path distribution =
        scratch.write("gpu-time.csv", "duration\n1800\n3600\n7200\n14400\n36000\n72000\n144000\n480000\n");
    return toml::table{{"distribution", distribution.string()}};
  }
  // Enough room that all 120 jobs get in and finish.
  if (plugin == "max_queue") return toml::table{{"max_waiting", 1000}};
  if (plugin == "synthesizer")
    return toml::table{{"candidates", toml::array{"accept_all + fifo", "load_based { factor = 1.2 } + las"}}};
  return toml::table{};
}

// What must hold after every round, whatever the policy.
void check_invariants(const Scheduler& scheduler) {
  const ClusterState& cluster = scheduler.cluster();
  std::vector<int> used(cluster.gpus().size(), 0);
  for (const JobState* job : scheduler.jobs()) {
    if (!job->running()) {
      CHECK(job->allocation.empty());
      continue;
    }
    CHECK(job->allocation.gpu_count() >= job->spec.min_gpus);
    CHECK(job->allocation.gpu_count() <= job->spec.max_gpus);
    for (GpuId gpu : job->allocation.gpus) used[gpu] += job->allocation.gpu_milli;
  }
  for (GpuId gpu = 0; gpu < used.size(); ++gpu) {
    CHECK(used[gpu] <= 1000);                     // no GPU double-booked
    CHECK(used[gpu] == cluster.gpu(gpu).used_milli);  // the core's books agree with the jobs'
  }
}

}  // namespace

TEST_CASE("every plugin runs the quickstart workload, keeps the invariants and finishes every job") {
  PluginRegistry registry;
  TempDir scratch;
  const auto base = load_experiment(source_root() / "experiments/quickstart.toml",
                                    {"workload.jobs=120", "output.decisions=true"});
  for (const PluginEntry& plugin : registry.plugins()) {
    CAPTURE(plugin.info->name);
    ExperimentConfig config = base;
    StageConfig& stage = config.scheduler.stages[static_cast<std::size_t>(plugin.info->kind) - 1];
    stage.plugin = plugin.info->name;
    stage.args = zoo_arguments(plugin.info->name, plugin.info->kind, scratch);
    Simulation simulation(config, registry);
    std::size_t rounds = 0;
    simulation.observe_rounds([&](double, const Scheduler& scheduler, const RoundOutcome&) {
      check_invariants(scheduler);
      ++rounds;
    });
    const RunResults results = simulation.run();
    CHECK(rounds > 0);
    std::size_t finished = 0;
    for (const JobRecord& job : results.jobs) finished += job.status == "finished";
    CHECK(finished == 120);
    for (const DecisionRecord& decision : results.decisions) CHECK_FALSE(decision.reason.empty());
  }
}

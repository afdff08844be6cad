// Finding, checking and running plugins.
#include <doctest/doctest.h>

#include <elf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <span>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "plugins/composition.hpp"
#include "plugins/elf_reader.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"
#include "tessel/abi_layout.hpp"
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
    CHECK(p.info.abi_version == kAbiVersion);
    CHECK(p.info.layout == kAbiLayout);
    CHECK(std::string_view(p.info.version).size() > 0);
    CHECK(std::string_view(p.info.description).size() > 10);
    found.push_back(std::string(to_string(p.info.kind)) + "/" + p.info.name);
  }
  for (const char* expected : {"admission/accept_all", "allocation/fifo", "allocation/srtf", "allocation/sjf",
                               "allocation/las", "allocation/tiresias", "allocation/gittins", "placement/first_fit",
                               "placement/consolidated", "elasticity/none", "elasticity/tenplex", "elasticity/dp_only"})
    CHECK(std::find(found.begin(), found.end(), expected) != found.end());
  CHECK(registry.rejected().empty());
}

TEST_CASE("broken plugins are refused with a typed error before their code runs") {
  CHECK(load_error_of("wrong_abi") == LoadError::abi_mismatch);  // its factory would abort()
  CHECK(load_error_of("wrong_layout") == LoadError::abi_mismatch);
  CHECK(load_error_of("old_abi") == LoadError::abi_mismatch);
  CHECK(load_error_of("unterminated_name") == LoadError::bad_record);
  CHECK(load_error_of("miscounted_args") == LoadError::bad_record);
  CHECK(load_error_of("runtime_record") == LoadError::bad_record);
  CHECK(load_error_of("missing_factory") == LoadError::missing_factory);
  CHECK(load_error_of("not_a_plugin") == LoadError::not_a_plugin);
  CHECK_THROWS_WITH_AS(PluginRegistry::inspect("/etc/hostname"),
                       "/etc/hostname: not a tessel plugin: not a readable shared library: not an ELF file",
                       PluginLoadError);

  const auto message_of = [](const std::string& library) -> std::string {
    try {
      PluginRegistry::inspect(test_plugin(library).string());
    } catch (const PluginLoadError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(message_of("wrong_abi") == test_plugin("wrong_abi").string() + ": plugin ABI mismatch: built for plugin ABI " +
                                       std::to_string(kAbiVersion + 1) + ", this tessel uses ABI " +
                                       std::to_string(kAbiVersion) + "; rebuild it against this tessel");
  CHECK(message_of("wrong_layout").find("laid out differently") != std::string::npos);
  CHECK(message_of("old_abi").find("built for plugin ABI 4 or older") != std::string::npos);
  CHECK(message_of("unterminated_name") == test_plugin("unterminated_name").string() +
                                               ": malformed plugin record: its name is not NUL-terminated within "
                                               "its 64 characters");
  CHECK(message_of("miscounted_args").find("counts 2 arguments, but its tessel_plugin_args holds " +
                                           std::to_string(sizeof(ArgRecord)) + " bytes") != std::string::npos);
  CHECK(message_of("runtime_record").find("initialised at run time") != std::string::npos);
}

namespace {
// What the TESSEL_PLUGIN macros static_assert: a text must fit its field with its NUL.
constexpr char kName63[] = "123456789012345678901234567890123456789012345678901234567890123";
constexpr char kName64[] = "1234567890123456789012345678901234567890123456789012345678901234";
static_assert(abi::fits(kName63, kPluginNameSize) && !abi::fits(kName64, kPluginNameSize));
constexpr ArgSpec kFitting[] = {{kName63, ArgType::integer, "1", "help", "a|b"}};
constexpr ArgSpec kTooLong[] = {{kName64, ArgType::integer, "1", "help"}};
static_assert(abi::args_fit(kFitting) && !abi::args_fit(kTooLong));
// The records are built at compile time, texts copied and NUL-padded.
constexpr auto kRecords = abi::arg_records(kFitting);
static_assert(kRecords[0].has_default == 1 && kRecords[0].name[62] == '3' && kRecords[0].name[63] == '\0' &&
              kRecords[0].choices[2] == 'b');
}  // namespace

TEST_CASE("the plugin macros refuse, at compile time, a text too long for its field") {
  const char* cxx = std::getenv("TESSEL_CXX");
  REQUIRE(cxx != nullptr);
  TempDir dir;
  const auto compile = [&](const std::string& name, const std::string& argument) {
    dir.write("plugin.cpp", "#include <tessel/tessel.hpp>\n"
                            "struct P final : tessel::AllocationPolicy {\n"
                            "  explicit P(const tessel::PluginContext&) {}\n"
                            "  tessel::AllocationPlan allocate(const tessel::SchedulerView&) override { return {}; }\n"
                            "};\n"
                            "constexpr tessel::ArgSpec kArgs[] = {{\"" + argument +
                                "\", tessel::ArgType::integer, \"1\", \"help\"}};\n"
                                "TESSEL_PLUGIN_WITH_ARGS(P, allocation, \"" + name + "\", \"1.0\", \"a test\", kArgs)\n");
    std::vector<std::string> argv;
    std::istringstream words(cxx);
    for (std::string word; words >> word;) argv.push_back(word);
    for (const std::string& flag : {std::string("-std=c++20"), std::string("-fsyntax-only"),
                                    "-I" + (source_root() / "core/include").string(), std::string("plugin.cpp")})
      argv.push_back(flag);
    return run_command(argv, dir.path());
  };
  const auto longest = compile(std::string(kPluginNameSize - 1, 'n'), std::string(kArgNameSize - 1, 'a'));
  CHECK_MESSAGE(longest.code == 0, longest.err);
  const auto too_long = compile(std::string(kPluginNameSize, 'n'), std::string(kArgNameSize, 'a'));
  CHECK(too_long.code != 0);
  CHECK(too_long.err.find("the plugin name is too long") != std::string::npos);
  CHECK(too_long.err.find("an argument's name, default, help or choices is too long") != std::string::npos);
}

TEST_CASE("a refused plugin's static constructors never run; an accepted one's do") {
  TempDir markers;
  REQUIRE(setenv("TESSEL_TEST_MARKER_DIR", markers.path().c_str(), 1) == 0);
  for (const char* refused : {"old_abi", "wrong_abi", "wrong_layout", "unterminated_name", "miscounted_args",
                              "runtime_record", "missing_factory"}) {
    CAPTURE(refused);
    CHECK_THROWS_AS(PluginRegistry::inspect(test_plugin(refused).string()), PluginLoadError);
    CHECK_FALSE(fs::exists(markers.path() / refused));
  }
  // The control: the marker works, and the loader does open what it
  // accepts. A fresh copy, so that no earlier load in this process hides it.
  const fs::path copy = markers.path() / "copy.so";
  fs::copy_file(test_plugin("newest_first"), copy);
  const PluginEntry accepted = PluginRegistry::inspect(copy.string());
  CHECK(fs::exists(markers.path() / "newest_first"));
  unsetenv("TESSEL_TEST_MARKER_DIR");
}

TEST_CASE("truncated and garbage files give a typed error, never a crash") {
  TempDir dir;
  std::ifstream source(test_plugin("newest_first"), std::ios::binary);
  const std::string plugin((std::istreambuf_iterator<char>(source)), std::istreambuf_iterator<char>());
  REQUIRE(plugin.size() > 4096);
  const auto write = [&](const std::string& name, const std::string& bytes) {
    const fs::path path = dir.path() / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  };

  // Cut anywhere: the section headers (at the end) or the records are gone.
  for (std::size_t length : {std::size_t{0}, std::size_t{3}, std::size_t{63}, std::size_t{64}, plugin.size() / 4,
                             plugin.size() / 2, plugin.size() - 64, plugin.size() - 1}) {
    CAPTURE(length);
    const std::string path = write("cut_" + std::to_string(length) + ".so", plugin.substr(0, length));
    try {
      PluginRegistry::inspect(path);
      FAIL("a truncated plugin was accepted");
    } catch (const PluginLoadError& e) {
      CHECK((e.code() == LoadError::not_a_plugin || e.code() == LoadError::bad_record));
    }
  }
  // An ELF header over garbage.
  std::string garbage(8192, '\xa5');
  garbage.replace(0, 4, "\x7f" "ELF");
  CHECK_THROWS_AS(PluginRegistry::inspect(write("garbage.so", garbage)), PluginLoadError);

  // Every byte of the ELF header and of the section headers set to 0xff in
  // turn, read by the ELF reader alone (such a file is never dlopen()ed by
  // this test): each gives an ElfError or a well-bounded read.
  Elf64_Ehdr header;
  std::memcpy(&header, plugin.data(), sizeof header);
  REQUIRE(header.e_shoff + header.e_shnum * sizeof(Elf64_Shdr) <= plugin.size());
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < sizeof header; ++i) offsets.push_back(i);
  for (std::size_t i = 0; i < header.e_shnum * sizeof(Elf64_Shdr); ++i) offsets.push_back(header.e_shoff + i);
  int refused = 0, read = 0;
  for (std::size_t offset : offsets) {
    std::string mutated = plugin;
    mutated[offset] = '\xff';
    const std::string path = write("mutated.so", mutated);
    try {
      const ElfFile elf(path);
      if (const auto symbol = elf.exported("tessel_plugin_info")) {
        unsigned sum = 0;  // touches every byte the reader hands out
        for (std::byte b : elf.bytes_of(*symbol)) sum += std::to_integer<unsigned>(b);
        read += sum > 0;
      }
    } catch (const ElfError&) {
      ++refused;
    }
  }
  CHECK(refused > 0);
  CHECK(read > 0);
}

TEST_CASE("two plugins of one name are an error naming both files; one file reached twice is not") {
  TempDir first, second;
  fs::copy_file(test_plugin("newest_first"), first.path() / "newest_first.so");
  fs::create_directory(second.path() / "stage");
  fs::copy_file(test_plugin("newest_first"), second.path() / "stage" / "newest_first.so");
  const std::string a = (first.path() / "newest_first.so").string();
  const std::string b = (second.path() / "stage" / "newest_first.so").string();

  PluginRegistry twice({first.path().string(), second.path().string()});
  const std::string expected = "allocation plugin 'newest_first' is defined by 2 files: " + a + " and " + b +
                               "; remove all but one, or name one with `path`";
  CHECK_THROWS_WITH_AS(twice.find(PluginKind::allocation, "newest_first"), expected.c_str(), PluginLoadError);
  try {
    twice.find(PluginKind::allocation, "newest_first");
  } catch (const PluginLoadError& e) {
    CHECK(e.code() == LoadError::duplicate_name);
  }
  CHECK(std::none_of(twice.plugins().begin(), twice.plugins().end(),
                     [](const PluginEntry& p) { return std::string_view(p.info.name) == "newest_first"; }));
  REQUIRE(twice.rejected().size() == 1);
  CHECK(twice.rejected()[0].error == LoadError::duplicate_name);
  CHECK(twice.find(PluginKind::allocation, "fifo").path.ends_with("fifo.so"));  // other names are unaffected

  // `tessel plugins` lists the rest and fails, naming both.
  const auto listed = run_tessel({"plugins"}, fs::current_path(),
                                 {"TESSEL_PLUGIN_PATH=" + first.path().string() + ":" + second.path().string()});
  CHECK(listed.code == 2);
  CHECK(listed.out.find("first_fit") != std::string::npos);
  CHECK(listed.err.find(expected) != std::string::npos);

  // The same file through a directory named twice, a link to that
  // directory, or a hard link, is one plugin.
  fs::create_directory_symlink(first.path(), second.path() / "link");
  fs::remove(b);
  fs::create_hard_link(first.path() / "newest_first.so", b);
  PluginRegistry once({first.path().string(), first.path().string(), (second.path() / "link").string(),
                       second.path().string()});
  CHECK(once.find(PluginKind::allocation, "newest_first").path == a);
  CHECK(once.rejected().empty());
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

  dir.write("arg.toml", base + "allocation = { plugin = \"throwing_factory\", threshold = 3, path = \"" +
                            test_plugin("throwing_factory").string() + "\" }\n");
  result = run_tessel({"validate", "arg.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err ==
        "arg.toml:9:57: argument 'threshold' of allocation plugin 'throwing_factory': must be negative\n");

  // The run would be stored under one name and run the other's code.
  dir.write("name.toml", base + "allocation = { plugin = \"fifo\", path = \"" +
                             test_plugin("throwing_factory").string() + "\" }\n");
  result = run_tessel({"validate", "name.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err == "name.toml:9:25: 'path' names " + test_plugin("throwing_factory").string() +
                          ", which is allocation plugin 'throwing_factory', not 'fifo'\n");

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
  // The quickstart's model has no co-location rates to pack with.
  if (plugin == "gandiva") return toml::table{{"packing", false}};
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
    CAPTURE(plugin.info.name);
    ExperimentConfig config = base;
    StageConfig& stage = config.scheduler.stages[static_cast<std::size_t>(plugin.info.kind) - 1];
    stage.plugin = plugin.info.name;
    stage.args = zoo_arguments(plugin.info.name, plugin.info.kind, scratch);
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

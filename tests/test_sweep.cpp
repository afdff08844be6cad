// Sweeps: expansion, parallel runs into one database, resume, Ctrl-C.
#include <doctest/doctest.h>

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "config/sweep.hpp"
#include "plugins/hosted_code.hpp"
#include "results/sqlite.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

extern char** environ;

namespace {

const char* kSweep = R"([cluster]
nodes = 4
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 40
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
[output]
database = "sweep.db"
[sweep]
"workload.jobs_per_hour" = [2, 4]
"scheduler.allocation.backfill" = [false, true]
seeds = [1, 2, 3]
)";

}  // namespace

TEST_CASE("a sweep expands to the cross product, seeds varying fastest") {
  const TomlDocument doc = TomlDocument::parse(kSweep, "s.toml");
  const auto points = expand_sweep(doc);
  REQUIRE(points.size() == 12);
  CHECK(points[0].axes == R"({"workload.jobs_per_hour":2,"scheduler.allocation.backfill":false,"seed":1})");
  CHECK(points[0].overrides == std::vector<std::string>{"workload.jobs_per_hour=2",
                                                        "scheduler.allocation.backfill=false", "workload.seed=1"});
  CHECK(points[1].overrides[2] == "workload.seed=2");
  CHECK(points[3].overrides == std::vector<std::string>{"workload.jobs_per_hour=2",
                                                        "scheduler.allocation.backfill=true", "workload.seed=1"});
  CHECK(points[11].overrides == std::vector<std::string>{"workload.jobs_per_hour=4",
                                                         "scheduler.allocation.backfill=true", "workload.seed=3"});
  CHECK(expand_sweep(TomlDocument::parse("[cluster]\n", "plain.toml")).size() == 1);
  CHECK(without_sweep(doc).find("[sweep]") == std::string::npos);
  CHECK(without_sweep(doc).find("[cluster]") != std::string::npos);
}

TEST_CASE("--set narrows a sweep: its axes are quoted keys") {
  const TomlDocument doc = TomlDocument::parse(
      kSweep, "s.toml",
      {"sweep.seeds=[7]", "sweep.\"workload.jobs_per_hour\"=[3]", "sweep.'scheduler.allocation.backfill'=[true]"});
  const auto points = expand_sweep(doc);
  REQUIRE(points.size() == 1);
  CHECK(points[0].axes == R"({"workload.jobs_per_hour":3,"scheduler.allocation.backfill":true,"seed":7})");

  // An axis may hold tables, as when it sweeps a whole stage.
  const auto stages = expand_sweep(TomlDocument::parse(
      kSweep, "s.toml", {"sweep.seeds=[1]", "sweep.\"workload.jobs_per_hour\"=[2]",
                         "sweep.\"scheduler.allocation.backfill\"=[false]",
                         "sweep.\"scheduler.admission\"=[{ plugin = \"accept_all\" }, "
                         "{ plugin = \"load_based\", factor = 1.2 }]"}));
  REQUIRE(stages.size() == 2);
  // An axis that only --set names comes first.
  CHECK(stages[1].overrides.front() == "scheduler.admission={ factor = 1.2, plugin = 'load_based' }");

  try {
    TomlDocument::parse(kSweep, "s.toml", {"sweep.\"workload.jobs=[1]"});
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].str() == "--set sweep.\"workload.jobs=[1]: unclosed quote in the key");
  }
}

TEST_CASE("an axis of named values sets each value whole and labels its runs by name") {
  const TomlDocument doc = TomlDocument::parse(R"([sweep]
"workload.jobs_per_hour" = [2]
[sweep."scheduler.allocation"]
plain = { plugin = "fifo" }
with-backfill = { plugin = "fifo", backfill = true }
)",
                                               "n.toml");
  const auto points = expand_sweep(doc);
  REQUIRE(points.size() == 2);
  // In the order written, not toml++'s sorted order.
  CHECK(points[0].axes == R"({"workload.jobs_per_hour":2,"scheduler.allocation":"plain"})");
  CHECK(points[1].axes == R"({"workload.jobs_per_hour":2,"scheduler.allocation":"with-backfill"})");
  CHECK(points[1].overrides ==
        std::vector<std::string>{"workload.jobs_per_hour=2", "scheduler.allocation={ backfill = true, plugin = 'fifo' }"});

  // Each value replaces the table whole: arguments of one plugin do not leak into another's runs.
  TempDir dir;
  std::string named = kSweep;
  named = named.substr(0, named.find("[sweep]")) + R"([sweep]
seeds = [1]
[sweep."scheduler.allocation"]
fifo = { plugin = "fifo", backfill = true }
las = { plugin = "las" }
)";
  dir.write("n.toml", named);
  const auto result = run_tessel({"run", "n.toml", "-j", "2"}, dir.path());
  REQUIRE_MESSAGE(result.code == 0, result.err);
  const fs::path db = dir.path() / "sweep.db";
  CHECK(count(db, R"(SELECT count(*) FROM runs WHERE axes = '{"scheduler.allocation":"las","seed":1}')") == 1);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE config LIKE '%plugin = ''las''%' AND config NOT LIKE '%backfill%'") ==
        1);
  const auto report = run_tessel({"report", "sweep.db", "--by", "scheduler.allocation", "--format", "csv"}, dir.path());
  REQUIRE(report.code == 0);
  CHECK(report.out.find("\nn,fifo,1,") != std::string::npos);
  CHECK(report.out.find("\nn,las,1,") != std::string::npos);
}

TEST_CASE("a table of named variants is one axis, each variant setting several paths") {
  const TomlDocument doc = TomlDocument::parse(R"([sweep]
"workload.jobs_per_hour" = [2, 4]

[sweep.policy.las]
"scheduler.allocation" = { plugin = "las" }
"scheduler.placement" = { plugin = "first_fit" }

[sweep.policy.tiresias]
"scheduler.allocation" = { plugin = "tiresias", queue_thresholds_gpu_seconds = [7200] }
)",
                                               "v.toml");
  const auto points = expand_sweep(doc);
  REQUIRE(points.size() == 4);
  CHECK(points[0].axes == R"({"workload.jobs_per_hour":2,"policy":"las"})");
  CHECK(points[0].overrides == std::vector<std::string>{"workload.jobs_per_hour=2",
                                                        "scheduler.allocation={ plugin = 'las' }",
                                                        "scheduler.placement={ plugin = 'first_fit' }"});
  CHECK(points[1].axes == R"({"workload.jobs_per_hour":2,"policy":"tiresias"})");
  CHECK(points[1].overrides ==
        std::vector<std::string>{"workload.jobs_per_hour=2",
                                 "scheduler.allocation={ plugin = 'tiresias', queue_thresholds_gpu_seconds = [ 7200 ] }"});
  CHECK(points[3].axes == R"({"workload.jobs_per_hour":4,"policy":"tiresias"})");

  try {
    expand_sweep(TomlDocument::parse("[sweep.policy.a]\nscheduler.allocation = { plugin = \"las\" }\n"
                                     "[sweep.policy.b]\n[sweep.empty]\n[sweep.seed.x]\n\"workload.seed\" = 1\n",
                                     "v.toml"));
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 4);
    CHECK(e.diagnostics()[0].str() ==
          "v.toml:2:1: 'scheduler' in [sweep.policy.a] is not a quoted config path like \"scheduler.allocation\"");
    CHECK(e.diagnostics()[1].str().starts_with("v.toml:3:1: variant 'b' of [sweep.policy] must be a table of "
                                               "config paths and values"));
    CHECK(e.diagnostics()[2].str() == "v.toml:4:1: [sweep.empty] names no variants");
    CHECK(e.diagnostics()[3].str().starts_with("v.toml:5:1: [sweep.seed] would hide the seeds' axis"));
  }
}

TEST_CASE("malformed sweeps are located") {
  try {
    expand_sweep(TomlDocument::parse("[sweep]\nseeds = 3\njobs_per_hour = [1]\n", "s.toml"));
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[0].str() == "s.toml:2:9: 'seeds' in [sweep] must be a non-empty list of values");
    CHECK(e.diagnostics()[1].str() ==
          "s.toml:3:17: 'jobs_per_hour' in [sweep] is not a config path like \"workload.jobs_per_hour\", 'seeds', "
          "or a table of named variants");
  }
  try {
    expand_sweep(TomlDocument::parse("[sweep]\n\"workload.jobs\" = {}\n", "s.toml"));
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].str() ==
          "s.toml:2:19: 'workload.jobs' in [sweep] must be a non-empty list of values or a table of named values");
  }
  TempDir dir;
  std::string bad = kSweep;
  bad += "\"cluster.nodes\" = [4, -1]\n";
  dir.write("bad.toml", bad);
  const auto result = run_tessel({"run", "bad.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err == "bad.toml: [sweep] cluster.nodes=-1: 'nodes' in [cluster] must be in 1..1000000, got -1\n");
  CHECK_FALSE(fs::exists(dir.path() / "sweep.db"));  // nothing ran
}

// Each would have stored runs labelled by values they did not run with, or
// one point twice.
TEST_CASE("a sweep that sets one path twice, or lists a value twice, is refused") {
  const std::string text = "[sweep]\n"
                           "\"workload.jobs\" = [10, 15, 10]\n"
                           "\"scheduler.allocation.plugin\" = [\"fifo\", \"las\"]\n"
                           "seeds = [1, 1]\n"
                           "[sweep.policy.a]\n"
                           "\"scheduler.allocation\" = { plugin = \"srtf\" }\n"
                           "\"scheduler.placement\" = { plugin = \"spread\" }\n"
                           "\"scheduler.placement.plugin\" = \"consolidated\"\n";
  try {
    expand_sweep(TomlDocument::parse(text, "s.toml"));
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 4);
    CHECK(e.diagnostics()[0].str() ==
          "s.toml:2:28: 'workload.jobs' in [sweep] lists 10 twice: its runs would be one point, run twice");
    CHECK(e.diagnostics()[1].str() == "s.toml:4:13: 'seeds' in [sweep] lists 1 twice: its runs would be one point, "
                                      "run twice");
    CHECK(e.diagnostics()[2].str() ==
          "s.toml:8:32: 'scheduler.placement.plugin' in [sweep.policy.a] sets part of what 'scheduler.placement' "
          "sets in the same variant; set it in one of them");
    CHECK(e.diagnostics()[3].str() ==
          "s.toml:6:26: 'scheduler.allocation' is swept by two axes of [sweep], 'scheduler.allocation.plugin' (at "
          "s.toml:3:33) and 'policy': every run would be labelled by one and run with the other");
  }
}

// A plugin is found when a run composes its scheduler: a sweep once ran and
// stored its first point before its second found none, and `validate`
// read no point of the sweep at all.
TEST_CASE("every point's plugins are checked before a sweep runs, and by validate") {
  TempDir dir;
  dir.write("bad.toml", std::string(kSweep) +
                            "[sweep.policy]\nok = { \"scheduler.placement\" = { plugin = \"spread\" } }\n"
                            "missing = { \"scheduler.placement\" = { plugin = \"nosuch\" } }\n");
  const std::string expected =
      "bad.toml: [sweep] scheduler.placement={ plugin = 'nosuch' }: unknown placement plugin 'nosuch' (valid: ";
  for (const char* command : {"run", "validate"}) {
    CAPTURE(command);
    const auto result = run_tessel({command, "bad.toml"}, dir.path());
    CHECK(result.code == 2);
    CHECK(result.err.find(expected) != std::string::npos);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == (std::string(command) == "run" ? 2 : 1));
    CHECK_FALSE(fs::exists(dir.path() / "sweep.db"));  // nothing ran
  }
  dir.write("good.toml", kSweep);
  const auto result = run_tessel({"validate", "good.toml"}, dir.path());
  CHECK(result.code == 0);
  CHECK(result.out == "good.toml: ok: 12 sweep points, each composed and its workload read; point 0: 40 jobs on 4 "
                      "nodes, 16 GPUs, accept_all -> fifo -> consolidated -> none\n");
}

// The run would be labelled by the sweep's value and run with the --set one.
TEST_CASE("--set of a path the sweep sweeps is refused once, naming how to narrow the sweep") {
  TempDir dir;
  dir.write("s.toml", kSweep);
  const auto result = run_tessel({"validate", "s.toml", "--set", "workload.jobs_per_hour=3"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err == "--set workload.jobs_per_hour=3: sets what [sweep] sweeps: every run would be labelled by the "
                      "sweep's value and run with this one; narrow the sweep's axis instead, like --set "
                      "'sweep.\"workload.jobs_per_hour\"=[...]'\n");
  const auto narrowed = run_tessel({"validate", "s.toml", "--set", "sweep.\"workload.jobs_per_hour\"=[3]"}, dir.path());
  CHECK(narrowed.code == 0);
  CHECK(narrowed.out.starts_with("s.toml: ok: 6 sweep points"));
}

TEST_CASE("paths in [sweep] values are relative to the config file, like the rest of it") {
  TempDir dir;
  fs::create_directories(dir.path() / "exp");
  dir.write("exp/a.csv", "arrival,gpus,duration\n0,1,600\n");
  dir.write("exp/b.csv", "arrival,gpus,duration\n0,1,600\n0,2,600\n");
  dir.write("exp/s.toml", R"([cluster]
nodes = 1
gpus_per_node = 4
[workload]
kind = "csv"
path = "a.csv"
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
[output]
database = "paths.db"
[sweep]
"workload.path" = ["a.csv", "b.csv"]
)");
  const auto result = run_tessel({"run", "exp/s.toml", "-q"}, dir.path());  // run from the parent directory
  REQUIRE_MESSAGE(result.code == 0, result.err);
  CHECK(count(dir.path() / "paths.db", "SELECT count(*) FROM jobs") == 3);
}

TEST_CASE("every point is stored as a run labelled by its axes, and --resume skips complete ones") {
  TempDir dir;
  dir.write("s.toml", kSweep);
  auto result = run_tessel({"run", "s.toml", "-j", "2"}, dir.path());
  REQUIRE(result.code == 0);
  const fs::path db = dir.path() / "sweep.db";
  CHECK(count(db, "SELECT count(*) FROM runs WHERE status = 'complete'") == 12);
  CHECK(count(db, "SELECT count(DISTINCT axes) FROM runs") == 12);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE label = 's'") == 12);
  CHECK(count(db, "SELECT count(*) FROM jobs") == 12 * 40);
  CHECK(result.out.find("results: sweep.db (runs 1-12)") != std::string::npos);

  {
    sql::Database raw(db.string(), false);
    raw.exec("UPDATE runs SET status = 'failed' WHERE id = 5");
  }
  result = run_tessel({"run", "s.toml", "--resume"}, dir.path());
  REQUIRE(result.code == 0);
  CHECK(result.err.find("11 of 12 runs were complete already; skipped them") != std::string::npos);
  CHECK(count(db, "SELECT count(*) FROM runs") == 13);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE status = 'complete'") == 12);
  CHECK(count(db, "SELECT count(*) FROM runs r WHERE r.id = 13 AND r.axes = (SELECT axes FROM runs WHERE id = 5)") == 1);

  result = run_tessel({"run", "s.toml", "--resume"}, dir.path());
  CHECK(result.code == 0);
  CHECK(count(db, "SELECT count(*) FROM runs") == 13);
}

TEST_CASE("--resume reruns a point whose run ran another configuration, and says which keys differ") {
  TempDir dir;
  dir.write("s.toml", kSweep);
  REQUIRE(run_tessel({"run", "s.toml", "-q"}, dir.path()).code == 0);
  const fs::path db = dir.path() / "sweep.db";
  CHECK(count(db, "SELECT count(DISTINCT fingerprint) FROM runs") == 1);  // the axes' values aside, one configuration

  auto result = run_tessel({"run", "s.toml", "--resume", "--set", "workload.jobs=20"}, dir.path());
  REQUIRE(result.code == 0);
  CHECK(result.err.find("ran another configuration (it differs in workload.jobs); running it again") !=
        std::string::npos);
  CHECK(result.err.find("complete already") == std::string::npos);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE status = 'complete'") == 24);
  CHECK(count(db, "SELECT count(DISTINCT fingerprint) FROM runs") == 2);

  // The same configuration again: every point is done.
  result = run_tessel({"run", "s.toml", "--resume", "--set", "workload.jobs=20"}, dir.path());
  CHECK(result.err.find("12 of 12 runs were complete already") != std::string::npos);

  // Grouping never averages the two configurations together.
  result = run_tessel({"report", "sweep.db", "--by", "workload.jobs_per_hour"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.find("ran different configurations (they differ in workload.jobs); choose the runs to average "
                        "with --run") != std::string::npos);
  result = run_tessel({"plot", "sweep.db", "--kind", "metric", "--by", "workload.jobs_per_hour"}, dir.path());
  CHECK(result.code == 2);
  result = run_tessel({"report", "sweep.db", "--by", "workload.jobs_per_hour", "--run", "1", "--run", "2"},
                      dir.path());
  CHECK(result.code == 0);
}

TEST_CASE("a name that comes to mean another configuration is not the same point") {
  TempDir dir;
  const std::string base = R"([cluster]
nodes = 4
gpus_per_node = 4
[workload]
kind = "synthetic"
jobs = 20
[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }
[output]
database = "named.db"
[sweep."scheduler.placement"]
)";
  dir.write("n.toml", base + "packed = { plugin = \"consolidated\" }\n");
  REQUIRE(run_tessel({"run", "n.toml", "-q"}, dir.path()).code == 0);
  dir.write("n.toml", base + "packed = { plugin = \"spread\" }\n");  // same name, another policy
  const auto result = run_tessel({"run", "n.toml", "--resume"}, dir.path());
  REQUIRE(result.code == 0);
  CHECK(result.err.find("running it again") != std::string::npos);
  CHECK(count(dir.path() / "named.db", "SELECT count(DISTINCT fingerprint) FROM runs") == 2);
}

TEST_CASE("Ctrl-C stops a sweep and leaves no run half-marked") {
  TempDir dir;
  std::string big = kSweep;
  big.replace(big.find("jobs = 40"), 9, "jobs = 300000");
  big.replace(big.find("nodes = 4"), 9, "nodes = 400");
  big.replace(big.find("[2, 4]"), 6, "[150, 160]");
  dir.write("big.toml", big);
  std::vector<std::string> argv{tessel_exe().string(), "run", "big.toml", "-q", "-j", "2"};
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, dir.path().c_str());
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  const fs::path db = dir.path() / "sweep.db";
  for (int i = 0; i < 3000; ++i) {  // until two runs are under way
    try {
      if (fs::exists(db) && count(db, "SELECT count(*) FROM runs") >= 2) break;
    } catch (...) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(count(db, "SELECT count(*) FROM runs") >= 2);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE status = 'running'") == 0);
  CHECK(count(db, "SELECT count(*) FROM runs WHERE status = 'interrupted'") >= 1);
  CHECK(count(db, "SELECT count(*) FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.status != 'complete'") == 0);
}

namespace {

// What the interrupter was asked to interrupt, for the watch's test.
std::mutex interrupted_mutex;
std::vector<std::uint64_t> interrupted_threads;
void record_interrupted(const std::vector<std::uint64_t>& threads) {
  std::lock_guard lock(interrupted_mutex);
  interrupted_threads.insert(interrupted_threads.end(), threads.begin(), threads.end());
}
std::size_t times_interrupted(std::uint64_t thread) {
  std::lock_guard lock(interrupted_mutex);
  return std::count(interrupted_threads.begin(), interrupted_threads.end(), thread);
}

}  // namespace

TEST_CASE("a hosted code watch interrupts the threads it watches, once stopping, and only while they are watched") {
  set_hosted_code_interrupter(record_interrupted);
  std::atomic<bool> stop{false};
  std::atomic<int> stops{0};
  std::uint64_t left = 0, stayed = 0;
  {
    HostedCodeWatch watch([&] { return stop.load(); }, [&] { ++stops; });
    std::thread([&] {  // watched, then gone before the stop
      const HostedCodeWatch::Watching watching = watch.watch_this_thread();
      left = static_cast<std::uint64_t>(pthread_self());
    }).join();
    const HostedCodeWatch::Watching watching = watch.watch_this_thread();
    stayed = static_cast<std::uint64_t>(pthread_self());
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    CHECK(times_interrupted(stayed) == 0);  // nothing before the stop
    stop = true;
    for (int i = 0; i < 500 && times_interrupted(stayed) < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::size_t after_end = times_interrupted(stayed);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  set_hosted_code_interrupter(nullptr);
  CHECK(after_end >= 2);                         // at every poll while stopping
  CHECK(times_interrupted(stayed) == after_end);  // and never after the watch ended
  CHECK(times_interrupted(left) == 0);
  CHECK(stops == 1);
}

// The `tessel` command as a user meets it: exit codes, messages, output.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "support.hpp"

using namespace tessel::test;

namespace {

const char* kSmall = R"([cluster]
nodes = 4
gpus_per_node = 4

[workload]
kind = "synthetic"
jobs = 50
jobs_per_hour = 6
seed = 3

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "consolidated" }

[output]
database = "out/results.db"
)";

}  // namespace

TEST_CASE("every command has --help and exits 0") {
  for (const char* command : {"run", "validate", "price", "plugins", "report"}) {
    CAPTURE(command);
    const auto result = run_tessel({command, "--help"});
    CHECK(result.code == 0);
    CHECK(result.out.find("Usage") != std::string::npos);
  }
}

TEST_CASE("command-line mistakes are user errors (exit 2)") {
  CHECK(run_tessel({}).code == 2);
  CHECK(run_tessel({"frobnicate"}).code == 2);
  CHECK(run_tessel({"report"}).code == 2);
  CHECK(run_tessel({"report", "x.db", "--format", "xml"}).code == 2);
  for (const char* command : {"report", "plot"}) {
    const auto result = run_tessel({command, "x.db", "--over", "workload.path"});
    CHECK(result.code == 2);
    CHECK(result.err.find("--over requires --by") != std::string::npos);
  }
}

TEST_CASE("run writes the database and prints the summary table") {
  TempDir dir;
  dir.write("small.toml", kSmall);
  const auto result = run_tessel({"run", "small.toml"}, dir.path());
  REQUIRE(result.code == 0);
  for (const char* column : {"jobs", "avg JCT", "p50 JCT", "p95 JCT", "p99 JCT", "avg queueing", "makespan",
                             "GPU util", "preemptions"})
    CHECK(result.out.find(column) != std::string::npos);
  CHECK(result.out.find("results: out/results.db (run 1)") != std::string::npos);
  CHECK(fs::exists(dir.path() / "out/results.db"));

  const auto csv = run_tessel({"report", "out/results.db", "--format", "csv"}, dir.path());
  REQUIRE(csv.code == 0);
  CHECK(csv.out.starts_with("run,label,status,jobs,finished,unfinished,avg_jct_s,"));
  CHECK(csv.out.find("\n1,small,complete,50,50,") != std::string::npos);  // the label defaults to the file name

  const auto json = run_tessel({"report", "out/results.db", "--format", "json"}, dir.path());
  REQUIRE(json.code == 0);
  CHECK(json.out.find("\"status\": \"complete\"") != std::string::npos);

  CHECK(run_tessel({"report", "out/results.db", "--run", "9"}, dir.path()).code == 2);
}

TEST_CASE("--db and --set override the config") {
  TempDir dir;
  dir.write("small.toml", kSmall);
  const auto result =
      run_tessel({"run", "small.toml", "--db", "other.db", "--set", "workload.jobs=20", "--set",
                  "output.label=tiny", "-q"},
                 dir.path());
  REQUIRE(result.code == 0);
  CHECK(result.out.empty());
  const auto report = run_tessel({"report", "other.db", "--format", "csv"}, dir.path());
  CHECK(report.out.find("\n1,tiny,complete,20,20,") != std::string::npos);
}

TEST_CASE("config errors print file:line:col and exit 2") {
  TempDir dir;
  struct Case {
    const char* name;
    std::string toml;
    std::string expected;
  };
  const std::string base = kSmall;
  const Case cases[] = {
      {"unknown key", "[cluster]\nnodes = 4\ngpus_per_node = 4\npack_factr = 2\n",
       "bad.toml:4:1: unknown key 'pack_factr' in [cluster] (valid: cpus_per_node, events, gpu_mem_gb, gpu_type, gpus_per_node, "
       "mem_gb_per_node, nodes, nodes_per_rack)"},
      {"wrong type", "[cluster]\nnodes = \"four\"\ngpus_per_node = 4\n",
       "bad.toml:2:9: 'nodes' in [cluster] must be an integer, got a string"},
      {"negative GPU count", "[cluster]\nnodes = 4\ngpus_per_node = -4\n",
       "bad.toml:3:17: 'gpus_per_node' in [cluster] must be in 1..1024, got -4"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    // Append a valid rest of the experiment so that only this error shows.
    dir.write("bad.toml", c.toml + base.substr(base.find("[workload]")));
    const auto result = run_tessel({"validate", "bad.toml"}, dir.path());
    CHECK(result.code == 2);
    CHECK(result.err == c.expected + "\n");
  }
}

TEST_CASE("an unknown plugin is answered with the valid names") {
  TempDir dir;
  std::string toml = kSmall;
  toml.replace(toml.find("\"fifo\""), 6, "\"fifoo\"");
  dir.write("bad.toml", toml);
  const auto result = run_tessel({"validate", "bad.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.starts_with("bad.toml:12:25: unknown allocation plugin 'fifoo' (valid: "));
  CHECK(result.err.find("fifo") != std::string::npos);
  CHECK(result.err.find("first_fit") == std::string::npos);  // only allocation plugins are listed
}

TEST_CASE("a plugin of the wrong stage is named as such") {
  TempDir dir;
  std::string toml = kSmall;
  toml.replace(toml.find("\"consolidated\""), 14, "\"fifo\"");
  dir.write("bad.toml", toml);
  const auto result = run_tessel({"validate", "bad.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err == "bad.toml:13:24: 'fifo' is an allocation plugin, not a placement plugin\n");
}

TEST_CASE("plugin arguments are checked against the plugin's schema") {
  TempDir dir;
  std::string toml = kSmall;
  toml.replace(toml.find("{ plugin = \"fifo\" }"), 19, "{ plugin = \"fifo\", backfil = true, backfill = 1 }");
  dir.write("bad.toml", toml);
  const auto result = run_tessel({"validate", "bad.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err ==
        "bad.toml:12:43: unknown argument 'backfil' for allocation plugin 'fifo' (valid: backfill, gpu_type, min_seconds_between_allocations, packing_threshold)\n"
        "bad.toml:12:60: argument 'backfill' of allocation plugin 'fifo' expects boolean, got an integer\n");
}

TEST_CASE("validate refuses a trace's arrival past the simulated clock's end, as a run would") {
  TempDir dir;
  dir.write("trace.csv", "arrival,gpus,duration\n0,1,100\n2e12,1,100\n3e12,1,100\n");
  std::string toml = kSmall;
  const std::size_t workload = toml.find("[workload]");
  toml.replace(workload, toml.find("[scheduler]") - workload, "[workload]\nkind = \"csv\"\npath = \"trace.csv\"\n\n");
  dir.write("far.toml", toml);
  const std::string expected =
      "tessel: job 1 would arrive at t=2e+12 s, past the 1e12 s (31,700 years) a simulation runs: see [workload]'s "
      "arrivals\n";
  const auto checked = run_tessel({"validate", "far.toml"}, dir.path());
  CHECK(checked.code == 2);
  CHECK(checked.out.empty());
  CHECK(checked.err == expected);
  const auto ran = run_tessel({"run", "far.toml"}, dir.path());
  CHECK(ran.code == 2);
  CHECK(ran.err.ends_with(expected));
  const fs::path database = dir.path() / "out/results.db";  // opened beside the simulation's making, or not
  CHECK((!fs::exists(database) || count(database, "SELECT count(*) FROM runs") == 0));  // refused before a run row
}

TEST_CASE("serve checks its throughput model before it opens the database") {
  TempDir dir;
  const fs::path secret = dir.write("secret", "a-shared-secret-for-the-tests-0123456789\n");
  ::chmod(secret.c_str(), 0600);
  dir.write("serve.toml", "[scheduler]\nallocation = { plugin = \"fifo\" }\nplacement = { plugin = \"first_fit\" }\n"
                          "[serve]\nmodel = { name = \"gavel-table\", path = \"missing.json\" }\n");
  // `timeout`: were the model not checked, the daemon would serve on.
  const auto result = run_command({"timeout", "20", tessel_exe().string(), "serve", "serve.toml", "--secret-file",
                                   secret.string(), "--listen", "127.0.0.1:0", "--db", "x.db"},
                                  dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.starts_with("serve.toml:5:40: cannot read Gavel throughputs '"));
  CHECK_FALSE(fs::exists(dir.path() / "x.db"));
}

TEST_CASE("a full disk is the user's to fix: exit 2 naming the database, and no half-written run") {
  TempDir dir;
  dir.write("small.toml", kSmall);
  const TestMount disk = TestMount::tmpfs(dir.path() / "out", 192 * 1024);
  if (!disk.mounted()) return;  // mounting needs root; CI runs as root
  // The schema and the run's row fit in 192 KiB (in 8 KiB pages; 160 KiB do not hold them); 2,000 jobs' rows do not.
  const auto result = run_tessel({"run", "small.toml", "--set", "workload.jobs=2000"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.find((dir.path() / "out/results.db").string() + ": cannot write: the disk is full") !=
        std::string::npos);
  CHECK(result.err.find("internal error") == std::string::npos);
  // The rows went in one transaction, rolled back: the run is marked failed, with nothing half-written.
  const auto report = run_tessel({"report", "out/results.db", "--format", "csv"}, dir.path());
  REQUIRE(report.code == 0);
  CHECK(report.out.find("\n1,small,failed,") != std::string::npos);
  CHECK(count(dir.path() / "out/results.db", "SELECT count(*) FROM jobs") == 0);
}

TEST_CASE("a read-only database: run exits 2 naming it, report still reads it") {
  TempDir dir;
  dir.write("small.toml", kSmall);
  REQUIRE(run_tessel({"run", "small.toml"}, dir.path()).code == 0);
  const TestMount file = TestMount::read_only(dir.path() / "out/results.db");
  if (!file.mounted()) return;  // mounting needs root; CI runs as root
  const auto result = run_tessel({"run", "small.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.find("out/results.db: cannot write: the file or its folder is read-only") != std::string::npos);
  CHECK(run_tessel({"report", "out/results.db"}, dir.path()).code == 0);
}

TEST_CASE("a database in a read-only folder: run exits 2 naming it, report still reads it") {
  TempDir dir;
  dir.write("small.toml", kSmall);
  REQUIRE(run_tessel({"run", "small.toml"}, dir.path()).code == 0);
  const TestMount folder = TestMount::read_only(dir.path() / "out");
  if (!folder.mounted()) return;  // mounting needs root; CI runs as root
  const auto result = run_tessel({"run", "small.toml"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.find("out/results.db: cannot open it, or its journal beside it") != std::string::npos);
  CHECK(result.err.find("not an SQLite database") == std::string::npos);
  // SQLite cannot create the WAL index there: the finished file is read as one nobody writes.
  const auto report = run_tessel({"report", "out/results.db", "--format", "csv"}, dir.path());
  CHECK(report.code == 0);
  CHECK(report.out.find("\n1,small,complete,50,50,") != std::string::npos);
}

TEST_CASE("a database whose folder cannot be made: exit 2 naming it, not an internal error") {
  TempDir dir;
  dir.write("small.toml", kSmall);
  dir.write("blocker", "a file where the folder would go\n");
  const auto result = run_tessel({"run", "small.toml", "--db", "blocker/results.db"}, dir.path());
  CHECK(result.code == 2);
  CHECK(result.err.find("blocker/results.db: cannot create its folder 'blocker': ") != std::string::npos);
  CHECK(result.err.find("internal error") == std::string::npos);
}

TEST_CASE("a missing config file, or a directory, is a user error") {
  const auto result = run_tessel({"run", "no/such.toml"});
  CHECK(result.code == 2);
  CHECK(result.err == "no/such.toml: cannot open config: No such file or directory\n");
  // A directory opens, and once read as an empty file: five missing keys.
  TempDir dir;
  const auto folder = run_tessel({"run", dir.path().string()});
  CHECK(folder.code == 2);
  CHECK(folder.err == dir.path().string() + ": cannot open config: Is a directory\n");
  const auto database = run_tessel({"report", dir.path().string()});
  CHECK(database.code == 2);
  CHECK(database.err == "tessel: " + dir.path().string() + ": a directory, not a results database\n");
}

TEST_CASE("validate accepts a good experiment without running it") {
  TempDir dir;
  dir.write("small.toml", kSmall);
  const auto result = run_tessel({"validate", "small.toml"}, dir.path());
  CHECK(result.code == 0);
  CHECK(result.out == "small.toml: ok: 50 jobs on 4 nodes, 16 GPUs, accept_all -> fifo -> consolidated -> none\n");
  CHECK_FALSE(fs::exists(dir.path() / "out"));
}

TEST_CASE("price prices each case without simulating, and refuses bad cases with exit 2") {
  TempDir dir;
  const std::string case_text = R"(
[[case]]
name = "one node"
model = { name = "parallel-3d", achieved_tflops = { v100 = 100 }, intra_node_gb_per_s = 100, sequence_length = 1000, hidden_per_layer = 1000 }
parameters = 1.2e10
batch_size = 8
gpu_type = "v100"
gpu_mem_gb = 1000
gpus = 8
tensor_parallel = 1
pipeline_parallel = 4
)";
  dir.write("cases.toml", case_text);
  // 1.7428 s a step, worked by hand in tests/test_models.cpp; 96 B s L h^2 (1 + s/6h + V/16Lh) FLOPs.
  const auto json = run_tessel({"price", "cases.toml", "--format", "json"}, dir.path());
  REQUIRE(json.code == 0);
  const auto rows = nlohmann::json::parse(json.out);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["series"] == "cases");
  CHECK(rows[0]["case"] == "one node");
  CHECK(rows[0]["steps_per_s"].get<double>() == doctest::Approx(1 / 1.7428));
  const double flops = 96.0 * 8 * 1000 * 10 * 1e8 * (1 + 1000 / 6e4 + 51200 / (16 * 10 * 1e4));
  CHECK(rows[0]["flops_per_gpu"].get<double>() == doctest::Approx(flops / 1.7428 / 8));
  const auto table = run_tessel({"price", "cases.toml"}, dir.path());
  CHECK(table.code == 0);
  CHECK(table.out.starts_with("case"));
  CHECK(table.out.find("one node") != std::string::npos);

  std::string bad = case_text;
  bad.replace(bad.find("hidden_per_layer = 1000"), 23, R"(pipeline_schedule = "zigzag")");
  dir.write("bad.toml", bad + "\n[[case]]\nname = \"no gpus\"\ngpu_type = \"v100\"\ngpu_mem_gb = 1\n");
  const auto refused = run_tessel({"price", "bad.toml"}, dir.path());
  CHECK(refused.code == 2);
  CHECK(refused.err.find("unknown pipeline_schedule 'zigzag' in [case[0].model] (valid: 1f1b, interleaved)") !=
        std::string::npos);
  CHECK(refused.err.find("[case[1]] is missing required key 'gpus'") != std::string::npos);
  dir.write("empty.toml", "");
  CHECK(run_tessel({"price", "empty.toml"}, dir.path()).code == 2);
}

TEST_CASE("price refuses a written shape the simulator could never make: split, nodes") {
  TempDir dir;
  const std::string head = "[[case]]\nname = \"c\"\nmodel = \"parallel-3d\"\nparameters = 1e9\nbatch_size = 8\ngpu_type = \"a100\"\n"
                           "gpu_mem_gb = 80\ngpus = 8\n";
  dir.write("split.toml", head + "tensor_parallel = 3\npipeline_parallel = 1\nnodes = 16\n");
  const auto split = run_tessel({"price", "split.toml"}, dir.path());
  CHECK(split.code == 2);
  CHECK(split.err.find("tensor_parallel x pipeline_parallel (3) in [case[0]] must divide gpus (8)") !=
        std::string::npos);
  CHECK(split.err.find("'nodes' in [case[0]] is 16, more than its 8 GPUs") != std::string::npos);
  dir.write("alone.toml", head + "pipeline_parallel = 2\n");
  const auto alone = run_tessel({"price", "alone.toml"}, dir.path());
  CHECK(alone.code == 2);
  CHECK(alone.err.find("'tensor_parallel' and 'pipeline_parallel' in [case[0]] go together") != std::string::npos);
  dir.write("good.toml", head + "tensor_parallel = 2\npipeline_parallel = 2\nnodes = 1\n");
  CHECK(run_tessel({"price", "good.toml"}, dir.path()).code == 0);
}

TEST_CASE("the quickstart experiment runs") {
  TempDir dir;
  const auto result = run_tessel(
      {"run", (source_root() / "experiments/quickstart.toml").string(), "--db", "q.db"}, dir.path());
  REQUIRE(result.code == 0);
  CHECK(result.out.find("quickstart  complete   400       400") != std::string::npos);
}

// Throughput models: gavel-table against numbers read by hand from Gavel's
// file and from a small table written here, placement-penalty on hand-built
// shapes, their configuration errors, and whole runs priced by them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "config/toml_document.hpp"
#include "models/gavel_table.hpp"
#include "models/models.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// Invented numbers, chosen so that every rule gives a different answer.
// Alpha: measured on 1, 2 and 4 V100s; spread over servers only on 2.
// Beta: its 2-GPU entry is 0 (cannot run) and K80 has no entry for it.
const char* kSmallTable = R"json({
  "v100": {
    "('Alpha', 1)": {"null": 10.0, "('Alpha', 1)": [4.0, 4.0], "('Beta', 1)": [6.0, 3.0]},
    "('Alpha', 2)": {"null": 18.0, "('Beta', 2)": [0.0, 0.0]},
    "('Alpha', 4)": {"null": 30.0},
    "('Beta', 1)": {"null": 5.0, "('Alpha', 1)": [3.0, 6.0]},
    "('Beta', 2)": {"null": 0.0}
  },
  "v100_unconsolidated": {
    "('Alpha', 2)": {"null": 12.0}
  },
  "k80": {
    "('Alpha', 1)": {"null": 2.0}
  }
})json";

// `[workload] model = <spec>` read from a config file in `dir`, so that
// relative paths resolve against `dir`. Throws ConfigError.
std::shared_ptr<const ThroughputModel> model_from(const TempDir& dir, const std::string& spec) {
  const auto document = std::make_shared<const TomlDocument>(
      TomlDocument::load(dir.write("model.toml", "[workload]\nmodel = " + spec + "\n")));
  Diagnostics diagnostics;
  TableReader workload(*document, diagnostics, document->root()["workload"].as_table(), "workload");
  auto model = build_throughput_model(read_model_settings(workload, document), diagnostics);
  diagnostics.raise_if_any();
  return model;
}

// The diagnostics reading `spec` gives, one a line, with the config file's
// path shortened to "model.toml".
std::string problems(const TempDir& dir, const std::string& spec) {
  try {
    model_from(dir, spec);
  } catch (const ConfigError& e) {
    std::string lines;
    const std::string file = (dir.path() / "model.toml").string();
    for (const Diagnostic& d : e.diagnostics()) {
      std::string line = d.str();
      if (line.starts_with(file)) line = "model.toml" + line.substr(file.size());
      lines += (lines.empty() ? "" : "\n") + line;
    }
    return lines;
  }
  return "";
}

JobSpec job(const std::string& model) {
  JobSpec spec;
  spec.model = model;
  return spec;
}

Shape shape(int gpus, const std::string& gpu_type, int nodes = 1, int racks = 1) {
  Shape s;
  s.gpus = gpus;
  s.gpu_type = gpu_type;
  s.nodes = nodes;
  s.racks = racks;
  return s;
}

ClusterState cluster_of(const std::vector<std::string>& gpu_types) {
  std::vector<NodeSpec> nodes;
  for (const std::string& type : gpu_types) {
    NodeSpec node;
    node.name = "node-" + type;
    node.gpu_type = type;
    nodes.push_back(node);
  }
  return ClusterState(nodes);
}

const GavelTableModel& as_gavel(const ThroughputModel& model) {
  const auto* gavel = dynamic_cast<const GavelTableModel*>(&model);
  REQUIRE(gavel != nullptr);
  return *gavel;
}

}  // namespace

TEST_CASE("gavel-table reads Gavel's own file") {
  const auto file = shared_data("gavel/simulation_throughputs.json");
  if (!file) {
    MESSAGE("skipped: ../shared/data/gavel/simulation_throughputs.json is absent");
    return;
  }
  TempDir dir;
  const auto model = model_from(dir, R"({ name = "gavel-table", path = ")" + file->string() + R"(" })");
  const JobSpec resnet50 = job("ResNet-50 (batch size 64)");

  // Both numbers read from the file: "v100" and "v100_unconsolidated", ('ResNet-50 (batch size 64)', 4).
  CHECK(model->rate(resnet50, shape(4, "v100")) == 9.451949566394442);
  CHECK(model->rate(resnet50, shape(4, "v100", 2)) == 11.136430014818272);
  CHECK(model->rate(resnet50, shape(1, "k80")) == 0.6190282202246573);
  CHECK(model->rate(job("Transformer (batch size 32)"), shape(4, "K80")) == 7.984971344075782);
  CHECK(model->rate(job("Transformer (batch size 32)"), shape(4, "K80", 2)) == 6.950187717290474);
  // "k80_unconsolidated" has no ('ResNet-50 (batch size 64)', 4): the consolidated entry stands in.
  CHECK(model->rate(resnet50, shape(4, "k80", 2)) == 2.4122290974193286);
  // ('ResNet-50 (batch size 128)', 4) on K80 is 0 (cannot run): scaled up from its 1-GPU entry.
  CHECK(model->rate(job("ResNet-50 (batch size 128)"), shape(4, "k80")) == doctest::Approx(4 * 0.3472236920519382));

  const auto profiles = model->profiles();
  CHECK(profiles.size() == 26);
  CHECK(std::find(profiles.begin(), profiles.end(), "ResNet-50 (batch size 64)") != profiles.end());
  CHECK(model->check(cluster_of({"k80", "p100", "v100"})) == "");

  const auto colocated =
      as_gavel(*model).colocated_rates(resnet50, job("Transformer (batch size 32)"), shape(1, "v100"));
  REQUIRE(colocated.has_value());
  CHECK(colocated->first == 2.48752036332518);
  CHECK(colocated->second == 2.0519338792685047);
}

TEST_CASE("gavel-table: measured counts, linear scaling between them, spread jobs, shares") {
  TempDir dir;
  dir.write("throughputs.json", kSmallTable);
  const auto model = model_from(dir, R"({ name = "gavel-table", path = "throughputs.json" })");
  const JobSpec alpha = job("Alpha"), beta = job("Beta");

  CHECK(model->name() == "gavel-table");
  CHECK(std::vector<std::string>(model->profiles().begin(), model->profiles().end()) ==
        std::vector<std::string>{"Alpha", "Beta"});
  CHECK(model->rate(alpha, shape(1, "v100")) == 10);
  CHECK(model->rate(alpha, shape(2, "v100")) == 18);
  CHECK(model->rate(alpha, shape(4, "v100")) == 30);
  CHECK(model->rate(alpha, shape(3, "v100")) == 27);    // 18 on 2 GPUs, times 3/2
  CHECK(model->rate(alpha, shape(16, "v100")) == 120);  // 30 on 4 GPUs, times 4
  CHECK(model->rate(alpha, shape(0, "v100")) == 0);
  CHECK(model->rate(alpha, shape(1, "V100")) == 10);  // GPU types match in any case

  CHECK(model->rate(alpha, shape(2, "v100", 2)) == 12);  // the unconsolidated entry
  CHECK(model->rate(alpha, shape(4, "v100", 2)) == 30);  // none spread on 4: the consolidated one
  CHECK(model->rate(alpha, shape(3, "v100", 2)) == 18);  // 12 spread on 2 GPUs, times 3/2

  CHECK(model->rate(beta, shape(2, "v100")) == 10);  // the 0 on 2 GPUs is unmeasured: 5 on 1, times 2

  Shape half = shape(2, "v100");
  half.gpu_milli = 500;
  CHECK(model->rate(alpha, half) == 9);

  CHECK_THROWS_WITH_AS(model->rate(alpha, shape(1, "a100")),
                       "throughput model 'gavel-table' has no throughput for 'Alpha' on GPU type 'a100'", UserError);
  CHECK_THROWS_AS(model->rate(beta, shape(1, "k80")), UserError);

  const auto consolidated_only =
      model_from(dir, R"({ name = "gavel-table", path = "throughputs.json", unconsolidated = false })");
  CHECK(consolidated_only->rate(alpha, shape(2, "v100", 2)) == 18);
}

TEST_CASE("gavel-table checks the cluster's GPU types") {
  TempDir dir;
  dir.write("throughputs.json", kSmallTable);
  const auto model = model_from(dir, R"({ name = "gavel-table", path = "throughputs.json" })");
  CHECK(model->check(cluster_of({"v100"})) == "");
  CHECK(model->check(cluster_of({"V100"})) == "");
  CHECK(model->check(cluster_of({"k80"})) == "GPU type 'k80' has no throughput for 'Beta'");
  CHECK(model->check(cluster_of({"v100", "a100"})) ==
        "no throughputs for GPU type 'a100' (the table has: k80, v100)");
}

TEST_CASE("gavel-table keeps the space-sharing pairs of equal GPU counts") {
  TempDir dir;
  dir.write("throughputs.json", kSmallTable);
  const auto model = model_from(dir, R"({ name = "gavel-table", path = "throughputs.json" })");
  const GavelTableModel& gavel = as_gavel(*model);
  using Pair = std::optional<std::pair<double, double>>;
  CHECK(gavel.colocated_rates(job("Alpha"), job("Beta"), shape(1, "v100")) == Pair({6.0, 3.0}));
  CHECK(gavel.colocated_rates(job("Beta"), job("Alpha"), shape(1, "v100")) == Pair({3.0, 6.0}));
  CHECK(gavel.colocated_rates(job("Alpha"), job("Alpha"), shape(1, "v100")) == Pair({4.0, 4.0}));
  // Measured as 0 for both: they cannot share.
  CHECK(gavel.colocated_rates(job("Alpha"), job("Beta"), shape(2, "v100")) == std::nullopt);
  CHECK(gavel.colocated_rates(job("Alpha"), job("Beta"), shape(1, "k80")) == std::nullopt);
  CHECK(gavel.colocated_rates(job("Alpha"), job("Gamma"), shape(1, "v100")) == std::nullopt);
}

TEST_CASE("amdahl: sub-linear speedup by Amdahl's law") {
  TempDir dir;
  SUBCASE("serial fraction 0.25: n / (1 + 0.25 (n - 1))") {
    const auto model = model_from(dir, R"({ name = "amdahl", serial_fraction = 0.25 })");
    CHECK(model->name() == "amdahl");
    CHECK(model->profiles().empty());
    CHECK(model->rate(job(""), shape(1, "v100")) == 1);
    CHECK(model->rate(job(""), shape(2, "v100")) == doctest::Approx(1.6));        // 2 / 1.25
    CHECK(model->rate(job(""), shape(4, "v100")) == doctest::Approx(16.0 / 7));   // 4 / 1.75
    CHECK(model->rate(job(""), shape(4, "k80", 2)) == doctest::Approx(16.0 / 7)); // placement-blind
    Shape half = shape(2, "v100");
    half.gpu_milli = 500;
    CHECK(model->rate(job(""), half) == doctest::Approx(0.8));  // half of each of 2 GPUs
  }
  SUBCASE("the default fraction is 0.1; 0 is linear") {
    CHECK(model_from(dir, R"("amdahl")")->rate(job(""), shape(8, "v100")) == doctest::Approx(8 / 1.7));
    CHECK(model_from(dir, R"({ name = "amdahl", serial_fraction = 0 })")->rate(job(""), shape(8, "v100")) == 8);
  }
  SUBCASE("a fraction outside [0, 1) is refused") {
    CHECK(problems(dir, R"({ name = "amdahl", serial_fraction = 1 })") ==
          "model.toml:2:46: 'serial_fraction' in [workload.model] must be in [0, 1), got 1");
    CHECK(problems(dir, R"({ name = "amdahl", serial = 0.1 })") ==
          "model.toml:2:28: unknown key 'serial' in [workload.model] (valid: name, serial_fraction)");
  }
}

TEST_CASE("placement-penalty slows spread jobs by node and rack, per profile") {
  TempDir dir;
  const Shape one_node = shape(4, "v100"), two_nodes = shape(4, "v100", 2), two_racks = shape(4, "v100", 2, 2);

  SUBCASE("defaults: 0.9 across nodes, nothing more across racks, 0.6 for Tiresias's sensitive models") {
    const auto model = model_from(dir, R"({ name = "placement-penalty" })");  // over linear: rate = GPUs
    CHECK(model->name() == "placement-penalty");
    CHECK(model->profiles().empty());
    CHECK(model->rate(job("resnet50"), one_node) == 4);
    CHECK(model->rate(job("resnet50"), two_nodes) == doctest::Approx(3.6));
    CHECK(model->rate(job("resnet50"), two_racks) == doctest::Approx(3.6));
    for (const char* sensitive : {"alexnet", "vgg11", "vgg16", "vgg19"}) {
      CHECK(model->rate(job(sensitive), one_node) == 4);
      CHECK(model->rate(job(sensitive), two_nodes) == doctest::Approx(2.4));
    }
  }

  SUBCASE("arguments and per-profile overrides") {
    const auto model =
        model_from(dir, R"({ name = "placement-penalty", across_nodes = 0.8, across_racks = 0.6, )"
                        R"(models = { vgg19 = { across_nodes = 0.5 }, resnet50 = { across_racks = 0.7 }, )"
                        R"(vgg16 = { across_racks = 0.3 } } })");
    CHECK(model->rate(job("inception3"), one_node) == 4);
    CHECK(model->rate(job("inception3"), two_nodes) == doctest::Approx(3.2));
    CHECK(model->rate(job("inception3"), two_racks) == doctest::Approx(2.4));
    // Across racks a job gets the smaller factor: it spans nodes too.
    CHECK(model->rate(job("vgg19"), two_nodes) == doctest::Approx(2.0));
    CHECK(model->rate(job("vgg19"), two_racks) == doctest::Approx(2.0));
    // Left-out factors come from the top level, or from the built-in entry.
    CHECK(model->rate(job("resnet50"), two_nodes) == doctest::Approx(3.2));
    CHECK(model->rate(job("resnet50"), two_racks) == doctest::Approx(2.8));
    CHECK(model->rate(job("vgg16"), two_nodes) == doctest::Approx(2.4));
    CHECK(model->rate(job("vgg16"), two_racks) == doctest::Approx(1.2));
    CHECK(model->rate(job("alexnet"), two_racks) == doctest::Approx(2.4));
  }
}

TEST_CASE("placement-penalty wraps gavel-table") {
  TempDir dir;
  dir.write("throughputs.json", kSmallTable);
  const auto model =
      model_from(dir, R"({ name = "placement-penalty", models = { Alpha = { across_nodes = 0.5 } }, )"
                      R"(base = { name = "gavel-table", path = "throughputs.json", unconsolidated = false } })");
  CHECK(std::vector<std::string>(model->profiles().begin(), model->profiles().end()) ==
        std::vector<std::string>{"Alpha", "Beta"});
  CHECK(model->rate(job("Alpha"), shape(2, "v100")) == 18);
  CHECK(model->rate(job("Alpha"), shape(2, "v100", 2)) == doctest::Approx(9));
  CHECK(model->rate(job("Beta"), shape(2, "v100", 2)) == doctest::Approx(9));  // 10, times the default 0.9
  CHECK(model->check(cluster_of({"a100"})) ==
        "base model 'gavel-table': no throughputs for GPU type 'a100' (the table has: k80, v100)");
  CHECK(model->default_work(job("Alpha")) == 0);
}

TEST_CASE("model arguments are checked and located") {
  TempDir dir;
  dir.write("throughputs.json", kSmallTable);
  const std::string json = dir.path().string() + "/";

  CHECK(problems(dir, R"({ name = "gavel-table" })") ==
        "model.toml:2:9: [workload.model] is missing required key 'path'");
  CHECK(problems(dir, R"({ name = "gavel-table", path = "throughputs.json", unconsolidate = false })") ==
        "model.toml:2:60: unknown key 'unconsolidate' in [workload.model] (valid: name, path, unconsolidated)");
  CHECK(problems(dir, R"({ name = "gavel-table", path = 7 })") ==
        "model.toml:2:40: 'path' in [workload.model] must be a string, got an integer");
  CHECK(problems(dir, R"({ name = "gavel-table", path = "missing.json" })") ==
        "model.toml:2:40: cannot read Gavel throughputs '" + json +
            "missing.json': cannot open: No such file or directory");

  dir.write("broken.json", "{\n  \"v100\": {\n    \"('Alpha', 1)\": {\"null\": 1.0,}\n");
  CHECK(problems(dir, R"({ name = "gavel-table", path = "broken.json" })")
            .starts_with("model.toml:2:40: cannot read Gavel throughputs '" + json +
                         "broken.json': parse error at line 3, column 34: "));
  dir.write("bad_key.json", R"json({"v100": {"('Alpha' 1)": {"null": 1.0}}})json");
  CHECK(problems(dir, R"({ name = "gavel-table", path = "bad_key.json" })") ==
        "model.toml:2:40: cannot read Gavel throughputs '" + json +
            "bad_key.json': under \"v100\", key \"('Alpha' 1)\" is not of the form \"('<job type>', <GPU count>)\"");
  dir.write("no_null.json", R"json({"v100": {"('Alpha', 1)": {"('Alpha', 1)": [1.0, 1.0]}}})json");
  CHECK(problems(dir, R"({ name = "gavel-table", path = "no_null.json" })")
            .ends_with("no_null.json': under \"v100\", \"('Alpha', 1)\" needs a number under \"null\""));
  dir.write("orphan.json", R"json({"v100": {"('Alpha', 1)": {"null": 1.0}}, "k80_unconsolidated": {}})json");
  CHECK(problems(dir, R"({ name = "gavel-table", path = "orphan.json" })")
            .ends_with("orphan.json': \"k80_unconsolidated\" has no consolidated table \"k80\""));

  CHECK(problems(dir, R"({ name = "placement-penalty", across_nodes = 0, across_racks = 1.5, acros_nodes = 0.5 })") ==
        "model.toml:2:54: 'across_nodes' in [workload.model] must be in (0, 1], got 0\n"
        "model.toml:2:72: 'across_racks' in [workload.model] must be in (0, 1], got 1.5\n"
        "model.toml:2:77: unknown key 'acros_nodes' in [workload.model] (valid: across_nodes, across_racks, base, "
        "models, name)");
  CHECK(problems(dir, R"({ name = "placement-penalty", models = { vgg19 = 0.5, vgg16 = { nodes = 0.5 } } })") ==
        "model.toml:2:73: unknown key 'nodes' in [workload.model.models.vgg16] (valid: across_nodes, across_racks)\n"
        "model.toml:2:58: 'vgg19' in [workload.model.models] must be a table, got a float");
  CHECK(problems(dir, R"({ name = "placement-penalty", base = { name = "gavel-table" } })") ==
        "model.toml:2:46: [workload.model.base] is missing required key 'path'");
  CHECK(problems(dir, R"({ name = "placement-penalty", models = { Gamma = {} }, )"
                      R"(base = { name = "gavel-table", path = "throughputs.json" } })") ==
        "model.toml:2:58: base model 'gavel-table' has no profile 'Gamma' (valid: Alpha, Beta)");
}

namespace {

// Two nodes of 4 GPUs. Job 0 takes 2 GPUs of node 0, so first_fit spreads
// job 1 over the rest of node 0 and node 1; both start at time 0.
std::string two_node_experiment(const std::string& gpu_type, const std::string& model) {
  return R"([cluster]
nodes = 2
gpus_per_node = 4
gpu_type = ")" + gpu_type + R"("

[workload]
kind = "csv"
path = "trace.csv"
model = )" + model + R"(

[scheduler]
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
}

}  // namespace

TEST_CASE("a run on K80s priced by gavel-table: spread jobs run at the unconsolidated rate") {
  const auto file = shared_data("gavel/simulation_throughputs.json");
  if (!file) {
    MESSAGE("skipped: ../shared/data/gavel/simulation_throughputs.json is absent");
    return;
  }
  TempDir dir;
  dir.write("trace.csv",
            "arrival,gpus,duration,model\n"
            "0,2,1000,A3C\n"
            "0,4,600,Transformer (batch size 32)\n");
  const std::string gavel = R"({ name = "gavel-table", path = ")" + file->string() + R"(" })";

  const RunResults results = simulate(dir, two_node_experiment("k80", gavel));
  REQUIRE(results.jobs.size() == 2);
  // Job 0 runs consolidated, as its duration was priced: 1000 s.
  CHECK(finish_times(results)[0] == doctest::Approx(1000));
  // Job 1's 600 s were priced on 4 consolidated K80s (7.984971344075782 steps/s),
  // and it runs spread over two nodes (6.950187717290474 steps/s).
  const double work = 600 * 7.984971344075782;
  CHECK(results.jobs[1].total_work == doctest::Approx(work));
  CHECK(finish_times(results)[1] == doctest::Approx(work / 6.950187717290474));

  // With Gavel's consolidated pricing and a 0.5 penalty instead, job 1 takes twice its duration.
  const std::string penalized_gavel = R"({ name = "placement-penalty", across_nodes = 0.5, )"
                                      R"(base = { name = "gavel-table", path = ")" +
                                      file->string() + R"(", unconsolidated = false } })";
  const RunResults penalized = simulate(dir, two_node_experiment("k80", penalized_gavel));
  CHECK(finish_times(penalized)[0] == doctest::Approx(1000));
  CHECK(finish_times(penalized)[1] == doctest::Approx(1200));
}

TEST_CASE("a run priced by a small gavel table: scaling and spreading by hand") {
  TempDir dir;
  dir.write("throughputs.json", kSmallTable);
  dir.write("trace.csv",
            "arrival,gpus,duration,model\n"
            "0,2,1000,Beta\n"
            "0,3,600,Alpha\n");
  const RunResults results =
      simulate(dir, two_node_experiment("V100", R"({ name = "gavel-table", path = "throughputs.json" })"));
  REQUIRE(results.jobs.size() == 2);
  // Job 0, Beta on 2 GPUs of one node: 10 steps/s (5 on one GPU, times 2), as priced.
  CHECK(results.jobs[0].total_work == doctest::Approx(1000 * 10));
  CHECK(finish_times(results)[0] == doctest::Approx(1000));
  // Job 1, Alpha on 3 GPUs: priced packed at 27 steps/s (18 on 2, times 3/2); it
  // runs over two nodes at 18 steps/s (12 spread on 2, times 3/2).
  CHECK(results.jobs[1].total_work == doctest::Approx(600 * 27));
  CHECK(finish_times(results)[1] == doctest::Approx(600 * 27 / 18.0));
}

TEST_CASE("a cluster of a GPU type the table lacks is refused before the run") {
  TempDir dir;
  dir.write("throughputs.json", kSmallTable);
  dir.write("trace.csv", "arrival,gpus,duration,model\n0,1,10,Alpha\n");
  CHECK_THROWS_WITH_AS(
      simulate(dir, two_node_experiment("a100", R"({ name = "gavel-table", path = "throughputs.json" })")),
      "throughput model 'gavel-table': no throughputs for GPU type 'a100' (the table has: k80, v100)", UserError);
}

namespace {

Shape parallel_shape(int gpus, int nodes, const std::string& gpu_type, double gpu_mem_gb, int tp, int pp) {
  Shape shape;
  shape.gpus = gpus;
  shape.nodes = nodes;
  shape.gpu_type = gpu_type;
  shape.gpu_mem_gb = gpu_mem_gb;
  shape.layout.tensor_parallel = tp;
  shape.layout.pipeline_parallel = pp;
  return shape;
}

JobSpec parallel_job(double parameters, int batch_size) {
  JobSpec job;
  job.parameters = parameters;
  job.batch_size = batch_size;
  return job;
}

}  // namespace

// SC'21 Table 1 (experiments/megatron): each row's shape, layout and batch on
// DGX A100 nodes at datasheet bandwidths, microbatch 1. Pinned at what the
// roofline model gives now, beside the published figure (ours are 1% below to
// 19% above it; experiments/megatron/README.md prices the rows at NVIDIA's own settings).
TEST_CASE("parallel-3d prices SC'21's weak-scaling table from datasheets") {
  struct Row {
    const char* name;
    double parameters;
    int heads, hidden, layers, tp, pp, gpus, batch;
    double published, ours;  // TFLOP/s per GPU
  };
  const Row rows[] = {
      {"1.7B", 1.7e9, 24, 2304, 24, 1, 1, 32, 512, 137, 136.29},
      {"3.6B", 3.6e9, 32, 3072, 30, 2, 1, 64, 512, 138, 143.52},
      {"7.5B", 7.5e9, 32, 4096, 36, 4, 1, 128, 512, 142, 141.84},
      {"18B", 18.4e9, 48, 6144, 40, 8, 1, 256, 1024, 135, 144.43},
      {"39B", 39.1e9, 64, 8192, 48, 8, 2, 512, 1536, 138, 159.60},
      {"76B", 76.1e9, 80, 10240, 60, 8, 4, 1024, 1792, 140, 166.87},
      {"145B", 145.6e9, 96, 12288, 80, 8, 8, 1536, 2304, 148, 167.60},
      {"310B", 310.1e9, 128, 16384, 96, 8, 16, 1920, 2160, 155, 175.08},
      {"530B", 529.6e9, 128, 20480, 105, 8, 35, 2520, 2520, 163, 177.84},
      {"1T", 1008.0e9, 160, 25600, 128, 8, 64, 3072, 3072, 163, 178.12},
  };
  TempDir dir;
  for (const Row& row : rows) {
    CAPTURE(row.name);
    const auto model = model_from(
        dir, "{ name = \"parallel-3d\", layers = " + std::to_string(row.layers) +
                 ", hidden_size = " + std::to_string(row.hidden) + ", attention_heads = " + std::to_string(row.heads) +
                 ", intra_node_gb_per_s = 300, inter_node_gb_per_s = 25 }");
    const JobSpec job = parallel_job(row.parameters, row.batch);
    const Shape shape = parallel_shape(row.gpus, row.gpus / 8, "a100", 80, row.tp, row.pp);
    const auto* flops = dynamic_cast<const FlopCount*>(model.get());
    REQUIRE(flops != nullptr);
    // The paper's count (SC'21, Appendix, eq. 3), written out here.
    const double s = 2048, h = row.hidden, l = row.layers;
    CHECK(flops->flops_per_unit(job, shape) ==
          doctest::Approx(96 * row.batch * s * l * h * h * (1 + s / (6 * h) + 51200 / (16 * l * h))));
    const double tflops = flops->flops_per_unit(job, shape) * model->rate(job, shape) / row.gpus / 1e12;
    CHECK(tflops == doctest::Approx(row.ours).epsilon(0.001));
  }
  const auto small = model_from(dir, R"({ name = "parallel-3d", layers = 24, hidden_size = 2304, attention_heads = 24 })");
  // Without the datasheet bandwidths the same row is slower: the defaults are a V100 cluster's.
  const JobSpec job = parallel_job(1.7e9, 512);
  const Shape shape = parallel_shape(32, 4, "a100", 80, 1, 1);
  CHECK(dynamic_cast<const FlopCount&>(*small).flops_per_unit(job, shape) * small->rate(job, shape) / 32 / 1e12 <
        rows[0].ours);
}

// By hand, with a measured rate: 1.2e10 parameters, hidden_per_layer 1000 ->
// h = 1e4, L = 10; 100 TFLOP/s, 100 GB/s; s = 1000, b = 1; batch 8 on 8 GPUs
// of one node as (t, p) = (1, 4): d = 2, m = 4 microbatches.
//   compute   8 x 1.2e10 x 1000 / 4 / 1e14            = 0.24 s
//   pipeline  2 x 2 bytes x 1000 x 1e4 / 1e11          = 4e-4 s   (x2 interleaved)
//   allreduce 2 x 1/2 x 2 bytes x 1.2e10 / 4 / 1e11    = 0.06 s
//   1F1B        (4 + 3)     (0.24 + 4e-4) + 0.06 = 1.7428 s
//   interleaved (4 + 3 / 2) (0.24 + 8e-4) + 0.06 = 1.3844 s
TEST_CASE("parallel-3d: the interleaved schedule divides the bubble by its chunks and sends chunks times as much") {
  TempDir dir;
  const std::string common =
      R"(name = "parallel-3d", achieved_tflops = { v100 = 100 }, intra_node_gb_per_s = 100, )"
      R"(sequence_length = 1000, hidden_per_layer = 1000)";
  const JobSpec job = parallel_job(1.2e10, 8);
  const Shape shape = parallel_shape(8, 1, "v100", 1000, 1, 4);
  CHECK(1 / model_from(dir, "{ " + common + " }")->rate(job, shape) == doctest::Approx(1.7428));
  CHECK(1 / model_from(dir, "{ " + common + R"(, pipeline_schedule = "1f1b" })")->rate(job, shape) ==
        doctest::Approx(1.7428));
  CHECK(1 / model_from(dir, "{ " + common + R"(, pipeline_schedule = "interleaved" })")->rate(job, shape) ==
        doctest::Approx(1.3844));
  // Four chunks: (4 + 3/4) (0.24 + 16e-4) + 0.06.
  CHECK(1 / model_from(dir, "{ " + common + R"(, pipeline_schedule = "interleaved", model_chunks = 4 })")
                    ->rate(job, shape) == doctest::Approx(4.75 * 0.2416 + 0.06));
}

TEST_CASE("parallel-3d refuses an unknown pipeline schedule, and chunks without interleaving") {
  TempDir dir;
  CHECK(problems(dir, R"({ name = "parallel-3d", pipeline_schedule = "zigzag" })") ==
        "model.toml:2:53: unknown pipeline_schedule 'zigzag' in [workload.model] (valid: 1f1b, interleaved)");
  CHECK(problems(dir, R"({ name = "parallel-3d", model_chunks = 4 })") ==
        "model.toml:2:48: model_chunks in [workload.model] applies to pipeline_schedule = \"interleaved\" only");
  CHECK(problems(dir, R"({ name = "parallel-3d", matmul_efficiency = { a100 = 1.5 } })") ==
        "model.toml:2:62: 'a100' in [workload.model.matmul_efficiency] must be in 1e-09..1, got 1.5");
}

TEST_CASE("parallel-3d prices a GPU type from its datasheet when no measured rate is given") {
  TempDir dir;
  std::vector<NodeSpec> nodes(1);
  nodes[0].gpu_type = "a100";
  const auto model = model_from(dir, R"({ name = "parallel-3d" })");
  CHECK(model->check(ClusterState(nodes)).empty());
  nodes[0].gpu_type = "h100";
  CHECK(model_from(dir, R"({ name = "parallel-3d", peak_tflops = { h100 = 989 }, memory_gb_per_s = { h100 = 3350 } })")
            ->check(ClusterState(nodes)) ==
        "no achieved_tflops, nor peak_tflops, matmul_efficiency, memory_gb_per_s and multiprocessors, for GPU type "
        "'h100'");
  CHECK(model_from(dir, R"({ name = "parallel-3d", peak_tflops = { h100 = 989 }, memory_gb_per_s = { h100 = 3350 }, )"
                        R"(matmul_efficiency = { h100 = 0.7 }, multiprocessors = { h100 = 132 } })")
            ->check(ClusterState(nodes))
            .empty());
  // A measured rate (the V100's default, 39 TFLOP/s) wins over the datasheet, even with all of it given.
  const JobSpec job = parallel_job(1.3e9, 512);
  const Shape v100 = parallel_shape(8, 1, "v100", 32, 1, 1);
  const auto datasheet = model_from(dir, R"({ name = "parallel-3d", matmul_efficiency = { v100 = 0.8 } })");
  const auto measured = model_from(dir, R"({ name = "parallel-3d", matmul_efficiency = { v100 = 0.8 }, )"
                                        R"(achieved_tflops = { v100 = 39 } })");
  CHECK(datasheet->rate(job, v100) == doctest::Approx(measured->rate(job, v100)));
}

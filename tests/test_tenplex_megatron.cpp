// Megatron-LM's SC'21 figures (experiments/megatron): the gradient
// accumulation parallel-3d prices per microbatch, worked out by hand, and the
// experiment files against the settings of NVIDIA's scripts for the paper
// (NVIDIA/Megatron-LM, examples/sc21/run_table_1.sh, run_figure_12.sh,
// run_figure_13.sh, run_figure_16.sh).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>

#include "config/toml_document.hpp"
#include "parallel_3d.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

// With the shape given (layers, hidden size), a job's parameter count moves
// an A100's step, one replica (no data-parallel all-reduce) and all state in
// memory, only by the gradient accumulation and the optimizer step: each of
// the m + bubble microbatches of a stage adds its fp16 gradient of the
// stage's P / (t p) parameters into the running sum, reading both and
// writing the sum, 3 × 2 bytes a parameter at 2,039 GB/s, and the step's
// optimizer streams 52 bytes of each (tests/test_megatron_rows.cpp).
TEST_CASE("parallel-3d: each microbatch accumulates the stage's gradients through HBM, worked by hand") {
  const auto model = parallel_3d_model("layers = 8, hidden_size = 1024, attention_heads = 8, microbatch_size = 1");
  const double delta = 1e9;  // parameters more, the same layers
  // (t, p) = (1, 1): 4 microbatches, no bubble.
  //   (4 x 6 + 52) bytes x 1e9 / 2.039e12 B/s = 0.037273 s
  CHECK(step_seconds(*model, 2e9, 4, "a100", 1, 1, 1) - step_seconds(*model, 1e9, 4, "a100", 1, 1, 1) ==
        doctest::Approx((4 * 6 + 52) * delta / 2.039e12));
  // (t, p) = (2, 2) on 4 GPUs: 1F1B, 4 microbatches plus a bubble of p - 1 = 1,
  // each over a quarter of the parameters: (5 x 6 + 52) x 2.5e8 / 2.039e12 = 0.010054 s
  CHECK(step_seconds(*model, 2e9, 4, "a100", 4, 2, 2) - step_seconds(*model, 1e9, 4, "a100", 4, 2, 2) ==
        doctest::Approx((5 * 6 + 52) * delta / 4 / 2.039e12));
  // A measured achieved_tflops is an end-to-end rate that includes it: a V100
  // step grows only by the 8 P b s FLOPs a microbatch, at 39 TFLOP/s.
  //   4 x 8 x 1e9 x 1 x 2048 / 39e12 = 1.6804 s
  CHECK(step_seconds(*model, 2e9, 4, "v100", 1, 1, 1) - step_seconds(*model, 1e9, 4, "v100", 1, 1, 1) ==
        doctest::Approx(4 * 8 * delta * 2048 / 39e12));
}

// The experiment files give each case the settings of NVIDIA's script for
// it, so that the README's figures are Megatron-LM's own runs: a drift
// from the scripts here is a drift from the paper.
TEST_CASE("experiments/megatron: each case at the microbatch, interleaving and shape of NVIDIA's SC'21 scripts") {
  struct Script {
    int microbatch;
    int layers_per_virtual_stage;  // 0: no interleaving
  };
  // run_table_1.sh: MBS and --num-layers-per-virtual-pipeline-stage per row.
  const std::map<std::string, Script> table_1 = {
      {"1.7B", {16, 0}}, {"3.6B", {16, 0}}, {"7.5B", {16, 0}}, {"18B", {8, 0}},  {"39B", {4, 0}},
      {"76B", {2, 5}},   {"145B", {2, 5}},  {"310B", {1, 3}},  {"530B", {1, 1}}, {"1T", {1, 0}},
  };
  const TomlDocument weak = TomlDocument::load(source_root() / "experiments/megatron/weak_scaling.toml");
  const toml::array* cases = weak.root()["case"].as_array();
  REQUIRE(cases != nullptr);
  CHECK(cases->size() == table_1.size());
  for (const toml::node& node : *cases) {
    const toml::table& entry = *node.as_table();
    const std::string name = entry["name"].value_or(std::string());
    CAPTURE(name);
    REQUIRE(table_1.contains(name));
    const Script script = table_1.at(name);
    const toml::table& model = *entry["model"].as_table();
    const auto layers = model["layers"].value_or(std::int64_t{0});
    const auto tp = entry["tensor_parallel"].value_or(std::int64_t{0});
    const auto pp = entry["pipeline_parallel"].value_or(std::int64_t{0});
    const auto gpus = entry["gpus"].value_or(std::int64_t{0});
    const auto batch = entry["batch_size"].value_or(std::int64_t{0});
    CHECK(model["microbatch_size"].value_or(std::int64_t{0}) == script.microbatch);
    // Each replica runs a whole number of microbatches.
    const std::int64_t replicas = gpus / (tp * pp);
    REQUIRE(batch % (replicas * script.microbatch) == 0);
    const std::int64_t microbatches = batch / (replicas * script.microbatch);
    if (script.layers_per_virtual_stage == 0) {
      CHECK_FALSE(model.contains("pipeline_schedule"));
      continue;
    }
    CHECK(model["pipeline_schedule"].value_or(std::string()) == "interleaved");
    // Chunks per stage: the stage's layers over the script's virtual stage.
    CHECK(model["model_chunks"].value_or(std::int64_t{0}) * script.layers_per_virtual_stage == layers / pp);
    // Megatron-LM interleaves only a multiple of p microbatches.
    CHECK(microbatches % pp == 0);
  }

  // run_figure_12.sh: 96 layers on 12 stages, 2 layers per virtual stage.
  // run_figure_13.sh: 32 layers, hidden 20480; run_figure_16.sh: 32, 15360.
  const TomlDocument directions = TomlDocument::load(source_root() / "experiments/megatron/directions.toml");
  for (const toml::node& node : *directions.root()["case"].as_array()) {
    const toml::table& entry = *node.as_table();
    const std::string name = entry["name"].value_or(std::string());
    CAPTURE(name);
    const toml::table& model = *entry["model"].as_table();
    if (name == "175B interleaved") CHECK(model["model_chunks"].value_or(std::int64_t{0}) == 96 / 12 / 2);
    if (name.starts_with("162B")) CHECK(model["hidden_size"].value_or(std::int64_t{0}) == 20480);
    if (name.starts_with("91B")) CHECK(model["hidden_size"].value_or(std::int64_t{0}) == 15360);
    if (name.starts_with("162B") || name.starts_with("91B")) CHECK(model["layers"].value_or(std::int64_t{0}) == 32);
  }
}

// Megatron-LM's SC'21 weak-scaling table (experiments/megatron): the two
// HBM-bound costs parallel-3d prices beside the matrix products, worked by
// hand (the optimizer step and the fp32 cross entropy, counted in
// core/src/models/parallel_3d.cpp), and the figures of Table 1 and of the
// direction cases as `tessel price` gives them at NVIDIA's settings.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "parallel_3d.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

constexpr double kA100Bytes = 2039e9;  // HBM, bytes/s (the model's default)

// `tessel price FILE --format json`, by case name: TFLOP/s per GPU.
std::map<std::string, double> priced(const std::string& file) {
  TempDir dir;
  const auto result = run_tessel({"price", (source_root() / file).string(), "--format", "json"}, dir.path());
  REQUIRE(result.code == 0);
  std::map<std::string, double> tflops;
  for (const auto& row : nlohmann::json::parse(result.out))
    tflops[row["case"].get<std::string>()] = row["flops_per_gpu"].get<double>() / 1e12;
  return tflops;
}

}  // namespace

// One replica on one node, p = 1: a step is m microbatches of X seconds and
// then the optimizer, so twice the step of batch B less the step of 2B is the
// optimizer alone: 52 bytes of each of the GPU's P / t parameters through HBM.
TEST_CASE("parallel-3d: the optimizer step streams 52 bytes a parameter of the GPU through HBM, worked by hand") {
  const auto model = parallel_3d_model("layers = 8, hidden_size = 1024, attention_heads = 8, microbatch_size = 1");
  const double parameters = 1e9;
  const auto optimizer_seconds = [&](const std::string& gpu_type, int gpus, int tp) {
    return 2 * step_seconds(*model, parameters, 4, gpu_type, gpus, tp, 1) -
           step_seconds(*model, parameters, 8, gpu_type, gpus, tp, 1);
  };
  //   52 x 1e9 / 2.039e12 B/s = 0.025503 s
  CHECK(optimizer_seconds("a100", 1, 1) == doctest::Approx(52 * parameters / kA100Bytes));
  // (t, p) = (2, 1): each GPU steps half of the parameters.
  CHECK(optimizer_seconds("a100", 2, 2) == doctest::Approx(52 * parameters / 2 / kA100Bytes));
  // A measured achieved_tflops is an end-to-end rate that includes it: the
  // step is the microbatches alone.
  CHECK(optimizer_seconds("v100", 1, 1) == doctest::Approx(0).epsilon(1e-9));
}

// The last stage's logits, one microbatch of b s = 2048 tokens of hidden size
// 4096 on one GPU: a 2048 × 4096 × V product, forward and backward, then the
// fp32 cross entropy's 52 bytes a logit. V = 17280 and 34560 give 1080 and
// 2160 tiles of 256 × 128, 10 and 20 full waves of 108, and both products
// are compute-bound (over 1,000 FLOPs a byte), so the step grows by
//   3 x 2 x 2048 x 4096 x 17280 / (312e12 x 0.880 per full wave) = 3.1673 ms
//   + 52 x 2048 x 17280 / 2.039e12 B/s                             = 0.9025 ms
TEST_CASE("parallel-3d: the cross entropy streams 52 bytes a logit through HBM, worked by hand") {
  const std::string shape = "layers = 2, hidden_size = 4096, attention_heads = 32, microbatch_size = 1, ";
  const auto small = parallel_3d_model(shape + "vocabulary_size = 17280");
  const auto large = parallel_3d_model(shape + "vocabulary_size = 34560");
  const double matmul_flops = 271.2e12 * 324 / 320;  // the A100's 0.880 per full wave of its 312
  const double delta_vocabulary = 17280, tokens = 2048;
  const double expected =
      3 * 2 * tokens * 4096 * delta_vocabulary / matmul_flops + 52 * tokens * delta_vocabulary / kA100Bytes;
  CHECK(step_seconds(*large, 1e9, 1, "a100", 1, 1, 1) - step_seconds(*small, 1e9, 1, "a100", 1, 1, 1) ==
        doctest::Approx(expected));
  // Under tensor parallelism each GPU takes V / t of the logits, products and
  // cross entropy alike: at t = 2, twice the vocabularies give each GPU the
  // same shares, and the step grows by as much.
  const auto larger = parallel_3d_model(shape + "vocabulary_size = 69120");
  CHECK(step_seconds(*larger, 1e9, 1, "a100", 2, 2, 1) - step_seconds(*large, 1e9, 1, "a100", 2, 2, 1) ==
        doctest::Approx(expected));
}

// SC'21 Table 1 at the settings of NVIDIA's run_table_1.sh
// (experiments/megatron/weak_scaling.toml), beside the published TFLOP/s per
// GPU. Nine rows are within the 15%; 76B, at 1.18, is not
// (experiments/megatron/README.md says what is left).
TEST_CASE("experiments/megatron: Table 1 at NVIDIA's settings, pinned, and within 15% of the paper but 76B") {
  struct Row {
    double published, ours;
  };
  const std::map<std::string, Row> rows = {
      {"1.7B", {137, 154.50}}, {"3.6B", {138, 155.28}}, {"7.5B", {142, 157.35}}, {"18B", {135, 154.19}},
      {"39B", {138, 154.35}},  {"76B", {140, 165.10}},  {"145B", {148, 163.35}}, {"310B", {155, 173.36}},
      {"530B", {163, 172.16}}, {"1T", {163, 174.21}},
  };
  const auto tflops = priced("experiments/megatron/weak_scaling.toml");
  CHECK(tflops.size() == rows.size());
  for (const auto& [name, row] : rows) {
    CAPTURE(name);
    REQUIRE(tflops.contains(name));
    CHECK(tflops.at(name) == doctest::Approx(row.ours).epsilon(0.001));
    const double ratio = tflops.at(name) / row.published;
    if (name == "76B") {
      CHECK(ratio > 1.15);
    } else {
      CHECK(ratio <= 1.15);
      CHECK(ratio >= 0.85);
    }
  }
}

// SC'21's directions (experiments/megatron/directions.toml): Fig. 12, the
// interleaved schedule over 10% faster than 1F1B; Fig. 13, (t, p) = (8, 8)
// fastest on 64 GPUs; Fig. 16, microbatch 2 best.
TEST_CASE("experiments/megatron: the interleaving, (t, p) and microbatch directions of Figs. 12, 13 and 16") {
  const auto tflops = priced("experiments/megatron/directions.toml");
  for (const char* name : {"175B 1f1b", "175B interleaved", "162B t8 p8", "162B t2 p32", "162B t32 p2", "91B b1",
                           "91B b2", "91B b4", "91B b8"})
    REQUIRE(tflops.contains(name));
  CHECK(tflops.at("175B interleaved") > 1.10 * tflops.at("175B 1f1b"));
  CHECK(tflops.at("162B t8 p8") > tflops.at("162B t2 p32"));
  CHECK(tflops.at("162B t8 p8") > tflops.at("162B t32 p2"));
  CHECK(tflops.at("91B b2") > tflops.at("91B b1"));
  CHECK(tflops.at("91B b2") > tflops.at("91B b4"));
  CHECK(tflops.at("91B b4") > tflops.at("91B b8"));
}

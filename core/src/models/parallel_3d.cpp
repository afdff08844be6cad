// `parallel-3d`: GPT-style training with data, tensor and pipeline
// parallelism, after Megatron-LM's analysis (Narayanan et al., "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
// SC'21). Work is training steps of the job's global batch, which a
// reconfiguration keeps (as Tenplex does, so that convergence is unchanged).
//
//   [workload.model]
//   name = "parallel-3d"
//   achieved_tflops = { v100 = 39 }      # measured per-GPU rate, by GPU type; adds to these
//   peak_tflops = { a100 = 312, v100 = 125 }       # datasheet dense fp16/bf16 tensor rate
//   matmul_efficiency = { a100 = 0.880 }           # measured best matmul / peak, per full wave
//   memory_gb_per_s = { a100 = 2039, v100 = 900 }  # datasheet HBM bandwidth
//   multiprocessors = { a100 = 108, v100 = 80 }    # datasheet SM count
//   intra_node_gb_per_s = 150    # NVLink, per GPU
//   inter_node_gb_per_s = 12.5   # each GPU's share of its node's network
//   offload_gb_per_s = 16        # PCIe, for state that does not fit (below)
//   sequence_length = 2048
//   microbatch_size = 1          # sequences
//   batch_size = 512             # sequences, for jobs whose trace gives none
//   default_parameters = 1.3e9   # for jobs whose trace gives none
//   hidden_per_layer = 128       # GPT aspect ratio h / L
//   layers = 0                   # 0: derived from the parameters (below)
//   hidden_size = 0              # 0: derived from the parameters
//   attention_heads = 0          # 0: hidden_size / 128
//   vocabulary_size = 51200
//   pipeline_schedule = "1f1b"   # or "interleaved"
//   model_chunks = 2             # per pipeline stage, for "interleaved"
//   bytes_per_parameter = 16     # memory, see tessel/parallelism.hpp
//   activation_gb = 4
//
// The shape. A job of P parameters has hidden size h = cbrt(hidden_per_layer
// · P / 12) and L = P / (12 h²) layers, from P = 12 L h² (SC'21, Appendix),
// unless `hidden_size` and `layers` say, and h / 128 attention heads (GPT-3's
// head size for its 6.7B to 175B models, Brown et al., 2020, Table 2.1).
//
// The layout. Global batch B on G GPUs of a shape in N nodes, with layout
// (t, p) and d = floor(G / (t p)) replicas (tessel/parallelism.hpp). Each
// replica takes m = ceil(B / (d b)) microbatches of b sequences of length s.
// One microbatch on one pipeline stage costs compute (below), plus
//   tensor   (L / p) · k b s h (t-1)/t fp16 values all-reduced by ring within
//            the tensor-parallel group, at intra-node bandwidth, inter-node
//            if t GPUs exceed a node: k = 8 for two all-reduces forward and
//            two backward per layer (SC'21, §3.2), k = 12 when priced from
//            peak_tflops, which also counts the two of the recomputed forward
//            pass (a measured achieved_tflops keeps the first rule);
//   pipeline 2 · 2 b s h bytes to the next stage and back (activation,
//            gradient), at intra-node bandwidth while t p GPUs fit in a
//            node, else inter-node; v times that when interleaved;
//   gradient accumulation, when priced from peak_tflops: the microbatch's
//            fp16 gradient of each of the stage's P/(t p) parameters added
//            into the step's running sum, 3 fp16 values through HBM
//            (read both, write the sum: Megatron-LM's local DDP hook,
//            `main_grad.add_(grad)`, or PyTorch's AccumulateGrad under
//            torch DDP); 6 bytes a parameter against 8 b s FLOPs, so 5%
//            of a microbatch at b = 1 on an A100 and under 1% at b = 16.
// A step runs m microbatches plus the pipeline bubble: p - 1 of them with
// 1F1B (bubble fraction (p-1)/m, SC'21 §2.2.1), (p-1)/v with the interleaved
// schedule of v = model_chunks chunks per stage, which sends v times as much
// between stages (SC'21 §2.2.2). Then it all-reduces the fp16 gradients of
// its P/(t p) parameters over the d replicas by ring, 2 (d-1)/d of them per
// GPU, at intra-node bandwidth on one node, else inter-node, and, when priced
// from peak_tflops, takes the optimizer step (below):
//   step = (m + bubble) (compute + tensor + pipeline + accumulation) + allreduce
//          + optimizer
//   rate = 1 / step    steps per second
// The optimizer step is element-wise over the GPU's P/(t p) parameters, so
// HBM-bound: 52 bytes a parameter, counted in the fp16 step of Megatron-LM
// as SC'21 ran it (2021: megatron/optimizer/optimizer.py,
// Float16OptimizerWithFloat16Params.step, with apex's FusedAdam): the fp16
// gradient copied to an fp32 one (2 read, 4 written), unscaled and checked
// for inf in place (4 + 4), its norm for clipping (4 read), Adam (fp32
// weight, gradient, momentum and variance read, weight, momentum and variance
// written: 16 + 12), and the fp32 weights copied to the fp16 model (4 + 2).
// Clipping's rescale (4 + 4 more) runs only when the norm exceeds the limit
// and is left out. SC'21's figures are of end-to-end steps, the optimizer
// included (NVIDIA/Megatron-LM README, 2021: "includes all operations
// including data loading, optimization, and even logging").
//
// Compute, for a GPU type in achieved_tflops (a measured end-to-end rate):
// 8 P b s / (t p) FLOPs at that rate: 2 forward, 4 backward and 2
// recomputed-forward FLOPs per parameter and token (SC'21, Appendix).
// Otherwise, from peak_tflops, matmul_efficiency, memory_gb_per_s and
// multiprocessors, each operation of the stage's L / p layers priced by
// roofline (Williams et al., CACM 2009): a matrix product of m×k by k×n takes
//   max(2 m k n / (peak · matmul_efficiency · fill), 2 (m k + k n + m n) / memory)
// where fill is the share of tile slots its output uses: cuBLAS computes it
// in tiles of 256×128 (or 128×256, whichever fills better), one tile per
// multiprocessor at a time, so a product of T tiles takes ceil(T / SMs)
// waves, and partial tiles and partial waves cost whole ones (NVIDIA,
// "Matrix Multiplication Background User's Guide": tile and wave
// quantization). One layer's forward pass is the products of Megatron's tensor-parallel
// layer (SC'21 §3.2, Fig. 5): QKV (bs × h × 3h/t), the attention scores and
// their weighted values (per head, a b / t of s × h/a × s and s × s × h/a),
// the projection (bs × h/t × h) and the MLP (bs × h × 4h/t, bs × 4h/t × h);
// their FLOPs add up to the paper's 24 b s h² (1 + s/6h) per layer. A layer
// costs four forward passes of products (forward, its recomputation, and a
// backward pass of twice the forward: input and weight gradients), plus
// element-wise operations (layer norms, softmax, dropout, GeLU, residuals)
// that stream their activations through memory: 7 times the activation
// bytes s b h (10 + 24/t + 5 a s / (h t)) that Korthikanti et al. ("Reducing
// Activation Recomputation in Large Transformer Models", 2022, §4.1) count
// per layer, written and read once in the forward pass and in its
// recomputation (2 + 2), and read with their gradient and the gradient
// written in the backward pass (3). The last stage (the only one when p = 1)
// also computes the logits, a bs × h × V/t product, forward and backward
// (3 passes, not recomputed), and their cross entropy, which Megatron-LM
// (2021: megatron/model/gpt_model.py, mpu/cross_entropy.py; SC'21's scripts
// leave --fp16-lm-cross-entropy off) takes in fp32 over the bs × V/t logits,
// element by element through HBM: 52 bytes a logit, the fp16 logits made
// fp32 (2 read, 4 written), their maximum (4 read), less it (4 + 4), exp
// (4 + 4), its sum (4 read), divided by it (4 + 4), and in the backward
// pass the gradient scaled (4 + 4) and made fp16 again (4 + 2). Stages run
// in lock step at the last one's pace.
// The step's FLOPs, as the paper counts them (SC'21, Appendix, eq. 3):
//   96 B s L h² (1 + s/6h + V/16Lh)
//
// Memory (tessel/parallelism.hpp): a layout fits when each GPU's share of the
// state plus activation_gb is within shape.gpu_mem_gb. With a layout of all
// zeros the model prices the fastest layout that fits. When none fits (or a
// plugin names one that does not), the excess state is offloaded to host
// memory and streamed over PCIe, out and back, every step (as ZeRO-Offload,
// Ren et al., ATC'21, does): step += 2 · excess / offload_gb_per_s, and an all-zero layout then
// gets the fastest layout counting that cost. So the rate stays positive for
// any shape; elasticity plugins should not choose such layouts. A named
// layout whose split exceeds the GPUs is priced as an all-zero one.
//
// Defaults. achieved_tflops: a V100 sustains 39 TFLOP/s on one GPU
// (Shoeybi et al., "Megatron-LM", 2019, 30% of its peak), measured, not
// fitted; other types are priced from their datasheets: A100 SXM 312
// TFLOP/s dense bf16/fp16 and 2,039 GB/s HBM2e (80 GB; NVIDIA A100
// datasheet), V100 SXM2 125 TFLOP/s and 900 GB/s (NVIDIA V100 datasheet).
// matmul_efficiency: the largest matmul rate measured on an A100 SXM, 271.2
// of 312 TFLOP/s at 1024×10240×5120 (S. Bekman, "Machine Learning
// Engineering", compute/accelerator, Maximum Achievable Matmul FLOPS table,
// torch 2.6, 2025), over the 320 / 324 of three waves that shape fills: 0.880
// per full wave; no such measurement is given for a V100, so it has none.
// Multiprocessors: 108 on an A100, 80 on a V100 (NVIDIA's Ampere and Volta
// architecture whitepapers). 150 GB/s is a
// V100's six NVLink links of 25 GB/s, 12.5 GB/s one 100 Gb/s InfiniBand
// link per GPU, 16 GB/s PCIe 3.0 x16. Sequence 2048 and batch 512 are
// GPT-3's for its 1.3B model (Brown et al., 2020, Table 2.1), whose 6.7B to
// 175B models have h / L = 128. Vocabulary 51,200: SC'21 §5.1.
//
// Simplifications: no overlap of communication with computation; bandwidths
// are per GPU and uncontended; pipeline sends carry the whole b s h (SC'21
// §4.1's scatter/gather, which sends 1/t of it between nodes, is left out);
// with achieved_tflops, the s/6h and vocabulary terms, the logits, their
// cross entropy and the optimizer step are left out (a measured rate
// includes the last two); embeddings, kernel launches and the data loader
// cost nothing; microbatch size is fixed (SC'21 tunes it per model); idle
// GPUs of a layout that does not divide G cost nothing and help nothing; a
// job gives its parameters, not its shape.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "models/models.hpp"
#include "tessel/parallelism.hpp"

namespace tessel {

namespace {

using ByGpuType = std::map<std::string, double, std::less<>>;

enum class PipelineSchedule { one_f_one_b, interleaved };

struct Parallel3dOptions {
  ByGpuType achieved_tflops{{"v100", 39}};
  ByGpuType peak_tflops{{"a100", 312}, {"v100", 125}};
  // 271.2 of 312 TFLOP/s at 1024×10240×5120, whose 320 tiles fill 320 / 324
  // of three waves on 108 multiprocessors (see the top).
  ByGpuType matmul_efficiency{{"a100", 271.2 / 312 / (320.0 / 324)}};
  ByGpuType memory_gb_per_s{{"a100", 2039}, {"v100", 900}};
  ByGpuType multiprocessors{{"a100", 108}, {"v100", 80}};
  double intra_node_gb_per_s = 150;
  double inter_node_gb_per_s = 12.5;
  double offload_gb_per_s = 16;
  double sequence_length = 2048;
  double microbatch_size = 1;
  double batch_size = 512;
  double default_parameters = 1.3e9;
  double hidden_per_layer = 128;
  double layers = 0;
  double hidden_size = 0;
  double attention_heads = 0;
  double vocabulary_size = 51200;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  double model_chunks = 2;
  ParallelMemory memory;
};

constexpr double kFp16Bytes = 2;
constexpr double kPositive = 1e-9;  // the smallest value read for quantities that must be positive
constexpr double kHeadSize = 128;   // GPT-3's, see the top
// HBM bytes of Megatron-LM's fp16 optimizer step per parameter, and of its
// fp32 cross entropy per logit (both counted at the top).
constexpr double kOptimizerBytesPerParameter = 52;
constexpr double kCrossEntropyBytesPerLogit = 52;

// cuBLAS's largest output tile on Ampere, 256×128 (either way round), and
// the one this model assumes (NVIDIA, "Matrix Multiplication Background User's
// Guide", Deep Learning Performance documentation: tile and wave quantization).
constexpr double kTileRows = 256, kTileColumns = 128;

// A GPU type's roofline, when it is priced from its datasheet.
struct Roofline {
  double flops = 0;  // peak · matmul_efficiency, FLOP/s
  double bytes = 0;  // memory bandwidth, bytes/s
  double multiprocessors = 0;

  // The share of the GPU's tile slots that `count` products with m×n
  // outputs use: whole tiles in whole waves, one tile per multiprocessor.
  double wave_fill(double m, double n, double count) const {
    double best = 0;
    for (const auto& [rows, columns] : {std::pair{kTileRows, kTileColumns}, std::pair{kTileColumns, kTileRows}}) {
      const double tiles = std::ceil(m / rows) * std::ceil(n / columns) * count;
      const double waves = std::ceil(tiles / multiprocessors);
      best = std::max(best, m * n * count / (rows * columns) / (waves * multiprocessors));
    }
    return best;
  }

  // Seconds for `count` products of m×k by k×n in fp16.
  double matmul(double m, double k, double n, double count = 1) const {
    return count * std::max(2 * m * k * n / (flops * wave_fill(m, n, count)),
                            kFp16Bytes * (m * k + k * n + m * n) / bytes);
  }
};

struct GptShape {
  double layers, hidden, heads;
};

bool look_up(const ByGpuType& table, std::string_view type, double& value) {
  const auto it = table.find(type);
  if (it == table.end()) return false;
  value = it->second;
  return true;
}

class Parallel3dModel final : public ThroughputModel, public FlopCount {
 public:
  explicit Parallel3dModel(Parallel3dOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "parallel-3d"; }

  double rate(const JobSpec& job, const Shape& shape) const override {
    const JobLayout& layout = shape.layout;
    if (data_parallel(layout, shape.gpus) >= 1) return 1 / step_seconds(job, shape, layout);
    // All zeros (or a split larger than the shape): the fastest that fits,
    // else the fastest counting the offload.
    double fitting = std::numeric_limits<double>::infinity();
    double any = fitting;
    for (const JobLayout& candidate : parallel_layouts(shape)) {
      const double seconds = step_seconds(job, shape, candidate);
      any = std::min(any, seconds);
      if (options_.memory.fits(parameters(job), candidate, shape.gpu_mem_gb)) fitting = std::min(fitting, seconds);
    }
    return 1 / (std::isfinite(fitting) ? fitting : any);
  }

  double flops_per_unit(const JobSpec& job, const Shape& shape) const override {
    const GptShape gpt = gpt_shape(job);
    const double s = options_.sequence_length, h = gpt.hidden, l = gpt.layers;
    return 96 * batch_size(job, shape.layout) * s * l * h * h *
           (1 + s / (6 * h) + options_.vocabulary_size / (16 * l * h));
  }

  std::string check(const ClusterState& cluster) const override {
    for (const std::string& type : cluster.gpu_types())
      if (!options_.achieved_tflops.contains(type) && !roofline(type))
        return "no achieved_tflops, nor peak_tflops, matmul_efficiency, memory_gb_per_s and multiprocessors, "
               "for GPU type '" +
               type + "'";
    return {};
  }

 private:
  double parameters(const JobSpec& job) const {
    return job.parameters > 0 ? job.parameters : options_.default_parameters;
  }

  double batch_size(const JobSpec& job, const JobLayout& layout) const {
    return layout.batch_size > 0 ? layout.batch_size : job.batch_size > 0 ? job.batch_size : options_.batch_size;
  }

  GptShape gpt_shape(const JobSpec& job) const {
    const double params = parameters(job);
    const double hidden =
        options_.hidden_size > 0 ? options_.hidden_size : std::cbrt(options_.hidden_per_layer * params / 12);
    const double layers = options_.layers > 0 ? options_.layers : params / (12 * hidden * hidden);
    const double heads = options_.attention_heads > 0 ? options_.attention_heads : std::max(1.0, hidden / kHeadSize);
    return {layers, hidden, heads};
  }

  std::optional<Roofline> roofline(std::string_view type) const {
    double peak = 0, efficiency = 0, memory = 0, multiprocessors = 0;
    if (!look_up(options_.peak_tflops, type, peak) || !look_up(options_.matmul_efficiency, type, efficiency) ||
        !look_up(options_.memory_gb_per_s, type, memory) || !look_up(options_.multiprocessors, type, multiprocessors))
      return std::nullopt;
    return Roofline{peak * 1e12 * efficiency, memory * 1e9, multiprocessors};
  }

  // Seconds of one microbatch's forward and backward passes on the last
  // pipeline stage, from the GPU's roofline (the rule at the top).
  double stage_seconds(const Roofline& gpu, const GptShape& gpt, double tp, double pp) const {
    const double b = options_.microbatch_size, s = options_.sequence_length;
    const double h = gpt.hidden, a = gpt.heads, tokens = b * s;
    const double forward = gpu.matmul(tokens, h, 3 * h / tp) + gpu.matmul(s, h / a, s, b * a / tp) +
                           gpu.matmul(s, s, h / a, b * a / tp) + gpu.matmul(tokens, h / tp, h) +
                           gpu.matmul(tokens, h, 4 * h / tp) + gpu.matmul(tokens, 4 * h / tp, h);
    const double activation_bytes = s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp));
    const double layer = 4 * forward + 7 * activation_bytes / gpu.bytes;
    const double logit_count = tokens * options_.vocabulary_size / tp;
    const double logits = 3 * gpu.matmul(tokens, h, options_.vocabulary_size / tp) +
                          kCrossEntropyBytesPerLogit * logit_count / gpu.bytes;
    return (gpt.layers / pp) * layer + logits;
  }

  double step_seconds(const JobSpec& job, const Shape& shape, const JobLayout& layout) const {
    const double tp = layout.tensor_parallel, pp = layout.pipeline_parallel;
    const double dp = data_parallel(layout, shape.gpus);
    const double params = parameters(job);
    const GptShape gpt = gpt_shape(job);
    const double b = options_.microbatch_size, s = options_.sequence_length, hidden = gpt.hidden;
    const double microbatches = std::ceil(batch_size(job, layout) / (dp * b));

    const double per_node = gpus_per_node(shape);
    const double intra = options_.intra_node_gb_per_s * 1e9, inter = options_.inter_node_gb_per_s * 1e9;

    double compute = 0, all_reduce_values = 8;  // per layer, in b s h (tp-1)/tp
    double accumulation = 0, optimizer = 0;  // a measured achieved_tflops includes both
    const auto achieved = options_.achieved_tflops.find(shape.gpu_type);
    if (achieved != options_.achieved_tflops.end()) {
      compute = 8 * params * b * s / (tp * pp) / (achieved->second * 1e12);
    } else if (const std::optional<Roofline> gpu = roofline(shape.gpu_type)) {
      compute = stage_seconds(*gpu, gpt, tp, pp);
      all_reduce_values = 12;  // the recomputed forward pass all-reduces again
      accumulation = 3 * kFp16Bytes * params / (tp * pp) / gpu->bytes;
      optimizer = kOptimizerBytesPerParameter * params / (tp * pp) / gpu->bytes;
    } else {
      compute = 8 * params * b * s / (tp * pp) / 1e12;  // refused by check(); priced at 1 TFLOP/s
    }
    const double chunks = options_.schedule == PipelineSchedule::interleaved ? options_.model_chunks : 1;
    const double tensor = tp > 1 ? (gpt.layers / pp) * all_reduce_values * b * s * hidden * (tp - 1) / tp *
                                       kFp16Bytes / (tp <= per_node ? intra : inter)
                                 : 0;
    const double pipeline =
        pp > 1 ? chunks * 2 * kFp16Bytes * b * s * hidden / (tp * pp <= per_node ? intra : inter) : 0;
    const double allreduce = dp > 1 ? 2 * (dp - 1) / dp * kFp16Bytes * params / (tp * pp) /
                                          (shape.nodes <= 1 ? intra : inter)
                                    : 0;
    const double excess_gb =
        std::max(0.0, options_.memory.gb_per_gpu(params, layout) - shape.gpu_mem_gb);
    const double offload = 2 * excess_gb / options_.offload_gb_per_s;
    const double bubble = (pp - 1) / chunks;
    return (microbatches + bubble) * (compute + tensor + pipeline + accumulation) + allreduce + optimizer + offload;
  }

  Parallel3dOptions options_;
};

// Reads a table of numbers by GPU type into `values`, adding to its defaults.
void read_by_gpu_type(TableReader& arguments, std::string_view key, ByGpuType& values, double min,
                      double max = std::numeric_limits<double>::infinity()) {
  const toml::table* table = arguments.table(key);
  if (!table) return;
  TableReader rates = arguments.nested(table, arguments.table_name() + "." + std::string(key));
  for (auto&& [type_key, value] : *table) {
    const std::string type(type_key.str());
    if (auto number = rates.number(type, std::nullopt, min, max)) values[type] = *number;
  }
  rates.finish();
}

}  // namespace

std::unique_ptr<ThroughputModel> parse_parallel_3d_model(TableReader& arguments, const ModelSettings&) {
  Parallel3dOptions options;
  read_by_gpu_type(arguments, "achieved_tflops", options.achieved_tflops, kPositive);
  read_by_gpu_type(arguments, "peak_tflops", options.peak_tflops, kPositive);
  read_by_gpu_type(arguments, "matmul_efficiency", options.matmul_efficiency, kPositive, 1);
  read_by_gpu_type(arguments, "memory_gb_per_s", options.memory_gb_per_s, kPositive);
  read_by_gpu_type(arguments, "multiprocessors", options.multiprocessors, 1);
  auto read = [&](std::string_view key, double& value, double min = kPositive) {
    value = arguments.number(key, value, min).value_or(value);
  };
  read("intra_node_gb_per_s", options.intra_node_gb_per_s);
  read("inter_node_gb_per_s", options.inter_node_gb_per_s);
  read("offload_gb_per_s", options.offload_gb_per_s);
  read("sequence_length", options.sequence_length, 1);
  read("microbatch_size", options.microbatch_size, 1);
  read("batch_size", options.batch_size, 1);
  read("default_parameters", options.default_parameters);
  read("hidden_per_layer", options.hidden_per_layer);
  read("layers", options.layers, 0);
  read("hidden_size", options.hidden_size, 0);
  read("attention_heads", options.attention_heads, 0);
  read("vocabulary_size", options.vocabulary_size, 0);
  read("model_chunks", options.model_chunks, 1);
  read("bytes_per_parameter", options.memory.bytes_per_parameter);
  read("activation_gb", options.memory.activation_gb, 0);
  if (auto schedule = arguments.choice("pipeline_schedule", {"1f1b", "interleaved"}, "1f1b"))
    options.schedule = *schedule == "interleaved" ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
  if (arguments.present("model_chunks") && options.schedule != PipelineSchedule::interleaved)
    arguments.error("model_chunks", "model_chunks in [" + arguments.table_name() + "]" +
                                        " applies to pipeline_schedule = \"interleaved\" only");
  return std::make_unique<Parallel3dModel>(std::move(options));
}

}  // namespace tessel

// `parallel-3d`: GPT-style training with data, tensor and pipeline
// parallelism, after Megatron-LM's analysis (Narayanan et al., "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
// SC'21). Work is training steps of the job's global batch, which a
// reconfiguration keeps (as Tenplex does, so that convergence is unchanged).
//
//   [workload.model]
//   name = "parallel-3d"
//   achieved_tflops = { v100 = 39, a100 = 163 }  # per GPU, by GPU type; adds to these
//   intra_node_gb_per_s = 150    # NVLink, per GPU
//   inter_node_gb_per_s = 12.5   # each GPU's share of its node's network
//   offload_gb_per_s = 16        # PCIe, for state that does not fit (below)
//   sequence_length = 2048
//   microbatch_size = 1          # sequences
//   batch_size = 512             # sequences, for jobs whose trace gives none
//   default_parameters = 1.3e9   # for jobs whose trace gives none
//   hidden_per_layer = 128       # GPT aspect ratio h / L
//   bytes_per_parameter = 16     # memory, see tessel/parallelism.hpp
//   activation_gb = 4
//
// The rule. A job of P parameters, global batch B, on G GPUs of a shape in N
// nodes, with layout (tp, pp) and dp = floor(G / (tp pp)) replicas
// (tessel/parallelism.hpp); hidden size h = cbrt(hidden_per_layer · P / 12)
// and L = P / (12 h²) layers, from P = 12 L h² (SC'21, Appendix). Each
// replica takes m = ceil(B / (dp b)) microbatches of b sequences of length s.
// One microbatch on one stage costs
//   compute  8 P b s / (tp pp) FLOPs at achieved_tflops: 2 forward, 4
//            backward and 2 recomputed-forward FLOPs per parameter and token
//            (SC'21, Appendix: 96 B s L h² with activation recomputation);
//   tensor   (L / pp) · 8 b s h (tp-1)/tp fp16 values all-reduced within
//            the tensor-parallel group (SC'21, §3.2: two all-reduces of
//            b s h forward and two backward per layer), at intra-node
//            bandwidth, inter-node if tp GPUs exceed a node;
//   pipeline 2 · 2 b s h bytes to the next stage and back (activation,
//            gradient), at intra-node bandwidth while tp pp GPUs fit in a
//            node, else inter-node.
// A step runs m microbatches plus the pipeline bubble of pp - 1 (1F1B, bubble
// fraction (pp-1)/m, SC'21 §2.2), then all-reduces the fp16 gradients of its
// P/(tp pp) parameters over the dp replicas by ring, 2 (dp-1)/dp of them per
// GPU, at intra-node bandwidth on one node, else inter-node:
//   step = (m + pp - 1) (compute + tensor + pipeline) + allreduce
//   rate = 1 / step    steps per second
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
// (Shoeybi et al., "Megatron-LM", 2019, 30% of its peak), an A100 163
// (SC'21: 52% of its 312 at 3,072 GPUs, communication included, so the model
// is pessimistic there); other GPU types must be given. 150 GB/s is a V100's
// six NVLink links of 25 GB/s, 12.5 GB/s one 100 Gb/s InfiniBand link per
// GPU, 16 GB/s PCIe 3.0 x16. Sequence 2048 and batch 512 are GPT-3's for its
// 1.3B model (Brown et al., 2020, Table 2.1), whose 6.7B to 175B models have
// h / L = 128.
//
// Simplifications: no overlap of communication with computation; bandwidths
// are per GPU and uncontended; embeddings, the s/6h and vocabulary terms of
// the FLOP count, and the extra all-reduces of recomputation are left out;
// microbatch size is fixed (SC'21 tunes it per model); idle GPUs of a layout
// that does not divide G cost nothing and help nothing; the hidden size is
// derived from P, not read from the job.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "models/models.hpp"
#include "tessel/parallelism.hpp"

namespace tessel {

namespace {

struct Parallel3dOptions {
  std::map<std::string, double, std::less<>> achieved_tflops{{"v100", 39}, {"a100", 163}};
  double intra_node_gb_per_s = 150;
  double inter_node_gb_per_s = 12.5;
  double offload_gb_per_s = 16;
  double sequence_length = 2048;
  double microbatch_size = 1;
  double batch_size = 512;
  double default_parameters = 1.3e9;
  double hidden_per_layer = 128;
  ParallelMemory memory;
};

constexpr double kFp16Bytes = 2;
constexpr double kPositive = 1e-9;  // the smallest value read for quantities that must be positive

class Parallel3dModel final : public ThroughputModel {
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

  std::string check(const ClusterState& cluster) const override {
    for (const std::string& type : cluster.gpu_types())
      if (!options_.achieved_tflops.contains(type))
        return "no achieved_tflops for GPU type '" + type + "'";
    return {};
  }

 private:
  double parameters(const JobSpec& job) const {
    return job.parameters > 0 ? job.parameters : options_.default_parameters;
  }

  double step_seconds(const JobSpec& job, const Shape& shape, const JobLayout& layout) const {
    const double tp = layout.tensor_parallel, pp = layout.pipeline_parallel;
    const double dp = data_parallel(layout, shape.gpus);
    const double params = parameters(job);
    const double batch = layout.batch_size > 0 ? layout.batch_size
                         : job.batch_size > 0  ? job.batch_size
                                               : options_.batch_size;
    const double b = options_.microbatch_size, s = options_.sequence_length;
    const double hidden = std::cbrt(options_.hidden_per_layer * params / 12);
    const double layers = params / (12 * hidden * hidden);
    const double microbatches = std::ceil(batch / (dp * b));

    const double per_node = gpus_per_node(shape);
    const double intra = options_.intra_node_gb_per_s * 1e9, inter = options_.inter_node_gb_per_s * 1e9;
    const auto tflops = options_.achieved_tflops.find(shape.gpu_type);
    const double flops = (tflops != options_.achieved_tflops.end() ? tflops->second : 1) * 1e12;

    const double compute = 8 * params * b * s / (tp * pp) / flops;
    const double tensor = tp > 1 ? (layers / pp) * 8 * b * s * hidden * (tp - 1) / tp * kFp16Bytes /
                                       (tp <= per_node ? intra : inter)
                                 : 0;
    const double pipeline = pp > 1 ? 2 * kFp16Bytes * b * s * hidden / (tp * pp <= per_node ? intra : inter) : 0;
    const double allreduce = dp > 1 ? 2 * (dp - 1) / dp * kFp16Bytes * params / (tp * pp) /
                                          (shape.nodes <= 1 ? intra : inter)
                                    : 0;
    const double excess_gb =
        std::max(0.0, options_.memory.gb_per_gpu(params, layout) - shape.gpu_mem_gb);
    const double offload = 2 * excess_gb / options_.offload_gb_per_s;
    return (microbatches + pp - 1) * (compute + tensor + pipeline) + allreduce + offload;
  }

  Parallel3dOptions options_;
};

}  // namespace

std::unique_ptr<ThroughputModel> parse_parallel_3d_model(TableReader& arguments, const ModelSettings&) {
  Parallel3dOptions options;
  if (const toml::table* table = arguments.table("achieved_tflops")) {
    TableReader rates = arguments.nested(table, arguments.table_name() + ".achieved_tflops");
    for (auto&& [key, value] : *table) {
      const std::string type(key.str());
      if (auto tflops = rates.number(type, std::nullopt, kPositive)) options.achieved_tflops[type] = *tflops;
    }
    rates.finish();
  }
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
  read("bytes_per_parameter", options.memory.bytes_per_parameter);
  read("activation_gb", options.memory.activation_gb, 0);
  return std::make_unique<Parallel3dModel>(std::move(options));
}

}  // namespace tessel

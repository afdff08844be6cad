// 3D parallelism: how a job that splits its model over tensor- and
// pipeline-parallel GPUs and replicates the split data-parallel uses the GPUs
// it holds, and what each GPU must keep in memory.
//
// Throughput models that price a JobLayout (parallel-3d) and elasticity
// plugins that choose one (tenplex, dp_only) read the same rules here, so
// that both agree on which layouts exist for an allocation and which fit.
//
// The layout (Megatron-LM; Narayanan et al., SC'21, §2-3): tp GPUs split each
// layer (within a node: its all-reduces need NVLink), pp stages split the
// layers, and dp = floor(gpus / (tp x pp)) replicas of that split train on
// parts of the batch. GPUs beyond dp x tp x pp stay idle.
//
// Memory on each GPU:
//   bytes_per_parameter x parameters / (tp x pp)   weights, gradients and optimizer state
//   + activation_gb
// With mixed-precision Adam a parameter costs 16 bytes: fp16 weight and
// gradient (2 + 2), fp32 master weight, momentum and variance (4 + 4 + 4)
// (Rajbhandari et al., "ZeRO", SC'20, §3.1). Each GPU keeps the state of its
// own shard only. `activation_gb` is a per-GPU reserve for activations and
// workspace: with full activation recomputation, as Megatron-LM trains large
// GPT models, the first pipeline stage keeps the input of each of its L/pp
// layers for pp microbatches in flight, 2·s·b·h·L bytes whatever tp and pp
// (about 1 GB for a 20B GPT at sequence 2048 and microbatch 1), plus one
// layer's recomputed activations, about 1 GB / tp (Korthikanti et al.,
// "Reducing Activation Recomputation in Large Transformer Models", 2022,
// §4). Simplification: that reserve is one number, the same for every model
// size and layout.
#pragma once

#include <vector>

#include "tessel/cluster.hpp"
#include "tessel/job.hpp"

namespace tessel {

// Model replicas a layout makes of `gpus` GPUs: 0 when one split needs more.
inline int data_parallel(const JobLayout& layout, int gpus) {
  const int split = layout.tensor_parallel * layout.pipeline_parallel;
  return split > 0 ? gpus / split : 0;
}

// The GPUs a tensor-parallel group may span: those of one node, the job's
// GPUs taken as evenly spread over its nodes (a Shape does not say more).
inline int gpus_per_node(const Shape& shape) {
  const int nodes = shape.nodes > 0 ? shape.nodes : 1;
  return shape.gpus / nodes > 0 ? shape.gpus / nodes : 1;
}

// Every (tensor, pipeline) split a shape admits: tp a power of two that
// divides gpus_per_node(shape), tp x pp at most shape.gpus. The batch size
// is the shape's. Ordered by tp, then pp.
inline std::vector<JobLayout> parallel_layouts(const Shape& shape) {
  std::vector<JobLayout> layouts;
  const int per_node = gpus_per_node(shape);
  for (int tp = 1; tp <= per_node; tp *= 2) {
    if (per_node % tp != 0) break;  // a larger power of two divides it neither
    for (int pp = 1; tp * pp <= shape.gpus; ++pp)
      layouts.push_back({shape.layout.batch_size, tp, pp});
  }
  return layouts;
}

struct ParallelMemory {
  double bytes_per_parameter = 16;
  double activation_gb = 4;

  // GB each GPU of `layout` needs for a model of `parameters` (0: unknown,
  // counted as activations only).
  double gb_per_gpu(double parameters, const JobLayout& layout) const {
    const int split = layout.tensor_parallel * layout.pipeline_parallel;
    return bytes_per_parameter * parameters / (split > 0 ? split : 1) / 1e9 + activation_gb;
  }
  bool fits(double parameters, const JobLayout& layout, double gpu_mem_gb) const {
    return gb_per_gpu(parameters, layout) <= gpu_mem_gb;
  }
};

}  // namespace tessel

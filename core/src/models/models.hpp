// Built-in throughput models, chosen by `[workload] model` (or `[serve] model`):
//   model = "linear"                                 a name alone, or
//   model = { name = "gavel-table", path = "..." }   a name with arguments.
// Config reads the name (config/workload_settings.hpp); each model reads its
// own arguments here, when it is built.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "config/workload_settings.hpp"
#include "tessel/throughput.hpp"

namespace tessel {

// `arguments` reads the model's own keys (the table, minus `name`); `model`
// is where they came from, for models that wrap another.
using ModelParser = std::unique_ptr<ThroughputModel> (*)(TableReader& arguments, const ModelSettings& model);

struct ModelKind {
  std::string_view name;
  ModelParser parse;
  std::string_view description;
};

std::span<const ModelKind> throughput_models();

// A model whose work unit is a known number of floating-point operations
// (parallel-3d: one training step's, as the paper it follows counts them), so
// that its rate can be told as FLOP/s per GPU (`tessel price`).
class FlopCount {
 public:
  virtual ~FlopCount() = default;
  virtual double flops_per_unit(const JobSpec& job, const Shape& shape) const = 0;

 protected:
  FlopCount() = default;
  FlopCount(const FlopCount&) = default;
  FlopCount& operator=(const FlopCount&) = default;
};

// Builds the model: checks its name and arguments and reads its data files.
// Null after reporting each problem to `diagnostics`, located at the
// config's keys.
std::shared_ptr<const ThroughputModel> build_throughput_model(const ModelSettings& model, Diagnostics& diagnostics);
// The same; throws ConfigError listing the problems.
std::shared_ptr<const ThroughputModel> build_throughput_model(const ModelSettings& model);

}  // namespace tessel

// Built-in throughput models, chosen by `[workload] model`:
//   model = "linear"                                 a name alone, or
//   model = { name = "gavel-table", path = "..." }   a name with arguments.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "config/toml_document.hpp"
#include "tessel/throughput.hpp"

namespace tessel {

// `arguments` reads the model's own keys (the inline table, minus `name`).
using ModelParser = std::unique_ptr<ThroughputModel> (*)(TableReader& arguments,
                                                         const TomlDocument& document);

struct ModelKind {
  std::string_view name;
  ModelParser parse;
  std::string_view description;
};

std::span<const ModelKind> throughput_models();

// Reads `model` from [workload]; "linear" when absent. Null after reporting
// a diagnostic.
std::shared_ptr<const ThroughputModel> read_throughput_model(TableReader& workload,
                                                             const TomlDocument& document);

}  // namespace tessel

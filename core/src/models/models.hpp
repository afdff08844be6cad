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

// Reads the model named by `key` in `parent` (a name, or a table with
// `name` and the model's arguments); "linear" when absent. Null after
// reporting a diagnostic. Models that wrap another read it the same way.
std::shared_ptr<const ThroughputModel> read_throughput_model(TableReader& parent,
                                                             const TomlDocument& document,
                                                             std::string_view key = "model");

}  // namespace tessel

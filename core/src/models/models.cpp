#include "models/models.hpp"

#include <string>
#include <vector>

namespace tessel {

std::unique_ptr<ThroughputModel> parse_linear_model(TableReader&, const ModelSettings&);
std::unique_ptr<ThroughputModel> parse_amdahl_model(TableReader&, const ModelSettings&);
std::unique_ptr<ThroughputModel> parse_gavel_table_model(TableReader&, const ModelSettings&);
std::unique_ptr<ThroughputModel> parse_placement_penalty_model(TableReader&, const ModelSettings&);
std::unique_ptr<ThroughputModel> parse_pollux_apps_model(TableReader&, const ModelSettings&);
std::unique_ptr<ThroughputModel> parse_synergy_sensitivity_model(TableReader&, const ModelSettings&);
std::unique_ptr<ThroughputModel> parse_parallel_3d_model(TableReader&, const ModelSettings&);

std::span<const ModelKind> throughput_models() {
  static const ModelKind kinds[] = {
      {"linear", parse_linear_model, "GPU-seconds of work, linear speedup, placement-blind"},
      {"amdahl", parse_amdahl_model, "GPU-seconds of work, sub-linear speedup by Amdahl's law, placement-blind"},
      {"gavel-table", parse_gavel_table_model, "steps at Gavel's measured throughputs, by GPU type and count"},
      {"placement-penalty", parse_placement_penalty_model, "a base model, slowed down for jobs spread over nodes or racks"},
      {"pollux-apps", parse_pollux_apps_model,
       "Pollux's application traces: progress at the initial batch size's efficiency, placement- and "
       "batch-size-aware"},
      {"synergy-sensitivity", parse_synergy_sensitivity_model,
       "Synergy's CPU/memory sensitivity profiles: GPU-seconds at the GPU-proportional share"},
      {"parallel-3d", parse_parallel_3d_model,
       "steps of GPT-style training with data, tensor and pipeline parallelism (Megatron-LM), memory-aware"},
  };
  return kinds;
}

std::shared_ptr<const ThroughputModel> build_throughput_model(const ModelSettings& model, Diagnostics& diagnostics) {
  if (!model.name) return nullptr;  // reported when read
  for (const auto& kind : throughput_models()) {
    if (kind.name != *model.name) continue;
    TableReader arguments(model.arguments, diagnostics);
    std::shared_ptr<const ThroughputModel> built = kind.parse(arguments, model);
    arguments.finish();
    return built;
  }
  std::string valid;
  for (const auto& kind : throughput_models()) valid += (valid.empty() ? "" : ", ") + std::string(kind.name);
  diagnostics.error(model.where, "unknown throughput model '" + *model.name + "' (valid: " + valid + ")");
  return nullptr;
}

std::shared_ptr<const ThroughputModel> build_throughput_model(const ModelSettings& model) {
  Diagnostics diagnostics;
  std::shared_ptr<const ThroughputModel> built = build_throughput_model(model, diagnostics);
  diagnostics.raise_if_any();
  return built;
}

}  // namespace tessel

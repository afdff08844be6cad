#include "models/models.hpp"

#include <string>
#include <vector>

namespace tessel {

std::unique_ptr<ThroughputModel> parse_linear_model(TableReader&, const TomlDocument&);
std::unique_ptr<ThroughputModel> parse_amdahl_model(TableReader&, const TomlDocument&);
std::unique_ptr<ThroughputModel> parse_gavel_table_model(TableReader&, const TomlDocument&);
std::unique_ptr<ThroughputModel> parse_placement_penalty_model(TableReader&, const TomlDocument&);
std::unique_ptr<ThroughputModel> parse_pollux_apps_model(TableReader&, const TomlDocument&);
std::unique_ptr<ThroughputModel> parse_synergy_sensitivity_model(TableReader&, const TomlDocument&);
std::unique_ptr<ThroughputModel> parse_parallel_3d_model(TableReader&, const TomlDocument&);

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

std::shared_ptr<const ThroughputModel> read_throughput_model(TableReader& workload,
                                                             const TomlDocument& document,
                                                             std::string_view key) {
  std::vector<std::string> names;
  for (const auto& kind : throughput_models()) names.emplace_back(kind.name);
  auto unknown = [&](const std::string& name) {
    std::string valid;
    for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
    workload.error(key, "unknown throughput model '" + name + "' (valid: " + valid + ")");
    return nullptr;
  };

  const toml::node* node = workload.node(key);
  const toml::table* arguments = nullptr;
  std::string name = "linear";
  if (node != nullptr && node->is_string()) {
    name = node->as_string()->get();
  } else if (node != nullptr && node->is_table()) {
    arguments = node->as_table();
    const auto* name_node = arguments->get("name");
    if (name_node == nullptr || !name_node->is_string()) {
      workload.error(key, "'" + std::string(key) + "' in [" + workload.table_name() + "] needs a string 'name'");
      return nullptr;
    }
    name = name_node->as_string()->get();
  } else if (node != nullptr) {
    workload.error(key, "'" + std::string(key) + "' in [" + workload.table_name() +
                            "] must be a model name or a table, got " + std::string(type_name(*node)));
    return nullptr;
  }
  for (const auto& kind : throughput_models()) {
    if (kind.name != name) continue;
    TableReader reader = workload.nested(arguments, workload.table_name() + "." + std::string(key));
    if (arguments) reader.string("name", std::nullopt);
    std::shared_ptr<const ThroughputModel> model = kind.parse(reader, document);
    reader.finish();
    return model;
  }
  return unknown(name);
}

}  // namespace tessel

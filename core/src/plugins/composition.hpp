// Composing a scheduler: the four plugins of [scheduler], found, checked
// against their declared argument schemas and created.
#pragma once

#include <cstdint>
#include <memory>

#include "config/experiment.hpp"
#include "plugins/registry.hpp"
#include "tessel/stages.hpp"

namespace tessel {

struct ComposedScheduler {
  PluginPtr<AdmissionPolicy> admission;
  PluginPtr<AllocationPolicy> allocation;
  PluginPtr<PlacementPolicy> placement;
  PluginPtr<ElasticityPolicy> elasticity;
  // By stage: copies of the records, which live in the registry (plain data;
  // a scheduler may outlive the registry it was composed from). All zero,
  // names empty, where a test composed the stages by hand.
  std::array<PluginInfo, 4> info{};
  // Owns the slot numbering the plugins were given.
  std::shared_ptr<SlotRegistry> slots;

  const PluginInfo& stage_info(PluginKind kind) const {
    return info[static_cast<std::size_t>(kind) - 1];
  }
  // True when any stage may change its mind as time passes (see Plugin).
  bool time_sensitive() const;
  // True when any stage may read a running job's progress (see Plugin).
  bool reads_progress() const;
};

// Checks a stage's arguments against the plugin's schema and the arguments
// its hosted code declares (a Python class's), if it hosts any; returns them
// with defaults filled in. Problems go to `diagnostics`. `cluster_gpu_types`:
// the cluster's GPU types, which arguments declared kClusterGpuTypes must
// name; nullptr where the cluster is not known yet (real nodes, before
// agents join), leaving that check to the plugin.
PluginArgs check_arguments(const StageConfig& stage, const PluginEntry& entry,
                           const std::string& config_directory, Diagnostics& diagnostics,
                           const std::vector<std::string>* cluster_gpu_types = nullptr);

// A stage written as one string: a plugin name, optionally followed by its
// arguments as a TOML inline table ("load_based { factor = 1.4 }"). Throws
// ConfigError.
StageConfig parse_stage(PluginKind kind, std::string_view text);

// The plugin as its stage's interface; throws PluginLoadError (wrong_kind)
// if its class does not implement the stage its info record names.
template <class Stage>
PluginPtr<Stage> as_stage(PluginPtr<Plugin> plugin, const StageConfig& stage) {
  auto* typed = dynamic_cast<Stage*>(plugin.get());
  if (typed == nullptr)
    throw PluginLoadError(LoadError::wrong_kind, "plugin '" + stage.plugin + "' declares itself " +
                                                     std::string(to_string(stage.kind)) +
                                                     " plugin but its class does not implement that stage");
  PluginDeleter deleter = plugin.get_deleter();
  plugin.release();
  return PluginPtr<Stage>(typed, std::move(deleter));
}

// Finds, checks and creates one plugin; throws ConfigError located at the stage.
PluginPtr<Plugin> create_plugin(const StageConfig& stage, PluginRegistry& registry, std::uint64_t seed,
                                SlotRegistry& slots, const std::string& config_directory,
                                const std::vector<std::string>* cluster_gpu_types = nullptr);

// Finds, checks and creates the four plugins; throws ConfigError with every
// problem, located in the config file.
// `config_directory` is what relative paths in plugin arguments are relative to.
// `cluster_gpu_types` as for check_arguments.
ComposedScheduler compose_scheduler(const SchedulerConfig& config, PluginRegistry& registry,
                                    std::uint64_t seed, const std::string& config_directory = {},
                                    const std::vector<std::string>* cluster_gpu_types = nullptr);

}  // namespace tessel

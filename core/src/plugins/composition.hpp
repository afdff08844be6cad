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
  std::array<const PluginInfo*, 4> info{};  // by stage
  // Owns the slot numbering the plugins were given.
  std::shared_ptr<SlotRegistry> slots;

  const PluginInfo& stage_info(PluginKind kind) const {
    return *info[static_cast<std::size_t>(kind) - 1];
  }
  // True when any stage may change its mind as time passes (see Plugin).
  bool time_sensitive() const;
};

// Checks a stage's arguments against the plugin's schema; returns them with
// defaults filled in. Problems go to `diagnostics`.
PluginArgs check_arguments(const StageConfig& stage, const PluginInfo& info, Diagnostics& diagnostics);

// Finds, checks and creates the four plugins; throws ConfigError with every
// problem, located in the config file.
// `config_directory` is what relative paths in plugin arguments are relative to.
ComposedScheduler compose_scheduler(const SchedulerConfig& config, PluginRegistry& registry,
                                    std::uint64_t seed, const std::string& config_directory = {});

}  // namespace tessel

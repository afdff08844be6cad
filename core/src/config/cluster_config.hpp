// [cluster]: the machines, described in one of these ways —
//   nodes = 32, gpus_per_node = 4, ...   a uniform cluster
//   [[cluster.groups]] count = 9, ...    groups of identical nodes (heterogeneous GPUs)
//   preset = "philly"                    a published cluster (see cluster_presets())
//   tiresias_spec = "n32g4.csv"          Tiresias's cluster spec (optionally with gpu_type)
//   openb_nodes = "nodes.csv"            the Alibaba 2023 trace's node list
// — plus [[cluster.events]]: nodes added, removed, failed or repaired at given times.
// Throws TraceError for a malformed spec file.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/toml_document.hpp"
#include "tessel/cluster.hpp"

namespace tessel {

struct ClusterEvent {
  enum class Action { add, remove, fail, repair };
  double at = 0;  // seconds since the start of the run
  Action action = Action::add;
  std::vector<std::string> nodes;  // remove, fail, repair: node names
  std::vector<NodeSpec> added;     // add: the new nodes
};

struct ClusterConfig {
  std::vector<NodeSpec> nodes;
  std::vector<ClusterEvent> events;  // by time
};

struct ClusterPreset {
  std::string_view name;
  std::string_view description;
  std::vector<NodeSpec> (*nodes)();
};

std::span<const ClusterPreset> cluster_presets();

ClusterConfig read_cluster_config(TableReader& cluster);

}  // namespace tessel

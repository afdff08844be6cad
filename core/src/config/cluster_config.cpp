#include "config/cluster_config.hpp"

#include <algorithm>
#include <set>

#include "config/cluster_specs.hpp"

namespace tessel {

namespace {

struct Group {
  int count;
  NodeSpec node;
  int nodes_per_rack;
};

// Names nodes n0, n1, ... across groups; each group starts a new rack.
void append_groups(const std::vector<Group>& groups, std::vector<NodeSpec>& nodes) {
  int rack = nodes.empty() ? 0 : nodes.back().rack + 1;
  for (const Group& group : groups) {
    for (int i = 0; i < group.count; ++i) {
      NodeSpec node = group.node;
      node.name = "n" + std::to_string(nodes.size());
      node.rack = rack + i / group.nodes_per_rack;
      nodes.push_back(std::move(node));
    }
    rack += (group.count + group.nodes_per_rack - 1) / group.nodes_per_rack;
  }
}

std::vector<NodeSpec> from_groups(const std::vector<Group>& groups) {
  std::vector<NodeSpec> nodes;
  append_groups(groups, nodes);
  return nodes;
}

NodeSpec node(std::string gpu_type, int gpus, double cpus, double mem_gb, double gpu_mem_gb = 32) {
  NodeSpec spec;
  spec.gpu_type = std::move(gpu_type);
  spec.gpus = gpus;
  spec.cpus = cpus;
  spec.mem_gb = mem_gb;
  spec.gpu_mem_gb = gpu_mem_gb;
  return spec;
}

// Reads the keys shared by a uniform cluster, a group and an added group.
// `count_key` is "nodes" or "count".
std::optional<Group> read_group(TableReader& reader, std::string_view count_key) {
  const auto count = reader.integer(count_key, std::nullopt, 1, 1'000'000);
  const auto gpus = reader.integer("gpus_per_node", std::nullopt, 1, 1024);
  const auto type = reader.string("gpu_type", "v100");
  const auto cpus = reader.number("cpus_per_node", 32, 0);
  const auto mem = reader.number("mem_gb_per_node", 256, 0);
  const auto per_rack = reader.integer("nodes_per_rack", count.value_or(1), 1);
  const auto gpu_mem = reader.number("gpu_mem_gb", 32, 0.1);
  if (!count || !gpus || !type || !cpus || !mem || !per_rack || !gpu_mem) return std::nullopt;
  Group group{static_cast<int>(*count), node(*type, static_cast<int>(*gpus), *cpus, *mem), static_cast<int>(*per_rack)};
  group.node.gpu_mem_gb = *gpu_mem;
  return group;
}

ClusterEvent::Action read_action(TableReader& reader, ClusterEvent& event) {
  const char* actions[] = {"add", "remove", "fail", "repair"};
  int found = 0;
  for (const char* action : actions) found += reader.node(action) != nullptr;  // each is a known key
  if (found != 1) {
    reader.error("", "each [[cluster.events]] needs exactly one of add, remove, fail, repair");
    return ClusterEvent::Action::add;
  }
  if (const toml::table* add = reader.table("add")) {
    TableReader group_reader = reader.nested(add, reader.table_name() + ".add");
    if (auto group = read_group(group_reader, "count")) event.added = from_groups({*group});
    group_reader.finish();
    return ClusterEvent::Action::add;
  }
  for (std::size_t i = 1; i < 4; ++i) {
    if (!reader.present(actions[i])) continue;
    event.nodes = reader.strings(actions[i], std::nullopt).value_or(std::vector<std::string>{});
    return static_cast<ClusterEvent::Action>(i);
  }
  return ClusterEvent::Action::add;
}

void read_events(TableReader& cluster, ClusterConfig& config) {
  const toml::node* node = cluster.node("events");
  if (node == nullptr) return;
  const toml::array* events = node->as_array();
  if (events == nullptr || !events->is_array_of_tables()) {
    cluster.error("events", "'events' in [cluster] must be an array of tables ([[cluster.events]])");
    return;
  }
  std::set<std::string> names;
  for (const NodeSpec& spec : config.nodes) names.insert(spec.name);
  int next_rack = config.nodes.empty() ? 0 : config.nodes.back().rack + 1;
  for (const toml::node& element : *events) {
    TableReader reader = cluster.nested(element.as_table(), "cluster.events");
    ClusterEvent event;
    event.at = reader.number("at_seconds", std::nullopt, 0).value_or(0);
    event.action = read_action(reader, event);
    reader.finish();
    // Added nodes continue the numbering and get racks of their own; later
    // events may name them.
    int racks_used = 0;
    for (NodeSpec& added : event.added) {
      added.name = "n" + std::to_string(names.size());
      racks_used = std::max(racks_used, added.rack + 1);
      added.rack += next_rack;
      names.insert(added.name);
    }
    next_rack += racks_used;
    for (const std::string& name : event.nodes)
      if (!names.contains(name))
        reader.error(ClusterEvent::Action::remove == event.action ? "remove"
                     : ClusterEvent::Action::fail == event.action ? "fail"
                                                                  : "repair",
                     "no node named '" + name + "' in the cluster");
    config.events.push_back(std::move(event));
  }
  std::stable_sort(config.events.begin(), config.events.end(),
                   [](const ClusterEvent& a, const ClusterEvent& b) { return a.at < b.at; });
}

}  // namespace

std::span<const ClusterPreset> cluster_presets() {
  static const ClusterPreset presets[] = {
      {"philly", "Microsoft Philly (ATC'19): 321 nodes x 2 GPUs (12 GB) + 231 nodes x 8 GPUs (24 GB)",
       [] {
         return from_groups({{321, node("12gb", 2, 24, 256, 12), 32}, {231, node("24gb", 8, 48, 512, 24), 16}});
       }},
      {"blox", "Blox (EuroSys'24) simulations: 32 nodes x 4 V100",
       [] { return from_groups({{32, node("v100", 4, 32, 256, 16), 32}}); }},
      {"gavel", "Gavel (OSDI'20) simulations: 36 V100 + 36 P100 + 36 K80 GPUs, 4 per node",
       [] {
         return from_groups({{9, node("v100", 4, 32, 256, 16), 9},
                             {9, node("p100", 4, 32, 256, 16), 9},
                             {9, node("k80", 4, 32, 256, 12), 9}});
       }},
      {"synergy", "Synergy (OSDI'22) simulations: 16 servers x 8 GPUs, 24 CPUs and 500 GB each",
       [] { return from_groups({{16, node("v100", 8, 24, 500, 16), 16}}); }},
      {"pollux", "Pollux (OSDI'21) testbed: 16 nodes x 4 T4 GPUs, 48 CPUs and 192 GB each",
       [] { return from_groups({{16, node("t4", 4, 48, 192, 16), 16}}); }},
  };
  return presets;
}

ClusterConfig read_cluster_config(TableReader& reader) {
  ClusterConfig config;
  const bool has_preset = reader.present("preset");
  const bool has_groups = reader.present("groups");
  const bool has_tiresias = reader.present("tiresias_spec");
  const bool has_openb = reader.present("openb_nodes");
  const bool has_uniform = reader.present("nodes") || reader.present("gpus_per_node");
  if (has_preset + has_groups + has_tiresias + has_openb + has_uniform > 1) {
    reader.error("", "[cluster] takes one of: 'preset', [[cluster.groups]], 'tiresias_spec', 'openb_nodes', "
                     "or 'nodes' with 'gpus_per_node'");
    reader.skip_unknown_keys();  // which keys are valid depends on the one chosen
  } else if (has_tiresias) {
    const auto path = reader.input_path("tiresias_spec", std::nullopt);
    const auto type = reader.string("gpu_type", std::string(kUnnamedGpuType));
    if (path && type) {
      config.nodes = read_tiresias_cluster(*path);
      for (NodeSpec& node : config.nodes) node.gpu_type = *type;
    }
  } else if (has_openb) {
    if (const auto path = reader.input_path("openb_nodes", std::nullopt)) config.nodes = read_openb_nodes(*path);
  } else if (has_preset) {
    std::vector<std::string> names;
    for (const ClusterPreset& preset : cluster_presets()) names.emplace_back(preset.name);
    if (auto name = reader.choice("preset", names, std::nullopt))
      for (const ClusterPreset& preset : cluster_presets())
        if (preset.name == *name) config.nodes = preset.nodes();
  } else if (has_groups) {
    const toml::node* node = reader.node("groups");
    const toml::array* groups = node->as_array();
    if (groups == nullptr || !groups->is_array_of_tables() || groups->empty()) {
      reader.error("groups", "'groups' in [cluster] must be an array of tables ([[cluster.groups]])");
    } else {
      std::vector<Group> parsed;
      for (const toml::node& element : *groups) {
        TableReader group_reader = reader.nested(element.as_table(), "cluster.groups");
        if (auto group = read_group(group_reader, "count")) parsed.push_back(*group);
        group_reader.finish();
      }
      config.nodes = from_groups(parsed);
    }
  } else if (auto group = read_group(reader, "nodes")) {
    config.nodes = from_groups({*group});
  }
  read_events(reader, config);
  reader.finish();
  return config;
}

}  // namespace tessel

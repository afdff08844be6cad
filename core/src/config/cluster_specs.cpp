// Reading the cluster specs of Tiresias and of the openb trace into nodes.
//
// Choices:
// - Tiresias's run_sim.py expects exactly one row after the header (it
//   asserts so, and a later row would silently replace the first); a file
//   with none or with more is an error here.
// - Tiresias numbers nodes per switch (switch.py), hence "s1n0" for the
//   first node under the second switch.
// - Sizes are capped as [cluster] caps them: at most 1,000,000 nodes of at
//   most 1,024 GPUs, so that a stray digit in a Tiresias spec cannot ask for
//   a billion nodes.
// - The openb lists give no topology: every node is in rack 0. Nodes without
//   GPUs (in openb_node_list_all_node.csv) are refused: tessel's nodes exist
//   to hold GPUs, and openb_node_list_gpu_node.csv is the list without them.
#include "config/cluster_specs.hpp"

#include <unordered_map>

#include "common/csv_table.hpp"
#include "common/text.hpp"
#include "engine/errors.hpp"

namespace tessel {

namespace {
constexpr std::int64_t kMaxNodes = 1'000'000;
constexpr std::int64_t kMaxGpusPerNode = 1024;
}  // namespace

std::vector<NodeSpec> read_tiresias_cluster(const std::string& path) {
  CsvTable table(path, {"num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node"}, {});
  if (!table.next()) throw TraceError(path, table.line(), "", "expected a row after the header, found none");
  const auto switches = table.integer("num_switch", 1, kMaxNodes);
  const auto nodes_per_switch = table.integer("num_node_p_switch", 1, kMaxNodes);
  if (switches * nodes_per_switch > kMaxNodes)
    table.fail("num_node_p_switch", "expected at most " + count_text(kMaxNodes) + " nodes in all, got " +
                                        std::to_string(switches) + " switches of " +
                                        std::to_string(nodes_per_switch));
  NodeSpec node;
  node.gpu_type = kUnnamedGpuType;
  node.gpus = static_cast<int>(table.integer("num_gpu_p_node", 1, kMaxGpusPerNode));
  node.cpus = table.number("num_cpu_p_node", 0);
  node.mem_gb = table.number("mem_p_node", 0);
  if (table.next()) throw TraceError(path, table.line(), "", "expected one row after the header, found another");

  std::vector<NodeSpec> nodes;
  nodes.reserve(static_cast<std::size_t>(switches * nodes_per_switch));
  for (std::int64_t s = 0; s < switches; ++s)
    for (std::int64_t n = 0; n < nodes_per_switch; ++n) {
      node.name = "s" + std::to_string(s) + "n" + std::to_string(n);
      node.rack = static_cast<int>(s);
      nodes.push_back(node);
    }
  return nodes;
}

std::vector<NodeSpec> read_openb_nodes(const std::string& path) {
  CsvTable table(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, {});
  std::vector<NodeSpec> nodes;
  std::unordered_map<std::string, std::size_t> line_of_name;
  while (table.next()) {
    NodeSpec node;
    node.name = table.required_text("sn");
    if (const auto [first, added] = line_of_name.emplace(node.name, table.line()); !added)
      table.fail("sn", "node '" + node.name + "' is already on line " + std::to_string(first->second));
    node.cpus = static_cast<double>(table.integer("cpu_milli", 0)) / 1000;
    node.mem_gb = static_cast<double>(table.integer("memory_mib", 0)) / 1024;
    node.gpus = static_cast<int>(table.integer("gpu", 1, kMaxGpusPerNode));
    node.gpu_type = table.required_text("model");
    node.rack = 0;
    nodes.push_back(std::move(node));
  }
  if (nodes.empty()) throw TraceError(path, table.line(), "", "expected a row after the header, found none");
  return nodes;
}

}  // namespace tessel

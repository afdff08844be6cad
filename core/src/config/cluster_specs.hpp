// Clusters described by other simulators' files, read into tessel nodes for
// the [cluster] section. Both readers go through CsvTable and throw
// TraceError, naming file, line and field, on malformed input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessel/cluster.hpp"

namespace tessel {

// Tiresias's files name no GPU type, so their nodes get this neutral one;
// whoever needs a real type (a throughput model with per-type data) sets it.
inline constexpr std::string_view kUnnamedGpuType = "gpu";

// A Tiresias cluster spec (SymbioticLab/Tiresias, simulator/cluster_spec.csv,
// n32g4.csv, ...): one row of num_switch,num_node_p_switch,num_gpu_p_node,
// num_cpu_p_node,mem_p_node. One node per switch and slot, named "s<switch>n<node>",
// with rack = switch index, gpu_type kUnnamedGpuType, memory in GB.
std::vector<NodeSpec> read_tiresias_cluster(const std::string& path);

// The node list of Alibaba's 2023 GPU trace (hkust-adsl/kubernetes-scheduler-
// simulator, data/csv/openb_node_list_gpu_node.csv): sn,cpu_milli,memory_mib,
// gpu,model, one node per row. name = sn, gpus = gpu, gpu_type = model,
// cpus = cpu_milli / 1000, mem_gb = memory_mib / 1024, all in rack 0.
std::vector<NodeSpec> read_openb_nodes(const std::string& path);

}  // namespace tessel

// The parsers of the built-in workload kinds; workload.cpp lists them.
#pragma once

#include "workloads/workload.hpp"

namespace tessel {

std::unique_ptr<WorkloadSource> parse_synthetic_workload(TableReader&, const TomlDocument&);
std::unique_ptr<WorkloadSource> parse_csv_workload(TableReader&, const TomlDocument&);

// Resolves a trace path from [workload] relative to the config file.
std::string input_path(TableReader& reader, const TomlDocument& document, std::string_view key);

}  // namespace tessel

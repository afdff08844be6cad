// The parsers of the built-in workload kinds; workload.cpp lists them.
#pragma once

#include "workloads/workload.hpp"

namespace tessel {

std::unique_ptr<WorkloadSource> parse_synthetic_workload(TableReader&, const TomlDocument&);
std::unique_ptr<WorkloadSource> parse_csv_workload(TableReader&, const TomlDocument&);
std::unique_ptr<WorkloadSource> parse_philly_json_workload(TableReader&, const TomlDocument&);

}  // namespace tessel
